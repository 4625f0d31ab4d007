"""Phase 2's passes over the texts, as two plain tasks; each prepared part is streamed by a task of its own,
twice (pipeline/job/phases.py runs them in Beam; tests and other schedulers call `run` directly):

    dedup's decisions for a part -> FinishPart: the part's documents minus the dropped ones (ledgered now,
        with url, language, file and snippet), through the stages after dedup
        (paragraph dedup's cut, decontamination, PII) -> OUTPUT/_finished/<key>.parquet
    -> WritePart: the mix's copies, the write check, the validation and anneal splits -> the part's
        shards (pipeline/job/output.py), and the signatures of the originals in the output

A task's `run` is a generator: it yields `Output(tag, value)` as it goes (a ledger drop, an edit, a stats
line: a part's outputs are never held whole) and returns its typed result; `drain` runs one to the end
into a sink. Dedup itself reads only signatures (pipeline/job/globals/dedup.py), so no step holds documents
beyond one chunk of one part. The second pass exists because the mix's rates and the anneal split
depend on every part's finished tokens.
"""
from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from apache_beam.io.filesystems import FileSystems

from pipeline.counters import ANNEAL_ROWS, REHYDRATE_REPEATS, count, runner
from pipeline.job.holdout import VALID
from pipeline.job.holdout import split as holdout_split
from pipeline.job.mix import Anneal, AnnealPlan, Mix, Rehydration, repeats, weight_of
from pipeline.job.outdir import SIGNATURES_DIR
from pipeline.job.output import ShardWriter
from pipeline.job.parts import PartWriter, finished_path, part_paths, read_rows
from pipeline.job.schema import (
    PART_SCHEMA,
    SIGNATURE_SCHEMA,
    Signature,
    document_from_part,
    document_row,
    edit_rows,
    part_row,
)
from pipeline.job.signed import Decision
from stages.mix import approx_tokens, site_of
from stages.record import Document, Drop
from stages.runner import CHUNK, CHUNK_CHARS, Step

LEDGER, LEDGER_ROWS, FINISHED, SIGNATURE_FILES = "ledger", "ledger_rows", "finished", "signature_files"  # output tags
ANNEAL_TOP = "anneal_top"  # (kind, name, tokens) of each document drawn into the anneal split: kind page, site, lang
ANNEAL_TOP_N = 10          # the largest pages, sites and languages of the anneal split, in report.json
EDITS = "edits"
ANNEAL = "anneal"
STATS = "stats"  # WritePart's stats lines of the main split (and its repeats)

Result = TypeVar("Result")


class Output(NamedTuple):
    """One thing a task emits while it runs: `tag` says what (LEDGER: a Drop, LEDGER_ROWS: a phase-1 ledger row,
    EDITS: an edit-book row, ...), `value` is it."""

    tag: str
    value: Any


Sink = Callable[[str, Any], None]


def drain(outputs: Generator[Output, None, Result], sink: Sink | None = None) -> Result:
    """Runs a task's `run(...)` to its end, each output to `sink(tag, value)`; returns the task's result."""
    try:
        while True:
            tag, value = next(outputs)
            if sink is not None:
                sink(tag, value)
    except StopIteration as stop:
        return stop.value


class Collected(collections.defaultdict):
    """A sink that keeps every output: {tag: [values]} (tests, small runs)."""

    def __init__(self):
        super().__init__(list)

    def __call__(self, tag: str, value: Any) -> None:
        self[tag].append(value)


@dataclasses.dataclass(frozen=True)
class FinishedPart:
    key: str
    documents: int   # written to the finished part
    dropped: int     # by dedup's decisions and the per-document stages


@dataclasses.dataclass(frozen=True)
class WrittenPart:
    key: str
    name: str            # part-FFFFF: its shards' and signature file's name
    rows: int            # written to the training shards (data/), the mix's repeats included
    held_out: int        # written to valid/ instead
    anneal_rows: int     # also written to anneal/ (copies of training rows)
    signatures: int


class _Task:
    """A task whose documents go through a StageRunner (`self._runner`): `setup()` loads the stages' models
    (once a worker), `teardown()` lets them go."""

    _runner: Any

    def setup(self) -> None:
        self._runner.setup()

    def teardown(self) -> None:
        self._runner.teardown()


