"""Beam wiring of the stages. No cleaning logic lives here: only reading, routing and counting.

Counters (namespace `refinery`), read back into the report:
  warc.record.<type>   every WARC record seen, by WARC-Type
  <stage>.in           documents entering a stage (warc.in: response records + unreadable file tails)
  <stage>.kept         documents leaving a stage towards the output
  <stage>.drop.<reason> documents sent to the ledger
  <stage>.note.<name>  anything else a stage counts (e.g. a rule skipped for a language)
"""
from __future__ import annotations

import functools
import sys
import time
from typing import Iterable, List, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.metrics import Metrics

from stages.record import Document, Drop, StageEnvironmentError
from stages.warc import STAGE as WARC_STAGE, WarcConfig, read_warc

NAMESPACE = "refinery"
LEDGER = "ledger"
DOCUMENTS = "documents"


def _count(name: str, n: int = 1) -> None:
    Metrics.counter(NAMESPACE, name).inc(n)


def _route(stage: str, result):
    """Count one stage result and send it on: a Document to the main output, a Drop to the ledger."""
    if isinstance(result, Drop):
        _count(f"{stage}.drop.{result.label}")
        return beam.pvalue.TaggedOutput(LEDGER, result)
    _count(f"{stage}.kept")
    return result


class _Progress:
    """A progress line on stderr every `every_s` seconds, per worker (local runs show it live)."""

    def __init__(self, label: str, every_s: float = 10.0):
        self.label, self.every_s = label, every_s
        self.start = self.last = time.monotonic()
        self.done = 0

    def tick(self) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self.last >= self.every_s:
            self.last = now
            rate = self.done / (now - self.start)
            print(f"[refinery] {self.label}: {self.done} documents ({rate:.1f}/s on this worker)",
                  file=sys.stderr, flush=True)


