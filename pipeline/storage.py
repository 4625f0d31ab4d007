"""Files of a run's output, local or in an object store (gs://, s3:// through Beam's filesystems): written
all or nothing, renamed into place, read back and digested. Below the job, the reports and the commands:
every layer that writes a file of the output uses these."""
from __future__ import annotations

import hashlib
import json
import os
import weakref
from typing import IO, Any

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from common import files


def _local(path: str) -> bool:
    return "://" not in path


def join(folder: str, *names: str) -> str:
    return os.path.join(folder, *names) if _local(folder) else FileSystems.join(folder, *names)


def exists(path: str) -> bool:
    return os.path.exists(path) if _local(path) else FileSystems.exists(path)


def holds_files(folder: str) -> bool:
    """True if `folder` (a local folder or a prefix in an object store) holds a file."""
    if _local(folder):
        if not os.path.isdir(folder):
            return False
        with os.scandir(folder) as entries:
            return any(entries)
    return bool(FileSystems.match([FileSystems.join(folder, "**")])[0].metadata_list)


def remove_tree(folder: str) -> None:
    """`folder` and all below it, if there (in an object store: every object under the prefix)."""
    if _local(folder):
        if os.path.exists(folder):
            FileSystems.delete([folder])
        return
    found = [m.path for m in FileSystems.match([FileSystems.join(folder, "**")])[0].metadata_list]
    if found:
        FileSystems.delete(found)


def arrow_paths(paths: list[str]):
    """(pyarrow filesystem, paths on it) for pyarrow's readers, which take a list of object-store URIs only with
    their filesystem; local paths as they are (filesystem None)."""
    if not paths or _local(paths[0]):
        return None, paths
    from pyarrow import fs

    filesystem, _ = fs.FileSystem.from_uri(paths[0])
    return filesystem, [fs.FileSystem.from_uri(path)[1] for path in paths]


_OPTIONS: list = []  # the options use_options was given last (the S3 lock's client is made from them too)


def use_options(options) -> None:
    """Beam's filesystems with a run's options: an object store's endpoint, region and keys (`--s3_endpoint_url`,
    `--s3_region_name`, ...; without them boto3's own settings: AWS_ENDPOINT_URL, ~/.aws, ...)."""
    FileSystems.set_options(options)
    _OPTIONS[:] = [options]


def _s3(path: str):
    """(boto3 client, bucket, key) of an s3:// path: the client Beam's S3 filesystem uses for these options."""
    from apache_beam.io.aws import s3io

    bucket, key = s3io.parse_s3_path(path)
    return s3io.S3IO(options=_OPTIONS[0] if _OPTIONS else None).client.client, bucket, key


def create_if_absent(path: str, data: bytes) -> bool:
    """Write `data` to an s3:// `path` only if nothing is there, in one step no other writer can interleave with
    (S3's conditional write, If-None-Match): True if written, False if an object was there."""
    if not path.startswith("s3://"):
        raise ValueError(f"{path}: exclusive create is S3's here (local files: OutputLock's flock)")
    client, bucket, key = _s3(path)
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except Exception as exc:  # botocore's ClientError; a 412 is the file that was there
        if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        raise
    return True


def _mend_beam_s3() -> None:
    """Three defects of Beam's S3 filesystem (2.77), mended where the run meets them:
    - every file operation built a new boto3 session and client (~0.2 s of loading service models each: 48 of a
      small run's 67 s against a local S3 server); a client is made once per process and S3 settings (boto3
      clients are thread-safe, not fork-safe: the process id is part of the key);
    - its writer completes a multipart upload with no part when nothing was written, which S3 refuses
      (MalformedXML): an empty file (the statistics of a split without rows) failed the run. S3 takes one empty
      last part, as other S3 clients send;
    - in a process whose pipeline options were never set (`refinery.open_run("s3://...")` in a notebook, a
      worker) it refused every operation ("Must provide one of client or options"); there it takes boto3's own
      settings (AWS_ENDPOINT_URL, ~/.aws, an instance role), as pyarrow and s3fs do."""
    try:
        from apache_beam.io.aws import s3io
        from apache_beam.io.aws.clients.s3 import boto3_client
    except ImportError:  # no boto3: no s3:// paths either
        return
    if getattr(s3io.S3IO, "refinery_mended", False):
        return
    clients: dict[tuple, Any] = {}
    make_io, finish = s3io.S3IO.__init__, s3io.S3Uploader.finish

    parsed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # options object -> its settings

    def settings(options) -> tuple:  # what Beam's client is made from: the --s3_* options
        if not hasattr(options, "get_all_options"):  # a dict of them
            return tuple(sorted((k, str(v)) for k, v in dict(options).items() if k.startswith("s3_")))
        if options not in parsed:  # parsing all options takes ~4 ms, and a run makes hundreds of S3 operations
            parsed[options] = tuple(sorted((k, str(v)) for k, v in options.get_all_options().items()
                                           if k.startswith("s3_")))
        return parsed[options]

    def shared_client(self, client=None, options=None) -> None:
        if client is None and options is None:
            options = {}  # no --s3_* options: boto3's own settings
        if client is None:
            key = (os.getpid(), settings(options))
            if key not in clients:
                clients[key] = boto3_client.Client(options=options)
            client = clients[key]
        make_io(self, client=client, options=options)

    def finish_with_a_part(self) -> None:
        if not self.parts and not self.buffer:
            self._write_to_s3(b"")  # noqa: SLF001
        finish(self)

    s3io.S3IO.__init__, s3io.S3Uploader.finish, s3io.S3IO.refinery_mended = shared_client, finish_with_a_part, True


_mend_beam_s3()  # here, so that every process that touches a run's files (its workers too) has it


def create(path: str) -> IO[bytes]:
    """A new file to write at `path`, its folder made: a local path as `common.files` opens it (never through a
    link or into a special file someone put there), others through Beam's filesystems."""
    if not _local(path):
        return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
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
    with FileSystems.create(temp, compression_type=CompressionTypes.UNCOMPRESSED) as fh:
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
