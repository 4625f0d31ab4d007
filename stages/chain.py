"""Stages run one after another on single documents, without Beam: for scripts, benchmarks and
notebooks. The first Drop ends a document's way, as in the job (where Beam routes it to the ledger).

    with StageChain([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()]) as chain:
        for page in read_warc(fh, source="web"):
            doc = chain(page)          # a Document that passed every stage, or the first Drop
"""
from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Iterator, Sequence

from stages.record import Document, Stage, StageResult


class StageChain:
    def __init__(self, stages: Sequence[Stage], timed: bool = False):
        self.stages = list(stages)
        self.timed = timed
        self.seconds: collections.Counter = collections.Counter()   # stage name -> time spent (timed=True)

    def __enter__(self) -> StageChain:
        for stage in self.stages:
            stage.setup()
        return self

    def __exit__(self, *exc) -> None:
        for stage in self.stages:
            stage.teardown()

    def __call__(self, doc: StageResult) -> StageResult:
        for stage in self.stages:
            if not isinstance(doc, Document):
                break
            if self.timed:
                started = time.perf_counter()
                doc = stage(doc)
                self.seconds[stage.name] += time.perf_counter() - started
            else:
                doc = stage(doc)
        return doc

    def kept(self, docs: Iterable[StageResult]) -> Iterator[Document]:
        """The documents of `docs` that pass every stage (reader Drops are skipped)."""
        for doc in docs:
            doc = self(doc)
            if isinstance(doc, Document):
                yield doc
