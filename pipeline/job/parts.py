"""The part store: phase 1's prepared parts and phase 2's finished parts, their paths, writer, reader and
the markers that commit them. Phase 1, phase 2, publish, Slurm's array tasks and `refinery plan` read and
write parts only through this module.

    OUTPUT/prepared/<key>.docs.parquet    documents that passed phase 1, with their dedup signature
    OUTPUT/prepared/<key>.ledger.parquet  that file's ledger rows
    OUTPUT/prepared/<key>.done.json       the marker: source, file, size, mtime, a hash of the input's first
                                          and last MiB, phase-1 digest, record cap, each part file's size and
                                          SHA-256, and the file's counts (replayed into the counters on reuse)
    OUTPUT/_finished/<key>.parquet        a part's documents after phase 2's per-document stages

A part is reused only when its marker matches the input file (size, mtime, the hash of its first and
last MiB: a same-size rewrite with its mtime put back), the digest of every setting phase 1 depends on,
and both part files still have the size and SHA-256 they were committed with (a part altered or damaged
after its marker is written again, never published). The markers protect against accidents, not against
someone who rewrites a part and its marker alike.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.job.inputs import InputFile, local_file_problem
from pipeline.job.outdir import PREPARED_DIR
from pipeline.storage import create, file_digest, read_json, replace, write_atomically

FINISHED_DIR = "_finished"
ROW_GROUP = 1024   # rows per row group of a part: bounds the writer's buffer
PART_FILES = ("docs.parquet", "ledger.parquet")
EDGE_BYTES = 1 << 20  # the input's first and last MiB are hashed into its marker


def part_key(source: str, name: str) -> str:
    return hashlib.sha256(f"{source}\x1f{name}".encode("utf-8", "surrogatepass")).hexdigest()[:24]


def file_name(file: InputFile, root: str) -> str:
    """The input file's path below the inputs' common folder `root` (as ids name it)."""
    return file.path[len(root):] if root and file.path.startswith(root) else file.path


def file_part_key(file: InputFile, root: str) -> str:
    return part_key(file.source, file_name(file, root))


def part_paths(output: str, key: str) -> dict[str, str]:
    """{"docs.parquet", "ledger.parquet", "done.json": path} of a prepared part of the run in `output`."""
    prepared = FileSystems.join(output, PREPARED_DIR)
    return {kind: FileSystems.join(prepared, f"{key}.{kind}") for kind in (*PART_FILES, "done.json")}


def finished_path(output: str, key: str) -> str:
    return FileSystems.join(output, FINISHED_DIR, f"{key}.parquet")


def temp_name(name: str) -> str:
    """A temporary name of this attempt's own: a retried or speculative second attempt of the same file
    (cluster runners) writes beside it, and the last rename wins (both wrote the same bytes)."""
    return f".{name}.{uuid.uuid4().hex[:12]}.tmp"


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


def marker_identity(file: InputFile, name: str, digest: str, cap: int | None) -> dict[str, Any]:
    """What a part's marker must say to commit it for this input file and these settings (besides the hash of
    the file's edges: reading it costs 2 MiB a file)."""
    return {"source": file.source, "file": name, "size": file.size, "mtime": file.mtime, "digest": digest, "cap": cap}


def committed_marker(paths: Mapping[str, str], want: Mapping[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """(the part's marker or None, whether it commits the part for `want`: every field equal and both part
    files as the marker committed them)."""
    marker = read_json(paths["done.json"])
    if marker is None:
        return None, False
    return marker, all(marker.get(k) == v for k, v in want.items()) and parts_intact(marker, paths)


def parts_intact(marker: Mapping[str, Any], paths: Mapping[str, str]) -> bool:
    """Both part files exist with the size and SHA-256 the marker committed."""
    parts = marker.get("parts") or {}
    for kind in PART_FILES:
        want = parts.get(kind) or {}
        found = file_digest(paths[kind]) if FileSystems.exists(paths[kind]) else None
        if found is None or found != (want.get("bytes"), want.get("sha256")):
            return False
    return True


def uncommit(paths: Mapping[str, str]) -> None:
    """The old part is no longer committed (its files are written again)."""
    FileSystems.delete([paths["done.json"]])


def commit(paths: Mapping[str, str], key: str, marker: Mapping[str, Any]) -> None:
    """Writes the marker, last: from now on the part is committed."""
    write_atomically(paths["done.json"], json.dumps(marker, indent=1).encode(), temp_name=temp_name(f"{key}.done.json"))


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
        self._temp = FileSystems.join(folder, temp_name(name))
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


class MarkerCounts:
    """Counts from the phase-1 markers written so far (`OUT/prepared/*.done.json`, each holding its file's
    counts): progress for runners that report no metrics while they run (local multi-processing workers, a
    portable job service). Each marker is read once; one listing of the folder per poll."""

    def __init__(self, output: str):
        self.prepared = FileSystems.join(output, PREPARED_DIR)
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
