"""Files a run writes into a folder that others may write to as well (an output folder on a shared filesystem, a
training run's folder). Someone who can write there must not be able to make a run overwrite another file through a
planted symbolic or hard link, nor make it hang or write into a FIFO or device put in place of one of its files.

So every such file is opened here: never through a link (O_NOFOLLOW), opened without blocking and then checked to be
a regular file (a FIFO is refused, not waited on), never a file with other hard links, and truncated only after
those checks. Temporary names are created anew (O_EXCL) and renamed over the final name, which must be a regular
file or absent. A refusal is one `UnsafeFile` error naming the path and what is there; nothing is written.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


class UnsafeFile(OSError):
    """A path a run would write to holds a link or something other than a regular file."""

    def __init__(self, path: str, what: str):
        super().__init__(errno.EPERM, f"{what}, not a file refinery wrote; refinery does not write through links "
                                      "or into special files in a folder it writes to (remove it, or choose another "
                                      "folder); nothing was written there", path)


def kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    return next((what for test, what in _KINDS if test(mode)), None)


def _refuse_unless_own(path: str, st: os.stat_result, in_place: bool) -> None:
    what = kind(st.st_mode)
    if what is None and in_place and st.st_nlink > 1:  # writing it would change the other names' file too
        what = f"a file with {st.st_nlink - 1} other hard link(s)"
    if what is not None:
        raise UnsafeFile(path, what)


def check_replaceable(path: str, in_place: bool = False) -> None:
    """`path` is absent or a regular file (`in_place`: also with no other hard link, for writing into it)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _refuse_unless_own(path, st, in_place)


def open_fd(path: str, *, new: bool = False, append: bool = False, readable: bool = False, truncate: bool = True,
            mode: int = 0o644) -> int:
    """A file descriptor for writing `path` (created if absent; `new`: it must not exist), refused if the path is a
    link, a FIFO, a device, a folder or a file with other hard links. Truncated (unless `append`, `readable` or
    `truncate=False`) only once it is known to be a regular file of its own."""
    flags = (os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_RDWR if readable else os.O_WRONLY)
             | (os.O_EXCL if new else 0) | (os.O_APPEND if append else 0))
    try:
        fd = os.open(path, flags, mode)
    except OSError as exc:
        # ELOOP: the last component is a symbolic link; ENXIO: a FIFO without a reader (O_WRONLY | O_NONBLOCK);
        # EISDIR: a folder; EEXIST (`new`): something is there already, which may be a link
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EEXIST):
            check_replaceable(path, in_place=True)
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENODEV):  # and gone again since
            raise UnsafeFile(path, "something that is not a file refinery can write") from None
        raise
    try:
        _refuse_unless_own(path, os.fstat(fd), in_place=True)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if truncate and not (append or readable):
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_for_writing(path: str, mode: str = "w", encoding: str | None = "utf-8") -> IO:
    """`open(path, mode)` for "w", "a", "wb" or "ab", with `open_fd`'s refusals."""
    binary = "b" in mode
    fd = open_fd(path, append=mode.startswith("a"))
    return os.fdopen(fd, mode, **({} if binary else {"encoding": encoding}))


def _remove_stale_temp(temp: str) -> None:
    """An earlier attempt's temporary file goes; anything else at that name is refused."""
    check_replaceable(temp)
    try:
        os.remove(temp)  # a regular file: removing it touches no other name's data
    except FileNotFoundError:
        pass


@contextmanager
def atomic_writer(path: str, mode: str = "wb", temp_name: str | None = None, fsync: bool = False) -> Iterator[IO]:
    """`with atomic_writer(path) as fh:` writes a new temporary file beside `path` (`.NAME.tmp`, or `temp_name`) and
    renames it over `path` when the block ends without an error (removed if it raises): a reader sees the old file
    or the new one, never half of one."""
    folder = os.path.dirname(path)
    temp = os.path.join(folder, temp_name or f".{os.path.basename(path)}.tmp")
    _remove_stale_temp(temp)
    fh = os.fdopen(open_fd(temp, new=True), mode, **({} if "b" in mode else {"encoding": "utf-8"}))
    try:
        with fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        check_replaceable(path)
        os.replace(temp, path)
    except BaseException:
        try:
            os.remove(temp)
        except OSError:
            pass
        raise


def write_atomically(path: str, data: bytes | str, temp_name: str | None = None, fsync: bool = False) -> None:
    with atomic_writer(path, "wb", temp_name, fsync) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def unsafe_entries(folder: str, limit: int = 5) -> list[tuple[str, str]]:
    """(path, what it is) of the links and special files under `folder` (not following links), at most `limit`."""
    found: list[tuple[str, str]] = []
    stack = [folder]
    while stack and len(found) < limit:
        try:
            entries = list(os.scandir(stack.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
                continue
            what = kind(st.st_mode)
            if what == "a symbolic link":
                what += f" to {os.readlink(entry.path)}"
            if what is not None:
                found.append((entry.path, what))
    return found[:limit]


def file_sha256(path: str) -> str:
    """The hex SHA-256 of a file's bytes, read 1 MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
