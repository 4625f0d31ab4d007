"""Process groups and model wrapping: DDP or FSDP2, gloo on CPU and NCCL on GPU.

Under `torchrun` the environment names rank and world size; a plain `python` run is one rank and
needs no process group. Checkpoints hold full (unsharded) state dicts with strategy-neutral names,
gathered through `torch.distributed.checkpoint.state_dict`, so they load under any strategy or size.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn

from training.config import STRATEGIES


@dataclasses.dataclass
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return dist.is_available() and dist.is_initialized()


def init(device_kind: str = "auto", timeout_s: float = 600) -> Dist:
    """Join the `torchrun` group (gloo for CPU, NCCL for CUDA), or a single process without one."""
    use_cuda = torch.cuda.is_available() if device_kind == "auto" else device_kind == "cuda"
    if device_kind == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda asked for, but torch sees no CUDA device")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if "WORLD_SIZE" not in os.environ:
        return Dist(device=device)
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=device if use_cuda else None)
    return Dist(rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=local_rank, device=device)


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def parallelize(model: nn.Module, strategy: str, env: Dist, grad_checkpoint: bool = False) -> nn.Module:
    """The model as it trains: activation checkpointing first (the blocks recompute their forward
    pass in the backward one), then DDP or FSDP around it (torchtitan's order)."""
    model.grad_checkpoint = grad_checkpoint
    return wrap(model, strategy, env)


def wrap(model: nn.Module, strategy: str, env: Dist) -> nn.Module:
    """DDP, or FSDP2 (`fully_shard` on each transformer block, then on the root: ZeRO-3)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
    model.to(env.device)
    if not env.active:
        return model
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[env.device.index] if env.device.type == "cuda" else None)
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if hasattr(model, "no_sync") and hasattr(model, "module") else model


@contextlib.contextmanager
def gradient_sync(model: nn.Module, enabled: bool) -> Iterator[None]:
    """No gradient all-reduce / reduce-scatter on accumulation micro-batches (all but the last)."""
    if enabled or not dist.is_initialized():
        yield
    elif hasattr(model, "no_sync"):  # DDP
        with model.no_sync():
            yield
    elif hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        yield


def all_reduce_sum(value: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def gather_to_main(obj: Any, env: Dist) -> list[Any] | None:
    """Every rank's `obj` in rank order on rank 0 (None elsewhere)."""
    if not env.active:
        return [obj]
    out = [None] * env.world_size if env.main else None
    dist.gather_object(obj, out, dst=0)
    return out


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _options(full: bool = True):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=full, cpu_offload=True)


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer):
    """(model, optimizer) full state dicts keyed by parameter names; complete on rank 0."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    return get_state_dict(model, optimizer, options=_options())


def load_full_state(model: nn.Module, optimizer: torch.optim.Optimizer, model_state, optim_state) -> None:
    from torch.distributed.checkpoint.state_dict import set_state_dict

    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state,
                   options=_options())


def gradients(model: nn.Module, full: bool = True) -> dict:
    """Gradients by parameter name: unsharded (FSDP DTensors gathered, a collective), or this rank's
    local shard (`full=False`)."""
    out = {}
    for name, p in unwrap(model).named_parameters():
        if p.grad is not None:
            g = p.grad
            if hasattr(g, "full_tensor"):
                g = g.full_tensor() if full else g.to_local()
            out[name] = g.detach().clone().cpu()
    return out


def use_cpu_threads(local_ranks: int = 1, threads: int | None = None, why: str = "") -> tuple[int, str]:
    """Set torch's CPU threads as every command that runs torch does (`choose_threads`, or the count given) and say
    so: `refinery sample` on torch's default took 77 s a sample on a loaded 2-core machine, 12 s on one thread."""
    if threads is None:
        threads, why = choose_threads(local_ranks)
    torch.set_num_threads(threads)
    return threads, why


def choose_threads(local_ranks: int) -> tuple[int, str]:
    """(torch threads per rank, why): OMP_NUM_THREADS where the user (or the launcher) set it; else the cores
    this process may use that the machine's load leaves idle, shared by the ranks on this machine. torch's own
    default, one thread per core whatever else runs, was 20x slower on a busy 2-core machine."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given), "OMP_NUM_THREADS"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    idle = max(1, cores - int(busy + 0.5))
    return max(1, idle // max(local_ranks, 1)), (f"{cores} core(s), load {busy:.1f}, {local_ranks} rank(s) here; "
                                                 "OMP_NUM_THREADS sets it")
