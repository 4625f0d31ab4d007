"""What a run reads: its sources' globs matched to files, each file once, checked before the job starts
(a glob that matches nothing, or names a folder, is one error line), and the folder they all lie in
(files are named below it in ids, metadata and the ledger)."""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem

from pipeline.job.config import ConfigError, RunConfig


class InputFile(NamedTuple):
    source: str
    path: str
    size: int
    mtime: float


def check_inputs(patterns: Sequence[str], written: Mapping[str, str] | None = None) -> dict[str, int]:
    """Fail before the job starts if a pattern matches nothing (a typo would otherwise give an empty run)
    or names a folder; the distinct files matched, with their sizes. `written`: how the user gave each pattern
    (`--source NAME=GLOB`), for the error line."""
    return {m.path: m.size_in_bytes for m in _match(patterns, written).values()}


def as_written(config) -> dict[str, str]:
    """{glob: the flag that gave it}: --input GLOB, --source NAME=GLOB (--lid-source for calibration's)."""
    written = {glob: f"--input {glob!r}" for glob in config.inputs}
    for spec in config.sources:
        name, glob = spec.split("=", 1)
        flag = "--lid-source" if name.startswith("lid.") else "--source"
        written.setdefault(glob, f"{flag} {name.removeprefix('lid.')}={glob!r}")
    return written


def _match(patterns: Sequence[str], written: Mapping[str, str] | None = None) -> dict:
    files: dict = {}
    for pattern in patterns:
        given = (written or {}).get(pattern, f"--input {pattern!r}")
        if "://" not in pattern and os.path.isdir(pattern):
            raise ConfigError(f"{given} is a folder: give a glob of its files, e.g. "
                              f"'{os.path.join(pattern, '*.warc.gz')}'")
        match = FileSystems.match([pattern])[0]
        found = {m.path: m for m in match.metadata_list}
        if "://" not in pattern:  # entries Beam's listing drops without a word: read (and ledgered) by name
            found.update((path, FileMetadata(path, 0, 0.0)) for path in unlisted_local_entries(pattern, found))
        if not found:
            raise ConfigError(f"{given} matches no files")
        files.update(found)
    return files


def unlisted_local_entries(pattern: str, listed) -> list[str]:
    """Entries a local glob names that Beam's match leaves out because they cannot be stat'ed (symlink loops,
    dangling links): the reader ledgers each as one `read` row, so a skipped input is never silent."""
    prefix = re.match(r"^[^[*?]*", pattern).group(0)
    if prefix == pattern:
        return [pattern] if os.path.islink(pattern) and pattern not in listed else []
    folder = prefix if prefix.endswith(os.sep) else os.path.dirname(prefix) or "."
    regex = re.compile(LocalFileSystem.translate_pattern(pattern))
    return sorted(path for root, _, names in os.walk(folder) for path in (os.path.join(root, n) for n in names)
                  if path not in listed and regex.match(path) and not os.path.isdir(path))


def input_files(config: RunConfig) -> list[InputFile]:
    """Every input file once (the first source naming it reads it), in name order: phase 1's work list."""
    files: dict[str, InputFile] = {}
    written = as_written(config)
    for name, globs in source_groups(config):
        for path, m in _match(globs, written).items():
            files.setdefault(path, InputFile(name, path, m.size_in_bytes, m.last_updated_in_seconds or 0.0))
    return sorted(files.values(), key=lambda f: f.path)


def input_root(files: Sequence[str]) -> str:
    """The folder all input files lie in (ending with '/'), or "": files are named below it."""
    prefix = os.path.commonprefix(list(files))
    cut = prefix.rfind("/")
    return prefix[:cut + 1] if cut >= 0 else ""


def source_groups(config: RunConfig) -> list[tuple]:
    """[(source name, [globs])]: --input globs under --source, plus every --source NAME=GLOB. The reader
    (WARC or text) is chosen per file when it is read, not from the glob."""
    groups: dict[str, list[str]] = {}
    for name, pattern in [(config.source, g) for g in config.inputs] + [tuple(spec.split("=", 1)) for spec in config.sources]:
        groups.setdefault(name.strip(), []).append(pattern)
    return list(groups.items())


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