class FinishPart(_Task):
    """Phase 2's first pass over a part: `run(key, decided, sizes, inputs)` with dedup's Decisions on the part,
    cluster sizes ({id: size}) and, per global stage that edits parts (`hooks`: {its name: its part hook},
    pipeline/job/part_hooks.py), what the scheduler joined to the part for it, writes the part's finished
    documents and yields its phase-1 ledger rows (LEDGER_ROWS), its drops (LEDGER), the edit book's rows of what stages cut from the documents kept (EDITS),
    what the hooks emit (under their stage's tags) and, if `tally`, (id, source, tokens, quality,
    rehydration weight, language, site) of each finished document (FINISHED)."""

    def __init__(self, output: str, steps: Sequence[tuple[str, Step]], tally: bool, snippet_chars: int,
                 deduplicated: bool = False, rehydrate: Rehydration | None = None,
                 hooks: Mapping[str, Any] | None = None):
        self._output, self._tally, self._snippet = output, tally, snippet_chars
        self._deduplicated, self._rehydrate = deduplicated, rehydrate  # cluster sizes are known; their weights
        self._runner = runner([step for _, step in steps])
        self._hooks = dict(hooks or {})

    def run(self, key: str, decided: Iterable[Decision], sizes: Mapping[str, int] | None = None,
            inputs: Mapping[str, Any] | None = None) -> Generator[Output, None, FinishedPart]:
        decisions = {d.id: d for d in decided}
        for name, hook in self._hooks.items():
            hook.begin((inputs or {}).get(name))
        sizes = sizes or {}
        paths = part_paths(self._output, key)
        for row in read_rows(paths["ledger.parquet"]):
            yield Output(LEDGER_ROWS, row)
        out = PartWriter(finished_path(self._output, key), PART_SCHEMA)
        chunk: list[Document] = []
        signatures: dict[str, Signature] = {}
        chars = dropped = 0
        for row in read_rows(paths["docs.parquet"]):
            doc = document_from_part(row)
            decision = decisions.get(doc.id)
            if decision is not None:
                dropped += 1
                yield self._ledgered(doc.drop(decision.stage, decision.reason, decision.detail,
                                              kept_id=decision.kept_id, value=decision.value))
                continue
            if self._deduplicated:
                doc = doc.replace(cluster_size=sizes.get(doc.id, 1))
            for hook in self._hooks.values():
                hook.see(doc, row)
            chunk.append(doc)
            chars += len(doc.text)
            signatures[doc.id] = Signature.of_row(row)  # of the text dedup compared (before PII)
            if len(chunk) >= CHUNK or chars >= CHUNK_CHARS:
                dropped += yield from self._finish(chunk, signatures, out)
                chunk, signatures, chars = [], {}, 0
        dropped += yield from self._finish(chunk, signatures, out)
        documents = out.commit()
        for hook in self._hooks.values():
            yield from hook.end()
        return FinishedPart(key, documents, dropped)

    def _finish(self, chunk: list[Document], signatures: dict[str, Signature], out: PartWriter):
        """The chunk through the stages: kept documents written, the rest yielded; returns how many dropped."""
        kept, drops = self._runner.run(chunk)
        for doc in kept:
            out.add(part_row(doc, signatures[doc.id]))
            for row in edit_rows(doc, self._snippet):
                yield Output(EDITS, row)
            if self._tally:
                yield Output(FINISHED, (doc.id, doc.source, approx_tokens(doc.text), doc.quality_score,
                                        weight_of(self._rehydrate, doc.cluster_size), doc.lang, site_of(doc.url)))
        for drop in drops:
            yield self._ledgered(drop)
        return len(drops)

    def _ledgered(self, drop: Drop) -> Output:
        """To the ledger, with the snippet already cut to the run's length (the job holds its drops until
        their kept copies are resolved)."""
        return Output(LEDGER, dataclasses.replace(drop, snippet=drop.snippet[:self._snippet]))


