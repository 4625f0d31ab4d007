"""Phase 1 of a run, one input file at a time: read -> every per-document stage before the first global
one (stages/table.py) -> a prepared part, committed by a marker written last. Phase 2 (dedup,
decontamination, the filters after it, PII, mixing, shards) reads the parts, so a run that dies is
resumed (`refinery run --resume`) without redoing the files that were finished.

    OUTPUT/prepared/<key>.docs.parquet    documents that passed phase 1, with their dedup signature
    OUTPUT/prepared/<key>.ledger.parquet  that file's ledger rows
    OUTPUT/prepared/<key>.done.json       the marker: source, file, size, mtime, a hash of the input's first
                                          and last MiB, phase-1 digest, record cap, each part file's size and
                                          SHA-256, and the file's counts (replayed into the counters on reuse)

A part is reused only when its marker matches the input file (size, mtime, the hash of its first and
last MiB: a same-size rewrite with its mtime put back), the digest of every setting phase 1 depends on
(its stages' sections, the readers', the signature settings, the per-language thresholds, refinery's
version), and both part files still have the size and SHA-256 they were committed with (a part altered
or damaged after its marker is written again, never published); any other part is written again.
The markers protect against accidents, not against someone who rewrites a part and its marker alike.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes, FileMetadata
from apache_beam.io.filesystems import FileSystems

from common.version import version
from pipeline.job.config import TABLE
from pipeline.job.dedup import Signed, Signer, verify_shingles
from pipeline.job.faults import kill_point
from pipeline.job.outdir import PREPARED_DIR
from pipeline.job.output import create, replace, write_atomically
from pipeline.job.schema import LEDGER_SCHEMA, PART_SCHEMA, Signature, ledger_row, part_row, part_value
from pipeline.job.transforms import FileReader, capture_counts, count, local_file_problem, runner
from stages.dedup import DedupConfig
from stages.paragraphs import ParagraphDedupConfig, paragraph_hashes
from stages.record import Document, Drop
from stages.runner import StageRunner, Step, chunks, held_chars
from stages.table import GLOBAL, READ

PHASE1_END = min(spec.order for spec in TABLE if spec.runs == GLOBAL)  # phase 1: the stages before it
READ_COUNTERS = tuple(f"{spec.name}.in" for spec in TABLE if spec.runs == READ)
ROW_GROUP = 1024   # rows per row group of a part: bounds the writer's buffer

class InputFile(NamedTuple):
    source: str
    path: str
    size: int
    mtime: float


def in_phase1(spec) -> bool:
    return spec.order < PHASE1_END


def part_key(source: str, name: str) -> str:
    return hashlib.sha256(f"{source}\x1f{name}".encode("utf-8", "surrogatepass")).hexdigest()[:24]


def file_part_key(file: InputFile, root: str) -> str:
    """The part key of an input file, named below the inputs' common folder `root` (as ids are)."""
    return part_key(file.source, file_name(file, root))


def file_name(file: InputFile, root: str) -> str:
    return file.path[len(root):] if root and file.path.startswith(root) else file.path


def part_paths(prepared: str, key: str) -> dict[str, str]:
    return {kind: FileSystems.join(prepared, f"{key}.{kind}") for kind in ("docs.parquet", "ledger.parquet", "done.json")}


def signature_settings(config: DedupConfig) -> dict[str, Any]:
    """What makes two runs' signatures comparable (--dedup-against checks the old run's)."""
    bands, rows = config.band_rows()
    return {"shingle_words": config.shingle_words, "num_perm": config.num_perm, "bands": bands, "rows": rows,
            "seed": config.seed}


def paragraph_settings(config: ParagraphDedupConfig) -> dict[str, Any] | None:
    """What makes two runs' paragraph hashes comparable (None: paragraph dedup off, parts hold none)."""
    if not config.enabled:
        return None
    return {"min_chars": config.min_chars, "unit": config.unit, "hash": "blake2b-64 of stages.paragraphs.normalized",
            **({"span_sentences": config.span_sentences} if config.unit == "span" else {})}


