"""A large set of strings (block-listed domains) kept as sorted 64-bit hashes.

4.56 M domains as a Python set of str cost ~450 MB per worker; as sorted uint64 hashes they cost
8 bytes each (36 MB), plus a bucket directory (2 MB) (top bits of the hash -> first index) that makes a
lookup one directory read and a comparison with ~8 neighbours: O(1), whatever the list's size.
The price is false positives: a key not in the list matches when its hash equals a listed one's,
with probability len(set) / 2**64 per lookup (2.5e-13 for 4.56 M domains).

Hashing 4.56 M lines takes seconds, so a built set is cached as a .npy file keyed by the list
files' digest (`$REFINERY_CACHE`, else `$XDG_CACHE_HOME/refinery`, else ~/.cache/refinery) and
memory-mapped: every worker process on a machine shares the same pages.
"""
from __future__ import annotations

import array
import bisect
import hashlib
import lzma
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

HASH_VERSION = "blake2b-64-v1"  # part of the cache key: change it when `key_hash` changes
_BUCKET_LOAD = 8  # keys per directory bucket, on average


def key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


class HashedSet:
    """Membership of strings by their 64-bit hash; `in` is O(1)."""

    def __init__(self, hashes: np.ndarray):
        self.hashes = hashes  # sorted, unique uint64 (may be a read-only memory map)
        bits = min(32, max(1, int(np.ceil(np.log2(max(len(hashes), 1) / _BUCKET_LOAD)))))
        self._shift = 64 - bits
        bounds = np.arange(2 ** bits, dtype=np.uint64) << np.uint64(self._shift)
        self._starts = np.append(np.searchsorted(hashes, bounds), len(hashes)).astype(np.uint32)
        # Python-level views: indexing them costs a third of numpy's scalar indexing
        self._hash_view = memoryview(np.ascontiguousarray(hashes)).cast("B").cast("Q")
        self._start_view = memoryview(self._starts).cast("B").cast("I")

    @classmethod
    def from_keys(cls, keys: Iterable[str]) -> HashedSet:
        return cls.from_hashes(np.fromiter((key_hash(k) for k in keys), dtype=np.uint64))

    @classmethod
    def from_hashes(cls, hashes: np.ndarray) -> HashedSet:
        hashes = np.sort(hashes)
        return cls(hashes[np.append(True, hashes[1:] != hashes[:-1])] if len(hashes) else hashes)

    def __len__(self) -> int:
        return len(self.hashes)

    def __contains__(self, key: str) -> bool:
        return self.contains_hash(key_hash(key))

    def contains_hash(self, h: int) -> bool:
        bucket = h >> self._shift
        hi = self._start_view[bucket + 1]
        i = bisect.bisect_left(self._hash_view, h, self._start_view[bucket], hi)
        return i < hi and self._hash_view[i] == h

    @property
    def nbytes(self) -> int:
        """Memory of the hashes and the bucket directory."""
        return int(self.hashes.nbytes + self._starts.nbytes)

    @property
    def false_positive_rate(self) -> float:
        """Chance that one lookup of an unlisted key matches."""
        return len(self.hashes) / 2.0 ** 64


def iter_lines(path: str) -> Iterator[str]:
    """Entries of a list file (.xz or plain): one per line, stripped; `#` comments and blanks skipped.
    Streamed: a 4.56 M-line list is never held as a list of str."""
    opener = lzma.open if path.endswith(".xz") else open
    rest = b""
    with opener(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 23), b""):  # 8 MB at a time, cut at the last newline
            chunk, _, rest = (rest + block).rpartition(b"\n")
            yield from _entries(chunk)
    yield from _entries(rest)


def _entries(chunk: bytes) -> Iterator[str]:
    for line in chunk.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            yield line


def read_lines(path: str) -> list[str]:
    return list(iter_lines(path))


def cache_dir() -> str:
    base = os.environ.get("REFINERY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "refinery")
    return os.path.join(base, "hashsets")


def _digest(paths: Sequence[str], salt: str) -> str:
    h = hashlib.sha256(f"{HASH_VERSION}\0{salt}".encode())
    for path in paths:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:32]


def load_hashed_sets(paths: Sequence[str], normalizers: Mapping[str, Callable[[str], str | None]]) -> dict[str, HashedSet]:
    """For each name -> normalize (None drops an entry), the keys of the list files `paths` as a HashedSet;
    built once per list content and name (the name stands for its normalization), then cached. The lists are
    read once, whatever the number of sets built from them."""
    out, missing = {}, {}
    for name, normalize in normalizers.items():
        cached = os.path.join(cache_dir(), f"{_digest(paths, name)}.npy")
        try:
            out[name] = HashedSet(np.load(cached, mmap_mode="r"))
        except (OSError, ValueError):
            missing[name] = (normalize, cached, array.array("Q"))
    for line in (line for path in paths for line in iter_lines(path)) if missing else ():
        for normalize, _, hashes in missing.values():
            key = normalize(line)
            if key:
                hashes.append(key_hash(key))
    for name, (_, cached, hashes) in missing.items():
        out[name] = HashedSet.from_hashes(np.frombuffer(hashes, dtype=np.uint64) if hashes else np.empty(0, np.uint64))
        _save(out[name], cached)
    return out


def load_hashed_set(paths: Sequence[str], normalize, salt: str = "") -> HashedSet:
    """One set: `load_hashed_sets` with one normalization, named by `salt`."""
    return load_hashed_sets(paths, {salt: normalize})[salt]


def _save(built: HashedSet, cached: str) -> None:
    try:  # atomically: concurrent workers may build the same set
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(cached), suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, built.hashes)
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only home: the set stays in memory, rebuilt by the next process
