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
from collections.abc import Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.metrics import Metrics

from pipeline.reports.progress import BYTES_READ, TALLY
from stages.extraction.warc import STAGE as WARC_STAGE
from stages.extraction.warc import WarcConfig, read_warc
from stages.formats import SNIFF_BYTES, WARC, is_gzip, sniff_format
from stages.formats import SPEC as READ_SPEC
from stages.mix import approx_tokens
from stages.record import Document, Drop, DropReason, Stage, StageResult, stable_id
from stages.runner import StageRunner, Step, count_kept
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
    TALLY.add(name, n)  # the live progress display of a local run (pipeline/reports/progress.py); off elsewhere
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


def count_result(stage: str, result) -> None:
    """Count a record a reader made: a Drop by its reason, a document as kept (with its tokens)."""
    if isinstance(result, Drop):
        count(f"{stage}.drop.{result.label}")
    else:
        count_kept(count, stage, approx_tokens(result.text) if result.text else 0)


def count_kept_tokens(stage: str, tokens: int) -> None:
    """A record that carries its token count instead of its text (dedup's signatures) leaving `stage`."""
    count_kept(count, stage, tokens)


def runner(steps) -> StageRunner:
    """A StageRunner that counts into the job's metrics (and the live progress display)."""
    return StageRunner(steps, count=count, record_time=record_time)


class FileReader:
    """One input file in, its records out, each with whether it was read as HTML: WARC pages (HTML still
    to extract), JSONL/Parquet text records, and Drops for what cannot be read.

    The reader is chosen per file from its first bytes (stages/formats.py), so one glob may hold
    both kinds; a file that is neither is one `read` ledger row. Readers undo gzip themselves.
    Files are named by their path below `root` (the inputs' common folder): ids, metadata and the
    ledger then do not depend on where the input tree lies (a laptop, a bucket, a CI clone).
    """

    def __init__(self, source: str, warc_config: WarcConfig, text_config: TextSourceConfig, max_payload_bytes: int,
                 root: str = "", sample_fraction: float = 1.0):
        self._source, self._warc, self._text, self._max_payload = source, warc_config, text_config, max_payload_bytes
        self._root, self._sample_fraction = root, sample_fraction

    def read(self, readable_file: fileio.ReadableFile, cap: int | None = None) -> Iterator[tuple[StageResult, bool]]:
        """(record, read as HTML?) of the file; with `cap`, at most that many (--limit), the rest unread."""
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
                count_result(stage, result)
                yield result, fmt == WARC

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
        drop = doc.drop(READ_STAGE, DropReason.READ_ERROR, f"{path}: {detail}"[:500])
        count_result(READ_STAGE, drop)
        yield drop, False

    @staticmethod
    def _count_note(stage: str, name: str) -> None:
        count(f"{stage}.{name}")


class ReadFileFn(beam.DoFn):
    """A FileReader in Beam: HTML documents to the main output, text documents to TEXT, drops to LEDGER."""

    def __init__(self, reader: FileReader):
        self._reader = reader

    def process(self, readable_file: fileio.ReadableFile) -> Iterable:
        for result, is_html in self._reader.read(readable_file):
            if isinstance(result, Drop):
                yield beam.pvalue.TaggedOutput(LEDGER, result)
            else:
                yield result if is_html else beam.pvalue.TaggedOutput(TEXT, result)


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

    def __init__(self, patterns: Sequence[str], reader: FileReader):
        super().__init__()
        self._patterns, self._read_fn = list(patterns), ReadFileFn(reader)

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


class RunStep(beam.DoFn):
    """A StageRunner of one step in Beam: kept documents to the main output, drops to LEDGER; a batched
    stage takes lists of documents."""

    def __init__(self, step: Step):
        self._runner = runner([step])

    def setup(self) -> None:
        self._runner.setup()

    def teardown(self) -> None:
        self._runner.teardown()

    def process(self, element) -> Iterable:
        kept, drops = self._runner.run(element if isinstance(element, list) else [element])
        yield from kept
        for drop in drops:
            yield beam.pvalue.TaggedOutput(LEDGER, drop)


class ApplyStage(beam.PTransform):
    """documents -> (kept documents, ledger drops) for one stage (a Step, or a Stage run as it is)."""

    def __init__(self, step: Step | Stage):
        super().__init__()
        self._step = step if isinstance(step, Step) else Step(step)

    def expand(self, documents):
        if self._step.batched:
            documents = documents | "Batch" >> beam.BatchElements(min_batch_size=8, max_batch_size=256)
        results = documents | "Run" >> beam.ParDo(RunStep(self._step)).with_outputs(LEDGER, main=DOCUMENTS)
        return results[DOCUMENTS], results[LEDGER]