class WritePart(_Task):
    """Phase 2's second pass over a part: `run(key, rates, totals)` with the mix's rates and the anneal split's
    token totals ({} when off) writes the part's shards and the signatures of its originals in the output
    (signatures/part-FFFFF.parquet), and yields the stats lines of its shards (STATS; VALID and ANNEAL for
    those splits), the mix's and the write check's drops (LEDGER), its signature file's entry
    (SIGNATURE_FILES: path, rows, bytes, SHA-256, for the manifest) and (kind, name, tokens) of what went
    into the anneal split (ANNEAL_TOP)."""

    def __init__(self, output: str, shard_index: Mapping[str, int], write_check, mix: Mix | None,
                 holdout_fraction: float, anneal: Anneal | None, shard_size_mb: float,
                 row_group_rows: int, rehydrate: Rehydration | None = None):
        self._output, self._index, self._runner = output, shard_index, runner([write_check])
        self._rehydrate = rehydrate
        self._mix, self._holdout, self._anneal = mix, holdout_fraction, anneal
        self._shard = (shard_size_mb, row_group_rows)

    def _writer(self, split: str, prefix: str) -> ShardWriter:
        folder = FileSystems.join(self._output, *([split] if split else []), "data")
        return ShardWriter(folder, prefix, *self._shard)

    def run(self, key: str, rates: Mapping[str, float] | None = None,
            totals: Mapping[str, int] | None = None) -> Generator[Output, None, WrittenPart]:
        rates, totals = rates or {}, totals or {}
        name = f"part-{self._index[key]:05d}"
        plan = self._anneal.plan(totals) if self._anneal else None  # the same on every worker: from the side input
        writers = {"": self._writer("", name), "repeats": self._writer("", f"{name}-repeats")}
        if self._holdout:
            writers[VALID] = self._writer(VALID, name)
        if self._anneal:
            writers[ANNEAL] = self._writer(ANNEAL, name)
        signatures = PartWriter(FileSystems.join(self._output, SIGNATURES_DIR, f"{name}.parquet"), SIGNATURE_SCHEMA)
        for row in read_rows(finished_path(self._output, key)):
            doc = document_from_part(row)
            weight = weight_of(self._rehydrate, doc.cluster_size)
            copies = self._mix.draw(doc, rates, count, weight) if self._mix else repeats(doc, weight)
            if weight > 1 and not isinstance(copies, Drop):
                count(REHYDRATE_REPEATS, len(copies) - 1)
            if isinstance(copies, Drop):  # the mix did not draw it
                yield Output(LEDGER, copies)
                continue
            checked, drops = self._runner.run(copies)
            for copy in checked:
                if self._place(copy, row, writers, signatures, plan):
                    tokens = approx_tokens(copy.text)
                    for kind, label in (("page", copy.url or copy.id), ("site", site_of(copy.url)), ("lang", copy.lang)):
                        yield Output(ANNEAL_TOP, (kind, str(label), tokens))
            for drop in drops:
                yield Output(LEDGER, drop)
        signatures.commit()
        yield Output(SIGNATURE_FILES, json.dumps(
            {"path": f"{SIGNATURES_DIR}/{name}.parquet", "rows": signatures.rows, **signatures.digest}))
        rows = {STATS: 0, VALID: 0, ANNEAL: 0}
        for split, writer in writers.items():
            tag = STATS if split in ("", "repeats") else split
            for stats in writer.close():
                rows[tag] += stats.get("rows", 0)
                yield Output(tag, json.dumps(stats))
        return WrittenPart(key, name, rows[STATS], rows[VALID], rows[ANNEAL], signatures.rows)

    def _place(self, doc: Document, row: dict[str, Any], writers: dict, signatures: PartWriter,
               plan: AnnealPlan | None) -> bool:
        """Writes the document to its split; True if it also went into the anneal split."""
        split = holdout_split(doc, self._holdout)
        if split is None:
            return False
        if doc.epoch == 0:
            signatures.add({"id": doc.id, "source": doc.source, "exact_key": row["exact_key"], "bands": row["bands"],
                            "paragraphs": row["paragraphs"]})
        shard_row = document_row(doc)
        if split == VALID:
            writers[VALID].add(shard_row)
            return False
        writers["repeats" if doc.epoch else ""].add(shard_row)
        if self._anneal and self._anneal.pick(doc, plan):
            count(ANNEAL_ROWS)
            writers[ANNEAL].add(shard_row)
            return True
        return False
