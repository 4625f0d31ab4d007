"""Beam wiring of the stages. No cleaning logic lives here: only reading, routing and counting.

Counters (namespace `refinery`), read back into the report:
  warc.record.<type>   every WARC record seen, by WARC-Type
  <stage>.in           documents entering a stage (warc.in: response records + unreadable file tails)
  <stage>.kept         documents leaving a stage towards the output
  <stage>.kept_tokens  their tokens (UTF-8 bytes / 4)
  <stage>.drop.<reason> documents sent to the ledger
  <stage>.note.<name>  anything else a stage counts (e.g. a rule skipped for a language)
Distributions:
  <stage>.time_us      microseconds per document in a per-document stage (batched stages: batch time / size)
"""
from __future__ import annotations

import collections
import contextlib
import functools
import os
import stat
import threading
import time
from collections.abc import Iterable, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.metrics import Metrics

from pipeline.progress import BYTES_READ, TALLY
from stages.extraction.warc import STAGE as WARC_STAGE
from stages.extraction.warc import WarcConfig, read_warc
from stages.formats import SNIFF_BYTES, WARC, is_gzip, sniff_format
from stages.formats import SPEC as READ_SPEC
from stages.mix import approx_tokens
from stages.record import Document, Drop, DropReason, StageEnvironmentError, stable_id
from stages.textsource import STAGE as TEXT_STAGE
from stages.textsource import TextSourceConfig, read_text_records

NAMESPACE = "refinery"
LEDGER = "ledger"
DOCUMENTS = "documents"
TEXT = "text"          # documents read as text (JSONL/Parquet): they skip extraction
READ_STAGE = READ_SPEC.name  # files that are no known format, or cannot be opened
SOURCE_RECORDS = "source_records."  # + source name: records its files held (file-level read errors aside)


@functools.lru_cache(maxsize=4096)
def _counter(name: str):
    """One Beam counter handle per name and process (it finds the running bundle's metrics itself)."""
    return Metrics.counter(NAMESPACE, name)


_CAPTURE = threading.local()  # .counts: a Counter that also receives this thread's counts (capture_counts)


def count(name: str, n: int = 1) -> None:
    _counter(name).inc(n)
    TALLY.add(name, n)  # the live progress display of a local run (pipeline/progress.py); off elsewhere
    captured = getattr(_CAPTURE, "counts", None)
    if captured is not None:
        captured[name] += n


@contextlib.contextmanager
def capture_counts():
    """`with capture_counts() as counts:` the counts made by this thread inside the block, besides Beam's
    (phase 1 stores each input file's counts with its prepared part, to replay them when it is reused)."""
    outer = getattr(_CAPTURE, "counts", None)
    _CAPTURE.counts = counts = collections.Counter()
    try:
        yield counts
    finally:
        _CAPTURE.counts = outer
        if outer is not None:
            outer.update(counts)


@functools.lru_cache(maxsize=256)
def _distribution(name: str):
    return Metrics.distribution(NAMESPACE, name)


def record_time(stage: str, seconds: float, documents: int = 1) -> None:
    """Per-document time of `stage` (the report's time and throughput per stage)."""
    per_document = int(seconds * 1e6 / max(documents, 1))
    dist = _distribution(f"{stage}.time_us")
    for _ in range(documents):
        dist.update(per_document)


def route(stage: str, result):
    """Count one stage result and send it on: a Document to the main output, a Drop to the ledger."""
    if isinstance(result, Drop):
        count(f"{stage}.drop.{result.label}")
        return beam.pvalue.TaggedOutput(LEDGER, result)
    count_kept(stage, result)
    return result


def count_kept(stage: str, doc: Document) -> None:
    """A document leaving `stage` towards the output: one document and its tokens (UTF-8 bytes / 4)."""
    count_kept_tokens(stage, approx_tokens(doc.text) if doc.text else 0)


def count_kept_tokens(stage: str, tokens: int) -> None:
    """The same, for a record that carries its token count instead of its text (dedup's signatures)."""
    count(f"{stage}.kept")
    if tokens:
        count(f"{stage}.kept_tokens", tokens)