def phase1_digest(config) -> str:
    """A digest of every setting the prepared parts depend on (not where the inputs lie: parts name their
    file below the inputs' common folder, as ids do)."""
    settings = config.to_dict()
    sections = sorted({spec.section for spec in TABLE if in_phase1(spec) and spec.section})
    relevant = {section: settings[section] for section in sections}
    relevant.update(signature=signature_settings(config.dedup), paragraphs=paragraph_settings(config.paragraph_dedup),
                    version=version(),
                    part_format=PART_SCHEMA.metadata[b"refinery.schema"].decode(),
                    inject_errors=settings["inject_errors"], ledger_snippet_chars=config.ledger_snippet_chars,
                    sample_fraction=config.sample_fraction, thresholds=_thresholds_digest(config.thresholds),
                    # the cascade's bundled check decides which pages trafilatura extracts: a rebuilt one redoes the parts
                    cascade_check=_cascade_check_digest() if config.extract.engine == "cascade" else None,
                    # the phase-1 settings the user gave beat the thresholds file: they decide too
                    overriding=sorted(k for k in config.overriding() if k.split(".", 1)[0] in sections))
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _thresholds_digest(path: str | None) -> str | None:
    if path == "bundled":  # its content, not only refinery's version: a rebuilt file changes decisions
        from stages.thresholds import bundled_path

        path = bundled_path()
    if not path or not os.path.exists(path):
        return path
    found = file_digest(path)
    return found[1] if found else path  # unreadable: pre-flight says so when it loads the file


def _cascade_check_digest() -> str | None:
    from stages.extraction.engines import CHECK_PATH

    found = file_digest(CHECK_PATH)
    return found[1] if found else None


EDGE_BYTES = 1 << 20  # the input's first and last MiB are hashed into its marker


def edge_digest(path: str, size: int) -> str | None:
    """SHA-256 of a file's first and last MiB (all of it when smaller); None when it is not a regular file (a
    FIFO would block) or cannot be read."""
    if local_file_problem(path):
        return None
    digest = hashlib.sha256()
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            digest.update(fh.read(EDGE_BYTES))
            if size > EDGE_BYTES:
                fh.seek(max(size - EDGE_BYTES, EDGE_BYTES))
                digest.update(fh.read(EDGE_BYTES))
    except Exception:  # unreadable: the part is redone, and reading ledgers why
        return None
    return digest.hexdigest()


def file_digest(path: str) -> tuple[int, str] | None:
    """(bytes, SHA-256) of a file, or None when it cannot be read."""
    digest, size = hashlib.sha256(), 0
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
            while chunk := fh.read(8 << 20):
                digest.update(chunk)
                size += len(chunk)
    except Exception:
        return None
    return size, digest.hexdigest()


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with FileSystems.open(path) as fh:
            return json.loads(fh.read().decode("utf-8"))
    except Exception:  # absent, or cut short by a kill: not a commit
        return None


def _temp_name(name: str) -> str:
    """A temporary name of this attempt's own: a retried or speculative second attempt of the same file
    (cluster runners) writes beside it, and the last rename wins (both wrote the same bytes)."""
    import uuid

    return f".{name}.{uuid.uuid4().hex[:12]}.tmp"


