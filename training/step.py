"""One optimizer step's worth of forward/backward: gradient accumulation with the loss normalized by
the global number of target tokens, precision handling, and the learning-rate schedule.

Why token-sum normalization: micro-batches (and ranks) hold different numbers of target tokens
(padding, masks, short documents). Averaging each micro-batch and dividing by K weights a token in a
50-token micro-batch 10x more than one in a 500-token micro-batch. Summing token losses and dividing
once by the all-reduced token count of the whole step gives exactly the big-batch gradient.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import torch
import torch.nn.functional as F

from training.data import IGNORE_INDEX
from training.distributed import all_reduce_sum, gradient_sync


@dataclasses.dataclass
class StepResult:
    loss: float          # mean loss per target token over all micro-batches of all ranks
    tokens: int          # global target tokens of the step
    local_tokens: int


def autocast(precision: str, device: torch.device):
    """bf16/fp16 autocast around forward (weights and optimizer stay fp32: the master copy)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16 needs loss scaling (small gradients underflow to 0 in fp16); bf16 has fp32's range."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" else None


def token_loss_sum(model: torch.nn.Module, batch: dict[str, torch.Tensor], precision: str,
                   device: torch.device) -> torch.Tensor:
    inputs, targets = batch["input"].to(device), batch["target"].to(device)
    with autocast(precision, device):
        logits = model(inputs)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX,
                           reduction="sum")


def accumulation_step(model: torch.nn.Module, batches: list[dict[str, torch.Tensor]], world_size: int,
                      precision: str = "fp32", device: torch.device = torch.device("cpu"),
                      scaler: torch.amp.GradScaler | None = None) -> StepResult:
    """Backward over all micro-batches; gradients end up equal to those of one big batch on one rank.

    The gradient is d(sum of token losses)/d(theta) / (global tokens). DDP and FSDP average gradients
    over ranks (divide by world size), so each rank scales its loss by world_size / global_tokens.
    Gradients are synchronized only on the last micro-batch.
    """
    local = sum(int((b["target"] != IGNORE_INDEX).sum()) for b in batches)
    counts = all_reduce_sum(torch.tensor([float(local)], dtype=torch.float64, device=device))
    global_tokens = int(counts.item())
    scale = world_size / max(global_tokens, 1)
    total = torch.zeros((), dtype=torch.float64, device=device)
    for i, batch in enumerate(batches):
        with gradient_sync(model, enabled=i == len(batches) - 1):
            loss_sum = token_loss_sum(model, batch, precision, device)
            scaled = loss_sum * scale
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
        total += loss_sum.detach().double()
    total = all_reduce_sum(total)
    loss = total.item() / global_tokens if global_tokens else float("nan")
    return StepResult(loss=loss, tokens=global_tokens, local_tokens=local)


def clip_gradients(model: torch.nn.Module, max_norm: float) -> float:
    """Global gradient norm before clipping (all ranks agree; FSDP shards are reduced)."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf"))
    if hasattr(norm, "full_tensor"):
        norm = norm.full_tensor()
    return float(norm)


def lr_at(step: int, base_lr: float, warmup: int, total: int, min_ratio: float = 0.1,
          schedule: str = "cosine", decay_steps: int = 0) -> float:
    """Linear warmup to base_lr, then either cosine decay to min_ratio * base_lr at `total` steps, or
    (wsd: warmup-stable-decay) base_lr until the last `decay_steps`, which decay linearly to the minimum."""
    if warmup and step < warmup:
        return base_lr * (step + 1) / warmup
    if schedule == "wsd":
        start = max(warmup, total - decay_steps)
        progress = min(1.0, max(0, step + 1 - start) / max(1, total - start))
        return base_lr * (1 - (1 - min_ratio) * progress)
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return base_lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
