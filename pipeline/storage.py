"""Files of a run's output, local or in an object store (gs://, s3:// through Beam's filesystems): written
all or nothing, renamed into place, read back and digested. Below the job, the reports and the commands:
every layer that writes a file of the output uses these."""
from __future__ import annotations

import hashlib
import json
import os
from typing import IO, Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from common import files


def _local(path: str) -> bool:
    return "://" not in path


def create(path: str) -> IO[bytes]:
    """A new file to write at `path`, its folder made: a local path as `common.files` opens it (never through a
    link or into a special file someone put there), others through Beam's filesystems."""
    if not _local(path):
        return FileSystems.create(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return files.open_for_writing(path, "wb")


def replace(temp: str, path: str) -> None:
    """Rename a finished temporary file over `path` (a retried attempt replaces its own earlier output)."""
    if _local(path):
        files.check_replaceable(path)
        os.replace(temp, path)
        return
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temp], [path])


def write_atomically(path: str, data: bytes, temp_name: str | None = None) -> None:
    """`data` to `path` all or nothing: written to a temporary name beside it (default `.NAME.tmp`), then
    renamed over any earlier file (a retried attempt replaces its own earlier output)."""
    if _local(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        files.write_atomically(path, data, temp_name)
        return
    folder, name = path.rsplit("/", 1) if "/" in path else ("", path)
    temp = temp_name or f".{name}.tmp"
    temp = FileSystems.join(folder, temp) if folder else temp
    with FileSystems.create(temp) as fh:
        fh.write(data)
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temp], [path])


def open_raw(path: str) -> IO[bytes]:
    """A file to read as it is stored (a .gz is not undone: the readers sniff and decompress themselves)."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


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