class _HashingStream:
    """A write-only stream that hashes what passes through it (a part's SHA-256 without reading it back)."""

    def __init__(self, stream):
        self._stream, self.sha256, self.bytes = stream, hashlib.sha256(), 0

    def write(self, data) -> int:
        self.sha256.update(data)
        self.bytes += len(data)
        self._stream.write(data)
        return len(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False


class PartWriter:
    """Rows -> a Parquet file at a temporary name, in row groups of ROW_GROUP; `commit()` renames it and
    keeps its size and SHA-256 (`digest`)."""

    def __init__(self, path: str, schema: pa.Schema):
        self.path, self.rows = path, 0
        folder, name = path.rsplit("/", 1)
        self._temp = FileSystems.join(folder, _temp_name(name))
        self._schema, self._buffer = schema, []
        self._stream = _HashingStream(create(self._temp))
        self._writer = pq.ParquetWriter(self._stream, schema, compression="zstd")
        self.digest: dict[str, Any] = {}

    def add(self, row: dict[str, Any]) -> None:
        self._buffer.append(row)
        if len(self._buffer) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            self._writer.write_table(pa.Table.from_pylist(self._buffer, schema=self._schema))
            self.rows += len(self._buffer)
            self._buffer = []

    def commit(self) -> int:
        self._flush()
        self._writer.close()
        self._stream.close()
        self.digest = {"bytes": self._stream.bytes, "sha256": self._stream.sha256.hexdigest()}
        replace(self._temp, self.path)
        return self.rows


class RunsStages(beam.DoFn):
    """A DoFn whose elements' documents go through a StageRunner (`self._runner`) set up with the DoFn."""

    _runner: StageRunner

    def setup(self) -> None:
        self._runner.setup()

    def teardown(self) -> None:
        self._runner.teardown()


class PrepareFiles(RunsStages):
    """A list of input files -> the part key of each, its part written (or reused when its marker matches).
    One file per element, except with --limit: then all files in name order in one element, each read
    until the run's record budget is spent (files after that are not read)."""

    def __init__(self, output: str, readers: dict[str, FileReader], steps: Sequence[tuple[str, Step]], root: str,
                 digest: str, dedup: DedupConfig, snippet_chars: int, limit: int = 0, run_id: str = "",
                 paragraphs: ParagraphDedupConfig | None = None):
        self._prepared = FileSystems.join(output, PREPARED_DIR)
        self._run_id = run_id  # in each marker this run writes: the driver tells prepared parts from reused ones
        self._readers, self._root, self._digest = readers, root, digest
        self._runner = runner([step for _, step in steps])
        self._signer, self._snippet, self._limit = Signer(dedup), snippet_chars, limit
        self._paragraph_config = paragraphs  # None: paragraph dedup is off, no hashes stored

    def process(self, files: Sequence[InputFile]) -> Iterable[str]:
        budget = self._limit or None
        for file in files:
            if budget is not None and budget <= 0:
                return
            key, records = self.prepare_file(InputFile(*file), budget)
            yield key
            if budget is not None:
                budget -= records

    def prepare_file(self, file: InputFile, cap: int | None) -> tuple[str, int]:
        name = file_name(file, self._root)
        key = part_key(file.source, name)
        paths = part_paths(self._prepared, key)
        want = dict(marker_identity(file, name, self._digest, cap), edges=edge_digest(file.path, file.size))
        marker = read_json(paths["done.json"])
        if marker is not None and all(marker.get(k) == v for k, v in want.items()) and _parts_intact(marker, paths):
            for counter, n in marker["counts"].items():
                count(counter, n)
            return key, marker["records"]
        if marker is not None:
            FileSystems.delete([paths["done.json"]])  # the old part is no longer committed
        with capture_counts() as counts:
            docs, ledger, digests = self._write_part(file, paths, cap)
        records = sum(counts.get(c, 0) for c in READ_COUNTERS)
        write_atomically(paths["done.json"], json.dumps(
            dict(want, run=self._run_id, replaced=marker is not None, records=records, documents=docs, ledger_rows=ledger, parts=digests,
                 counts=dict(sorted(counts.items()))), indent=1).encode(), temp_name=_temp_name(f"{key}.done.json"))
        kill_point("prepared")
        return key, records

    def _write_part(self, file: InputFile, paths: dict[str, str], cap: int | None) -> tuple[int, int, dict]:
        docs_out, ledger_out = PartWriter(paths["docs.parquet"], PART_SCHEMA), PartWriter(paths["ledger.parquet"],
                                                                                            LEDGER_SCHEMA)
        readable = fileio.ReadableFile(FileMetadata(file.path, file.size, file.mtime))

        def documents() -> Iterator[tuple[bool, Document]]:  # the reader's drops go straight to the ledger
            for record, is_html in self._readers[file.source].read(readable, cap):
                if isinstance(record, Drop):
                    ledger_out.add(ledger_row(record, self._snippet))
                else:
                    yield is_html, record

        for chunk in chunks(documents(), lambda item: held_chars(item[1])):
            self._run_chunk(chunk, docs_out, ledger_out)
        docs, ledger = docs_out.commit(), ledger_out.commit()
        return docs, ledger, {"docs.parquet": docs_out.digest, "ledger.parquet": ledger_out.digest}

    def _run_chunk(self, chunk: list[tuple[bool, Document]], docs_out: PartWriter, ledger_out: PartWriter) -> None:
        kept, drops = self._runner.run([doc for _, doc in chunk], [is_html for is_html, _ in chunk])
        for drop in drops:
            ledger_out.add(ledger_row(drop, self._snippet))
        for doc in kept:
            docs_out.add(part_row(doc, Signature(*self._signer(doc), self._paragraphs(doc))))

    def _paragraphs(self, doc: Document) -> list[int] | None:
        if self._paragraph_config is None:
            return None
        try:
            return paragraph_hashes(doc.text, self._paragraph_config)
        except Exception:  # the document goes on; none of its paragraphs is counted
            count("prepare.note.paragraphs_unhashed")
            return []


def marker_identity(file: InputFile, name: str, digest: str, cap: int | None) -> dict[str, Any]:
    """What a part's marker must say to commit it for this input file and these settings (besides the hash of
    the file's edges, which `PrepareFiles` adds: reading it costs 2 MiB a file)."""
    return {"source": file.source, "file": name, "size": file.size, "mtime": file.mtime, "digest": digest, "cap": cap}


def _parts_intact(marker: dict[str, Any], paths: dict[str, str]) -> bool:
    """Both part files exist with the size and SHA-256 the marker committed."""
    parts = marker.get("parts") or {}
    for kind in ("docs.parquet", "ledger.parquet"):
        want = parts.get(kind) or {}
        found = file_digest(paths[kind]) if FileSystems.exists(paths[kind]) else None
        if found is None or found != (want.get("bytes"), want.get("sha256")):
            return False
    return True


class MarkerCounts:
    """Counts from the phase-1 markers written so far (`OUT/prepared/*.done.json`, each holding its file's
    counts): progress for runners that report no metrics while they run (local multi-processing workers, a
    portable job service). Each marker is read once; one listing of the folder per poll."""

    def __init__(self, prepared: str):
        self.prepared = prepared
        self._seen: dict[str, Mapping[str, int]] = {}

    def __call__(self) -> dict[str, int]:
        found = FileSystems.match([FileSystems.join(self.prepared, "*.done.json")])[0].metadata_list
        for m in found:
            if m.path not in self._seen:
                marker = read_json(m.path)
                if marker is not None:
                    self._seen[m.path] = marker.get("counts", {})
        total: dict[str, int] = {}
        for counts in self._seen.values():
            for name, n in counts.items():
                total[name] = total.get(name, 0) + n
        return total


class PartUnreadable(OSError):
    """A prepared or finished part that phase 2 cannot read (changed or damaged during the run)."""


def read_rows(path: str, columns: Sequence[str] | None = None) -> Iterable[dict[str, Any]]:
    """The rows of a part; a part that cannot be read raises PartUnreadable naming it and its input file."""
    try:
        with FileSystems.open(path) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=ROW_GROUP, columns=columns):
                yield from batch.to_pylist()
    except Exception as exc:
        raise PartUnreadable(f"{path} ({_input_of(path)}) cannot be read: {type(exc).__name__}: {exc}; run again "
                             "with --resume: parts that do not match their marker are prepared again") from None