class ReadFileFn(beam.DoFn):
    """One input file in, its documents out (ledger Drops for unreadable parts).

    `reader(stream, source=, filename=, count=)` is a stages/ reader (WARC or text records);
    `stage` names its counters. The raw bytes are passed on: readers undo gzip themselves.
    """

    def __init__(self, stage: str, reader, source: str):
        self._stage, self._reader, self._source = stage, reader, source

    def process(self, readable_file: fileio.ReadableFile) -> Iterable:
        path = readable_file.metadata.path
        with readable_file.open(compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            for result in self._reader(stream, source=self._source, filename=path, count=self._count):
                _count(f"{self._stage}.in")
                yield _route(self._stage, result)

    def _count(self, name: str) -> None:
        _count(f"{self._stage}.{name}")


class ReadFiles(beam.PTransform):
    """File patterns -> (documents, ledger). Files are matched and read on workers, never in the driver;
    one file holds thousands of documents, so they are spread before the expensive stages."""

    def __init__(self, patterns: Sequence[str], read_fn: ReadFileFn):
        super().__init__()
        self._patterns, self._read_fn = list(patterns), read_fn

    def expand(self, pbegin):
        results = (pbegin
                   | "Patterns" >> beam.Create(self._patterns)
                   | "Match" >> fileio.MatchAll()
                   | "Open" >> fileio.ReadMatches()
                   | "SpreadFiles" >> beam.Reshuffle()
                   | "Read" >> beam.ParDo(self._read_fn).with_outputs(LEDGER, main=DOCUMENTS))
        return results[DOCUMENTS] | "SpreadDocuments" >> beam.Reshuffle(), results[LEDGER]


def ReadWarc(patterns: Sequence[str], source: str, config: WarcConfig) -> ReadFiles:
    return ReadFiles(patterns, ReadFileFn(WARC_STAGE, functools.partial(read_warc, config=config), source))


def ReadTextFiles(patterns: Sequence[str], source: str, text_field: str) -> ReadFiles:
    from stages.textsource import STAGE, read_text_records

    return ReadFiles(patterns, ReadFileFn(STAGE, functools.partial(read_text_records, text_field=text_field), source))


class RunStage(beam.DoFn):
    """Runs one stage on each document: kept documents go on, drops go to the ledger output.

    A stage that raises does not fail the job: the document is ledgered with reason
    `error:<ExceptionType>` and the message, and the rest of the bundle goes on.
    """

    def __init__(self, stage, progress: bool = False, fail_urls: Sequence[str] = ()):
        self._stage = stage
        self._progress_enabled = progress
        self._progress = None
        self._fail_urls = tuple(fail_urls)  # fault injection (--inject-error), empty in real runs

    def setup(self) -> None:
        self._stage.setup()
        if hasattr(self._stage, "count"):  # stages report rule skips etc. as `<stage>.note.<name>`
            prefix = f"{self._stage.name}.note."
            self._stage.count = lambda name, n=1: _count(prefix + name, n)
        if self._progress_enabled:
            self._progress = _Progress(self._stage.name)

    def process(self, doc: Document) -> Iterable:
        _count(f"{self._stage.name}.in")
        yield _route(self._stage.name, self._run_one(doc))

    def _run_one(self, doc: Document):
        try:
            if self._fail_urls and any(part in (doc.url or "") for part in self._fail_urls):
                raise ValueError(f"injected fault in {self._stage.name} (--inject-error)")
            result = self._stage(doc)
        except StageEnvironmentError:
            raise  # every document would fail alike: fail the job with the real cause
        except Exception as exc:
            result = doc.drop_for_error(self._stage.name, exc)
        if self._progress is not None:
            self._progress.tick()
        return result

    def teardown(self) -> None:
        self._stage.teardown()


class RunStageOnBatches(RunStage):
    """For stages with `process_batch` (model inference): one call per batch of documents."""

    def process(self, batch: List[Document]) -> Iterable:
        name = self._stage.name
        _count(f"{name}.in", len(batch))
        try:
            if self._fail_urls and any(part in (d.url or "") for d in batch for part in self._fail_urls):
                raise ValueError("injected fault")  # handled one by one below, like a real failure
            results = self._stage.process_batch(batch)
        except StageEnvironmentError:
            raise
        except Exception:  # find the document that fails, ledger it, keep the others
            results = [self._run_one(doc) for doc in batch]
        for result in results:
            yield _route(name, result)


class ApplyStage(beam.PTransform):
    """documents -> (kept documents, ledger drops) for one stage."""

    def __init__(self, stage, progress: bool = False, fail_urls: Sequence[str] = ()):
        super().__init__()
        self._stage, self._progress, self._fail_urls = stage, progress, tuple(fail_urls)

    def expand(self, documents):
        if hasattr(self._stage, "process_batch"):
            documents = documents | "Batch" >> beam.BatchElements(min_batch_size=8, max_batch_size=256)
            fn = RunStageOnBatches(self._stage, self._progress, self._fail_urls)
        else:
            fn = RunStage(self._stage, self._progress, self._fail_urls)
        results = documents | "Run" >> beam.ParDo(fn).with_outputs(LEDGER, main=DOCUMENTS)
        return results[DOCUMENTS], results[LEDGER]


class _DecontaminateFn(RunStage):
    """RunStage whose stage is built on the worker from the index side input."""

    def __init__(self, config):
        super().__init__(stage=None)
        self._config = config

    def setup(self) -> None:
        pass

    def process(self, doc: Document, index) -> Iterable:
        if self._stage is None or self._stage.index is not index:
            from stages.decontam import Decontaminator

            self._stage = Decontaminator(index, self._config)
            self._stage.count = lambda name, n=1: _count(f"{self._stage.name}.note.{name}", n)
        yield from super().process(doc)

    def teardown(self) -> None:
        pass


class Decontaminate(beam.PTransform):
    """documents -> (kept or excised documents, ledger); the n-gram index reaches workers as a side input."""

    def __init__(self, index, config):
        super().__init__()
        self._index, self._config = index, config

    def expand(self, documents):
        index = documents.pipeline | "Index" >> beam.Create([self._index])
        results = documents | "Run" >> beam.ParDo(_DecontaminateFn(self._config),
                                                  beam.pvalue.AsSingleton(index)).with_outputs(LEDGER, main=DOCUMENTS)
        return results[DOCUMENTS], results[LEDGER]
