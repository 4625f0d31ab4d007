"""Token files other trainers read, from token shards. Megatron-LM's indexed dataset: `PREFIX.bin` (every document's ids, one after the other) and
`PREFIX.idx` (the MMIDIDX v1 index Megatron's `IndexedDataset` reads: header, dtype code, sequence lengths, byte
pointers, document boundaries), as Megatron's own `preprocess_data.py --append-eod` writes them: one sequence per
document, each ending in the tokenizer's end-of-text id. `--data-path PREFIX` in Megatron-LM (or
`megatron.core.datasets.indexed_dataset.IndexedDataset(PREFIX)`) reads it; `tests/training/test_token_formats.py`
checks it with megatron-core's own reader. And datatrove's tokenized files (`write_datatrove_file`), which
nanotron trains from, checked with datatrove's own `DatatroveFolderDataset`.
"""
from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

import numpy as np

from common import files

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}  # megatron.core.datasets.indexed_dataset.DType


def _write_tokens(path: str, documents: Iterable[np.ndarray], dtype: np.dtype, eod: int | None):
    """Every document's ids (then `eod`) one after the other into `path`: (each document's length, SHA-256)."""
    lengths: list[int] = []
    digest = hashlib.sha256()
    with files.atomic_writer(path) as fh:
        for ids in documents:
            ids = np.asarray(ids, dtype=np.int64)
            if eod is not None:
                ids = np.append(ids, eod)
            data = ids.astype(dtype).tobytes()
            fh.write(data)
            digest.update(data)
            lengths.append(len(ids))
    return lengths, digest


def megatron_dtype(vocab_size: int) -> np.dtype:
    """Megatron's choice: uint16 ids below 65,500, else int32."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


def write_indexed_dataset(prefix: str, documents: Iterable[np.ndarray], vocab_size: int, eod: int | None) -> dict:
    """PREFIX.bin and PREFIX.idx of `documents` (each followed by `eod` when given); returns their facts."""
    dtype = megatron_dtype(vocab_size)
    lengths, digest = _write_tokens(prefix + ".bin", documents, dtype, eod)
    count = len(lengths)
    pointers = np.zeros(count, dtype=np.int64)
    if count:
        pointers[1:] = np.cumsum(np.asarray(lengths[:-1], dtype=np.int64)) * dtype.itemsize
    index = b"".join([MAGIC, struct.pack("<Q", VERSION), struct.pack("<B", DTYPE_CODES[dtype]),
                      struct.pack("<Q", count), struct.pack("<Q", count + 1),
                      np.asarray(lengths, dtype=np.int32).tobytes(), pointers.tobytes(),
                      np.arange(count + 1, dtype=np.int64).tobytes()])  # document k is sequence k
    files.write_atomically(prefix + ".idx", index)
    return {"prefix": prefix, "documents": count, "tokens": int(sum(lengths)), "dtype": dtype.name, "eod": eod,
            "bin_sha256": digest.hexdigest(), "idx_sha256": hashlib.sha256(index).hexdigest()}


def write_datatrove_file(path: str, documents: Iterable[np.ndarray], vocab_size: int, eod: int | None,
                         tokenizer_name: str) -> dict:
    """datatrove's tokenized file (what its DocumentTokenizer writes and nanotron reads through
    `DatatroveFolderDataset`): PATH (every document's ids then `eod`, uint16 below 65,536 ids else uint32),
    PATH.index (uint64 end of each document, in tokens) and PATH.metadata (tokenizer|token size, token count)."""
    dtype = np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)
    lengths, digest = _write_tokens(path, documents, dtype, eod)
    ends = np.cumsum(np.asarray(lengths, dtype=np.int64)).tolist()
    total = ends[-1] if ends else 0
    files.write_atomically(path + ".index", np.asarray(ends, dtype="<u8").tobytes())
    files.write_atomically(path + ".metadata", f"{tokenizer_name}|{dtype.itemsize}\n{total}\n{total:,} tokens")
    return {"path": path, "documents": len(ends), "tokens": total, "token_size": dtype.itemsize, "eod": eod,
            "sha256": digest.hexdigest()}