class ReadFileFn(beam.DoFn):
    """One input file in, its records out: WARC pages (HTML still to extract) to the main output,
    JSONL/Parquet text to TEXT, ledger Drops for what cannot be read.

    The reader is chosen per file from its first bytes (stages/formats.py), so one glob may hold
    both kinds; a file that is neither is one `read` ledger row. Readers undo gzip themselves.
    Files are named by their path below `root` (the inputs' common folder): ids, metadata and the
    ledger then do not depend on where the input tree lies (a laptop, a bucket, a CI clone).
    """

    def __init__(self, source: str, warc_config: WarcConfig, text_config: TextSourceConfig, max_payload_bytes: int,
                 root: str = "", sample_fraction: float = 1.0):
        self._source, self._warc, self._text, self._max_payload = source, warc_config, text_config, max_payload_bytes
        self._root, self._sample_fraction = root, sample_fraction

    def process(self, readable_file: fileio.ReadableFile) -> Iterable:
        yield from self.read(readable_file)

    def read(self, readable_file: fileio.ReadableFile, cap: int | None = None) -> Iterable:
        """The file's records; with `cap`, at most that many (--limit), the rest of the file unread."""
        full_path = readable_file.metadata.path
        path = full_path[len(self._root):] if self._root and full_path.startswith(self._root) else full_path
        problem = local_file_problem(full_path)
        if problem == "a folder":
            count(f"{READ_STAGE}.note.directories_skipped")  # `dir/*` also matches sub-folders
            return
        if problem:  # opening a FIFO blocks forever; a device never ends
            yield from self._file_error(path, problem)
            return
        try:
            with readable_file.open(compression_type=CompressionTypes.UNCOMPRESSED) as stream:
                head = stream.read(SNIFF_BYTES)
        except IsADirectoryError:
            count(f"{READ_STAGE}.note.directories_skipped")  # `dir/*` also matches sub-folders
            return
        except Exception as exc:  # unreadable (permissions, vanished): one row for the file
            yield from self._file_error(path, f"cannot open: {type(exc).__name__}: {exc}")
            return
        if not head:  # nothing to read: one row, so a source of empty files says why it yielded nothing
            yield from self._file_error(path, "empty file (0 bytes)")
            return
        fmt = sniff_format(path, head)
        if fmt is None:
            yield from self._file_error(path, "not a WARC, JSONL or Parquet file")
            return
        stage = WARC_STAGE if fmt == WARC else TEXT_STAGE
        note = functools.partial(self._count_note, stage)
        with readable_file.open(compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            if fmt == WARC:
                records = read_warc(stream, source=self._source, filename=path, config=self._warc,
                                    max_payload_bytes=self._max_payload, count=note)
            else:
                records = read_text_records(stream, source=self._source, filename=path, fmt=fmt,
                                            gzipped=is_gzip(head), config=self._text, count=note)
            position, taken = 0, 0
            for result in records:
                if self._sample_fraction < 1 and not in_sample(result.id, self._sample_fraction):
                    count(f"{stage}.note.not_sampled")  # --sample-fraction: not part of this run
                    continue
                if cap is not None and taken >= cap:
                    count(f"{stage}.note.limit_reached")  # --limit: the rest of the input is not read
                    return
                taken += 1
                count(f"{stage}.in")
                position = self._count_bytes(stream, position)
                if not (isinstance(result, Drop) and result.reason == DropReason.READ_ERROR):
                    count(SOURCE_RECORDS + self._source)
                routed = route(stage, result)
                yield routed if fmt == WARC or isinstance(result, Drop) else beam.pvalue.TaggedOutput(TEXT, routed)

        count(BYTES_READ, max(readable_file.metadata.size_in_bytes - position, 0))  # the file's tail

    @staticmethod
    def _count_bytes(stream, position: int) -> int:
        """Input bytes consumed so far (progress, its ETA); streams that cannot tell are counted at the end."""
        try:
            now = stream.tell()
        except (OSError, AttributeError, ValueError):
            return position
        if now > position:
            count(BYTES_READ, now - position)
            return now
        return position

    def _file_error(self, path: str, detail: str):
        count(f"{READ_STAGE}.in")
        doc = Document(id=stable_id(READ_STAGE, self._source, path), url="", source=self._source)
        yield route(READ_STAGE, doc.drop(READ_STAGE, DropReason.READ_ERROR, f"{path}: {detail}"[:500]))

    @staticmethod
    def _count_note(stage: str, name: str) -> None:
        count(f"{stage}.{name}")


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"))


def local_file_problem(path: str) -> str | None:
    """Why a local input cannot be read as a file ("a folder", "a FIFO", a symlink loop, ...); None for a
    regular file or a path on another filesystem (gs://, s3://: objects are always regular)."""
    if "://" in path:
        return None
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot open: {exc.strerror or type(exc).__name__}" + (" (a symbolic link)" if os.path.islink(path) else "")
    if stat.S_ISDIR(mode):
        return "a folder"
    kind = next((name for test, name in _FILE_KINDS if test(mode)), None if stat.S_ISREG(mode) else "not a file")
    return f"not a regular file ({kind}): only regular files are read" if kind else None


def in_sample(doc_id: str, fraction: float) -> bool:
    """Is this record in a --sample-fraction sample? Decided by its id: the same records on every rerun."""
    return int(doc_id[-8:], 16) < fraction * 0x100000000 if len(doc_id) >= 8 else True


class ReadSource(beam.PTransform):
    """File patterns of one source -> (HTML documents, text documents, ledger). Files are matched and
    read on workers, never in the driver, each file once even when several patterns match it; one
    file holds thousands of documents, so they are spread before the expensive stages."""

    def __init__(self, patterns: Sequence[str], read_fn: ReadFileFn):
        super().__init__()
        self._patterns, self._read_fn = list(patterns), read_fn

    def expand(self, pbegin):
        results = (pbegin
                   | "Patterns" >> beam.Create(self._patterns)
                   | "Match" >> fileio.MatchAll()
                   | "Paths" >> beam.Map(lambda metadata: metadata.path)
                   | "EachFileOnce" >> beam.Distinct()
                   | "Open" >> fileio.ReadMatches()
                   | "SpreadFiles" >> beam.Reshuffle()
                   | "Read" >> beam.ParDo(self._read_fn).with_outputs(LEDGER, TEXT, main=DOCUMENTS))
        return (results[DOCUMENTS] | "SpreadDocuments" >> beam.Reshuffle(),
                results[TEXT] | "SpreadText" >> beam.Reshuffle(), results[LEDGER])


class RunStage(beam.DoFn):
    """Runs one stage on each document: kept documents go on, drops go to the ledger output.

    A stage that raises does not fail the job: the document is ledgered with reason
    `error:<ExceptionType>` and the message, and the rest of the bundle goes on.
    """

    def __init__(self, stage, fail_urls: Sequence[str] = (), sources: Sequence[str] = ()):
        self._stage = stage
        self._fail_urls = tuple(fail_urls)  # fault injection (--inject-error), empty in real runs
        self._sources = frozenset(sources)  # the stage runs on these sources' documents; empty: all

    def setup(self) -> None:
        self._stage.setup()
        if hasattr(self._stage, "count"):  # stages report rule skips etc. as `<stage>.note.<name>`
            prefix = f"{self._stage.name}.note."
            self._stage.count = lambda name, n=1: count(prefix + name, n)

    def process(self, doc: Document) -> Iterable:
        count(f"{self._stage.name}.in")
        started = time.perf_counter()
        result = self._run_one(doc)
        record_time(self._stage.name, time.perf_counter() - started)
        yield route(self._stage.name, result)

    def _passes_by(self, doc: Document) -> bool:
        """A document of a source this stage is not for (`sources` of its config) goes on unchanged."""
        if self._sources and doc.source not in self._sources:
            count(f"{self._stage.name}.note.not_for_source.{doc.source}")
            return True
        return False

    def _run_one(self, doc: Document):
        if self._passes_by(doc):
            return doc
        try:
            if self._fail_urls and any(part in (doc.url or "") for part in self._fail_urls):
                raise ValueError(f"injected fault in {self._stage.name} (--inject-error)")
            result = self._stage(doc)
        except StageEnvironmentError:
            raise  # every document would fail alike: fail the job with the real cause
        except Exception as exc:
            result = doc.drop_for_error(self._stage.name, exc)
        return result

    def teardown(self) -> None:
        self._stage.teardown()


class RunStageOnBatches(RunStage):
    """For stages with `process_batch` (model inference): one call per batch of documents."""

    def process(self, batch: list[Document]) -> Iterable:
        name = self._stage.name
        count(f"{name}.in", len(batch))
        if self._sources and any(doc.source not in self._sources for doc in batch):
            for doc in batch:
                yield route(name, self._run_one(doc))
            return
        started = time.perf_counter()
        try:
            if self._fail_urls and any(part in (d.url or "") for d in batch for part in self._fail_urls):
                raise ValueError("injected fault")  # handled one by one below, like a real failure
            results = self._stage.process_batch(batch)
        except StageEnvironmentError:
            raise
        except Exception:  # find the document that fails, ledger it, keep the others
            results = [self._run_one(doc) for doc in batch]
        record_time(name, time.perf_counter() - started, len(batch))
        for result in results:
            yield route(name, result)


class ApplyStage(beam.PTransform):
    """documents -> (kept documents, ledger drops) for one stage."""

    def __init__(self, stage, fail_urls: Sequence[str] = (), sources: Sequence[str] = ()):
        super().__init__()
        self._stage, self._fail_urls = stage, tuple(fail_urls)
        self._sources = tuple(sources)

    @property
    def batched(self) -> bool:
        return hasattr(self._stage, "process_batch")

    def fn(self) -> RunStage:
        """The DoFn (also run directly, outside Beam, by phase 1: pipeline/prepare.py); batched stages take lists."""
        runner = RunStageOnBatches if self.batched else RunStage
        return runner(self._stage, self._fail_urls, self._sources)

    def expand(self, documents):
        if self.batched:
            documents = documents | "Batch" >> beam.BatchElements(min_batch_size=8, max_batch_size=256)
        results = documents | "Run" >> beam.ParDo(self.fn()).with_outputs(LEDGER, main=DOCUMENTS)
        return results[DOCUMENTS], results[LEDGER]