def _input_of(path: str) -> str:
    """The input file a prepared or finished part (OUTPUT/prepared/KEY.*, OUTPUT/_finished/KEY.parquet) was
    made from, as its marker names it."""
    folder, name = path.rsplit("/", 1)
    marker = read_json(FileSystems.join(folder.rsplit("/", 1)[0], PREPARED_DIR, f"{name.split('.', 1)[0]}.done.json"))
    return f"input {marker.get('source')}:{marker.get('file')}" if marker else "its marker is gone"


class ReadSigned(beam.DoFn):
    """A part key -> a packed `Signed` record per document (its signature, rank and tokens; the text only to
    compute shingles for `dedup.verify`)."""

    def __init__(self, output: str, dedup: DedupConfig, file_index: dict[str, int]):
        self._prepared, self._dedup, self._file_index = FileSystems.join(output, PREPARED_DIR), dedup, file_index

    def process(self, key: str):
        columns = ["id", "exact_key", "bands", "quality_score", "chars", "tokens"]
        verify, first = self._dedup.verify, self._file_index[key] << 32
        rows = read_rows(part_paths(self._prepared, key)["docs.parquet"], columns + (["text", "lang"] if verify else []))
        for number, row in enumerate(rows, start=first):
            shingle_set = verify_shingles(part_value(row, "text"), row["lang"], self._dedup) if verify else None
            yield Signed(row["id"], key, number, row["exact_key"], b"".join(row["bands"] or ()), row["quality_score"],
                         row["chars"], row["tokens"], shingle_set).pack()


class Prepare(beam.PTransform):
    """Input files -> the keys of their prepared parts (written, or reused when their markers match)."""

    def __init__(self, files: Sequence[InputFile], prepare_fn: PrepareFiles, one_task: bool):
        super().__init__()
        self._files, self._fn, self._one_task = list(files), prepare_fn, one_task

    def expand(self, pbegin):
        elements = [self._files] if self._one_task else [[f] for f in self._files]
        return (pbegin
                | "InputFiles" >> beam.Create(elements)
                | "SpreadFiles" >> beam.Reshuffle()
                | "PrepareFiles" >> beam.ParDo(self._fn)
                | "SpreadParts" >> beam.Reshuffle())
