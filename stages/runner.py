"""The one way stages run over documents: phase 1 of the job, phase 2's per-document stages, the write
check after the mix, `refinery plan` and `calibrate`, Beam's `ApplyStage`, scripts and benches all call
`StageRunner`. It returns documents and drops, never Beam types; counting and timing are callbacks,
so the job counts into Beam's metrics and a script counts nothing.

    with StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()]) as runner:
        for page in read_warc(fh, source="web"):
            doc = runner(page)                     # a Document that passed every stage, or the first Drop
        kept, drops = runner.run(chunk)            # many documents, each stage over all of them in turn

What it does for every stage, so no caller repeats it:
- a stage that raises drops the document as `error:<ExceptionType>` (the rest go on); a
  StageEnvironmentError (a missing model: every document would fail alike) is raised;
- a stage with `process_batch` (model inference) gets the chunk in one call; if that raises, the
  chunk is run one document at a time to find and ledger the one that fails;
- `Step.sources`: a stage configured for some sources passes the others' documents on unchanged;
  `Step.html_only`: extraction sees only documents read as HTML (text records have no HTML);
- `Step.timeout_s`: a document a stage takes longer on is ledgered as `error:StageTimeout` and noted as
  `<stage>.note.timeout` (stages/time_limit.py);
- `Step.fail_urls`: fault injection (`--inject-error STAGE=URL_PART`), empty in real runs;
- counts `<stage>.in`, `.kept`, `.kept_tokens`, `.drop.<reason>`, `.note.<name>` (a stage's own
  `count`; names from stages/counters.py) and each stage's time per document.
"""
from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from stages import counters as names
from stages.mix import approx_tokens
from stages.record import Document, Drop, Stage, StageEnvironmentError, StageResult
from stages.time_limit import StageTimeout, time_limit

CHUNK = 256        # documents the job takes through the stages together (batched stages see up to this many) ...
CHUNK_CHARS = 32 << 20  # ... or fewer, once their HTML/text holds this many characters (memory per task)

Item = TypeVar("Item")

Count = Callable[[str, int], None]               # (counter name, n)
RecordTime = Callable[[str, float, int], None]   # (stage name, seconds, documents)


def no_count(name: str, n: int = 1) -> None:
    pass


@dataclass(frozen=True)
class Step:
    """A stage and how the job runs it."""

    stage: Stage
    fail_urls: tuple[str, ...] = ()              # --inject-error: raise on documents whose URL holds one
    sources: frozenset[str] = frozenset()        # runs on these sources' documents only; empty: all
    html_only: bool = False                      # extraction: documents read as text pass by uncounted
    timeout_s: float | None = None               # a document taking longer is ledgered as error:StageTimeout

    @property
    def name(self) -> str:
        return self.stage.name

    @property
    def batched(self) -> bool:
        return hasattr(self.stage, "process_batch")


