"""Validation loss on fixed text: the run's own valid/ split and any `--eval-data` folders.

An evaluation set is the first `eval_tokens` tokens of a folder's documents in manifest order (each
followed by EOS, as in training), cut into windows of seq_len+1 tokens that advance by seq_len, so each
token is predicted once. Window i belongs to rank i mod R. The loss is the token-weighted mean over all
windows of all ranks (sums and counts all-reduced), so it does not depend on the number of ranks, and
two runs on different training data are compared on the same text. Every rank runs the same number of
forward passes (a rank short of windows runs an all-masked one): FSDP's forward is a collective.
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch

from training.data import IGNORE_INDEX, MANIFEST, DataError, read_manifest
from training.distributed import all_reduce_sum
from training.step import token_loss_sum

VALID = "valid"


@dataclasses.dataclass
class EvalSet:
    name: str
    path: str
    windows: np.ndarray     # (n, seq_len + 1) int64, all ranks' windows
    tokens: int             # target tokens over all windows


def _documents(path: str, tokenizer, text_field: str) -> Iterator[np.ndarray]:
    from training.tokens import documents, is_token_dir

    if is_token_dir(path):
        for ids in documents(path):
            yield np.asarray(ids, dtype=np.int64)
        return
    manifest = read_manifest(path)
    for shard in manifest["shards"]:
        for batch in pq.ParquetFile(os.path.join(path, shard["path"])).iter_batches(columns=[text_field]):
            for text in batch.column(0).to_pylist():
                yield np.asarray(tokenizer.encode(text or ""), dtype=np.int64)


def load_eval_set(name: str, path: str, tokenizer, seq_len: int, max_tokens: int, text_field: str = "text") -> EvalSet:
    """The windows of a folder's first `max_tokens` target tokens (or all it has)."""
    parts, held = [], 0
    eos = np.asarray([tokenizer.eos_id], dtype=np.int64)
    for ids in _documents(path, tokenizer, text_field):
        parts += [ids, eos]
        held += len(ids) + 1
        if held > max_tokens:
            break
    stream = np.concatenate(parts)[:max_tokens + 1] if parts else np.zeros(0, dtype=np.int64)
    if len(stream) < 2:
        raise DataError(f"evaluation set {name} ({path}) holds no text")
    windows = [stream[i:i + seq_len + 1] for i in range(0, len(stream) - 1, seq_len)]
    block = np.full((len(windows), seq_len + 1), IGNORE_INDEX, dtype=np.int64)
    for row, window in zip(block, windows):
        row[:len(window)] = window
    return EvalSet(name, path, block, int((block[:, 1:] != IGNORE_INDEX).sum()))


def eval_sets(data: str, extra: Sequence[str], tokenizer, seq_len: int, max_tokens: int,
              text_field: str = "text") -> list[EvalSet]:
    """The training data's valid/ split (when it has one with text) and every NAME=DIR or DIR of `extra`."""
    sets = []
    own = os.path.join(data, VALID)
    if os.path.isfile(os.path.join(own, MANIFEST)):
        try:
            sets.append(load_eval_set(VALID, own, tokenizer, seq_len, max_tokens, text_field))
        except DataError:  # a small run may hold out nothing: no validation loss, said at the start
            pass
    for spec in extra:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = os.path.basename(os.path.normpath(spec)), spec
        if name in {s.name for s in sets}:
            raise DataError(f"--eval-data: two evaluation sets named {name!r}; name them NAME=DIR")
        sets.append(load_eval_set(name, path, tokenizer, seq_len, max_tokens, text_field))
    return sets


@torch.no_grad()
def evaluate(model: torch.nn.Module, data: EvalSet, micro_batch: int, rank: int, world_size: int,
             precision: str, device: torch.device, pad_id: int) -> dict[str, Any]:
    """{"loss": token-weighted mean over all ranks, "tokens": target tokens}; the model is left in train mode."""
    mine = data.windows[rank::world_size]
    per_rank = math.ceil(len(data.windows) / world_size)
    batches = max(1, math.ceil(per_rank / micro_batch))
    total = torch.zeros(2, dtype=torch.float64, device=device)
    model.eval()
    try:
        for b in range(batches):
            block = torch.from_numpy(np.array(mine[b * micro_batch:(b + 1) * micro_batch]))
            if not len(block):  # this rank is out of windows: an all-masked pass keeps the collectives in step
                block = torch.full((1, data.windows.shape[1]), IGNORE_INDEX, dtype=torch.int64)
            inputs = block[:, :-1].clone()
            inputs[inputs == IGNORE_INDEX] = pad_id
            batch = {"input": inputs, "target": block[:, 1:]}
            total[0] += token_loss_sum(model, batch, precision, device).double()
            total[1] += float((block[:, 1:] != IGNORE_INDEX).sum())
    finally:
        model.train()
    total = all_reduce_sum(total)
    return {"loss": total[0].item() / max(total[1].item(), 1), "tokens": int(total[1].item())}
