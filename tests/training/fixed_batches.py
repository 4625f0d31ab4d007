"""A fixed tiny model and fixed micro-batches with uneven target-token counts, shared by the
in-process tests and the torchrun parity worker."""
from __future__ import annotations

import torch

from training.data import IGNORE_INDEX
from training.model import GPT, ModelConfig

CONFIG = ModelConfig(vocab_size=258, seq_len=64, n_layer=2, n_head=2, n_embd=32)
SEQ = CONFIG.seq_len


def make_model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(CONFIG)


def micro_batch(target_tokens: int, seed: int, rows: int = 8) -> dict[str, torch.Tensor]:
    """`rows` sequences of SEQ tokens whose targets hold exactly `target_tokens` unmasked positions
    (the first ones in row order), as the padded data mode makes them."""
    assert 0 < target_tokens <= rows * SEQ
    g = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, 256, (rows, SEQ), generator=g)
    targets = torch.randint(0, 256, (rows, SEQ), generator=g)
    flat = targets.view(-1)
    flat[target_tokens:] = IGNORE_INDEX
    return {"input": inputs, "target": targets}


# The example: micro-batches of 500, 100, 400 and 50 target tokens; two per rank.
TOKEN_COUNTS = [500, 100, 400, 50]
MICRO_BATCHES: list[dict[str, torch.Tensor]] = [micro_batch(n, seed=i) for i, n in enumerate(TOKEN_COUNTS)]
MICRO_BATCHES_BY_RANK = [MICRO_BATCHES[:2], MICRO_BATCHES[2:]]


def concatenated(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.cat([b[k] for b in batches]) for k in ("input", "target")}