@dataclass
class StageRunner:
    steps: Sequence[Step | Stage]
    count: Count = no_count
    record_time: RecordTime | None = None
    seconds: collections.Counter = field(default_factory=collections.Counter)  # stage name -> time spent

    def __post_init__(self):
        self.steps = [step if isinstance(step, Step) else Step(step) for step in self.steps]

    def setup(self) -> None:
        for step in self.steps:
            step.stage.setup()
            if hasattr(step.stage, "count"):  # stages report rule skips etc. as `<stage>.note.<name>`
                prefix, count = names.note(step.name, ""), self.count
                step.stage.count = lambda name, n=1, prefix=prefix, count=count: count(prefix + name, n)

    def teardown(self) -> None:
        for step in self.steps:
            step.stage.teardown()

    def __enter__(self) -> StageRunner:
        self.setup()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def run(self, docs: Sequence[Document], from_html: Sequence[bool] | None = None,
            ) -> tuple[list[Document], list[Drop]]:
        """Every step over `docs` in order: (the documents that passed them all, the drops in the order they
        were made). `from_html[i]`: document i was read as HTML (default: all were)."""
        items = list(zip([True] * len(docs) if from_html is None else from_html, docs))
        drops: list[Drop] = []
        for step in self.steps:
            todo = [doc for is_html, doc in items if is_html or not step.html_only]
            if not todo:
                continue
            results = iter(self.run_step(step, todo))
            kept = []
            for is_html, doc in items:
                result = doc if step.html_only and not is_html else next(results)
                if isinstance(result, Drop):
                    drops.append(result)
                else:
                    kept.append((is_html, result))
            items = kept
        return [doc for _, doc in items], drops

    def __call__(self, doc: StageResult) -> StageResult:
        """One document through every step: the document that passed them all, or the first Drop."""
        if not isinstance(doc, Document):
            return doc
        kept, drops = self.run([doc])
        return kept[0] if kept else drops[0]

    def kept(self, docs: Iterable[StageResult]) -> Iterator[Document]:
        """The documents of `docs` that pass every step (reader Drops are skipped)."""
        for doc in docs:
            doc = self(doc)
            if isinstance(doc, Document):
                yield doc

    def run_step(self, step: Step, docs: list[Document]) -> list[StageResult]:
        """One step over `docs`: one result per document, in order, each counted."""
        self.count(names.entered(step.name), len(docs))
        if step.batched and not (step.sources and any(doc.source not in step.sources for doc in docs)):
            started = time.perf_counter()
            try:
                if step.fail_urls and any(_injected(step, doc) for doc in docs):
                    raise ValueError("injected fault")  # handled one by one below, like a real failure
                # the whole batch within one document's limit: past it, one at a time, each within its own
                with time_limit(step.timeout_s, step.name, f"a batch of {len(docs)} from {docs[0].id}"):
                    results = step.stage.process_batch(docs)
            except StageEnvironmentError:
                raise
            except (Exception, StageTimeout):  # find the document that fails, ledger it, keep the others
                results = [self._run_one(step, doc) for doc in docs]
            self._timed(step.name, time.perf_counter() - started, len(docs))
        elif step.batched:  # some documents are not for this stage: one at a time, untimed
            results = [self._run_one(step, doc) for doc in docs]
        else:
            results = []
            for doc in docs:
                started = time.perf_counter()
                results.append(self._run_one(step, doc))
                self._timed(step.name, time.perf_counter() - started, 1)
        for result in results:
            self._count_result(step.name, result)
        return results

    def _run_one(self, step: Step, doc: Document) -> StageResult:
        if step.sources and doc.source not in step.sources:
            self.count(names.note(step.name, f"not_for_source.{doc.source}"), 1)
            return doc
        try:
            if _injected(step, doc):
                raise ValueError(f"injected fault in {step.name} (--inject-error)")
            with time_limit(step.timeout_s, step.name, f"{doc.id} ({doc.url})"):
                return step.stage(doc)
        except StageEnvironmentError:
            raise  # every document would fail alike: fail the job with the real cause
        except StageTimeout:
            self.count(names.note(step.name, "timeout"), 1)
            return doc.drop_for_error(step.name, StageTimeout(f"{step.name} took more than {step.timeout_s:g} s on "
                                                              "this document (stage_timeout_s)"))
        except Exception as exc:
            return doc.drop_for_error(step.name, exc)

    def _count_result(self, stage: str, result: StageResult) -> None:
        if isinstance(result, Drop):
            self.count(names.dropped(stage, result.label), 1)
        else:
            count_kept(self.count, stage, approx_tokens(result.text) if result.text else 0)

    def _timed(self, stage: str, seconds: float, documents: int) -> None:
        self.seconds[stage] += seconds
        if self.record_time is not None:
            self.record_time(stage, seconds, documents)


def count_kept(count: Count, stage: str, tokens: int) -> None:
    """A document leaving `stage` towards the output: one document and its tokens (UTF-8 bytes / 4)."""
    count(names.kept(stage), 1)
    if tokens:
        count(names.kept_tokens(stage), tokens)


def _injected(step: Step, doc: Document) -> bool:
    return bool(step.fail_urls) and any(part in (doc.url or "") for part in step.fail_urls)


def held_chars(doc: Document) -> int:
    """Characters a document holds (HTML and text): what CHUNK_CHARS counts."""
    return len(doc.html or "") + len(doc.text or "")


def chunks(items: Iterable[Item], chars: Callable[[Item], int]) -> Iterator[list[Item]]:
    """`items` in lists of CHUNK, or fewer once they hold CHUNK_CHARS characters (`chars` of each): how phase 1
    takes documents through the stages (a list is handed on as soon as it is full, before the next item is read)."""
    chunk: list[Item] = []
    held = 0
    for item in items:
        chunk.append(item)
        held += chars(item)
        if len(chunk) >= CHUNK or held >= CHUNK_CHARS:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk
