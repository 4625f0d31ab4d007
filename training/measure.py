"""What a run actually holds and sends, to set next to training/memory.py and training/parallel.py.

- Model-state bytes: summed storage of this rank's parameters, gradients and optimizer-state tensors
  (FSDP: the local shards of the DTensors).
- Communication: payload bytes of every gradient/parameter collective. DDP reports its buckets
  through a communication hook; FSDP2 issues `all_gather_single`/`reduce_scatter_single`, counted by
  wrapping those functions while the counter is installed.
"""
from __future__ import annotations

import collections

import torch
import torch.distributed as dist


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _nbytes(t: torch.Tensor) -> int:
    t = _local(t)
    return t.numel() * t.element_size()


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """This rank's bytes of weights, gradients and optimizer states (call while gradients exist)."""
    params = list(model.parameters())
    optim = 0
    for state in optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value) and value.dim() > 0:  # AdamW's per-tensor `step` scalar is bookkeeping
                optim += _nbytes(value)
    return {"weights": sum(_nbytes(p) for p in params),
            "gradients": sum(_nbytes(p.grad) for p in params if p.grad is not None), "optimizer": optim}


class CommCounter:
    """Bytes handed to collectives, by kind, on this rank (payload = the full, unsharded tensor)."""

    def __init__(self) -> None:
        self.bytes: dict[str, int] = collections.Counter()
        self.calls: dict[str, int] = collections.Counter()
        self._restore = []

    def attach(self, model: torch.nn.Module, strategy: str) -> CommCounter:
        if not dist.is_initialized():
            return self
        if strategy == "ddp":
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

            def counting_hook(state, bucket):
                self.bytes["all_reduce"] += bucket.buffer().numel() * bucket.buffer().element_size()
                self.calls["all_reduce"] += 1
                return allreduce_hook(state, bucket)

            model.register_comm_hook(None, counting_hook)
        else:
            for name, payload in (("all_gather_single", lambda out, inp: out),
                                  ("reduce_scatter_single", lambda out, inp: inp)):
                original = getattr(dist, name)

                def wrapped(*args, _original=original, _name=name, _payload=payload, **kwargs):
                    out = kwargs.get("output_tensor", kwargs.get("output", args[0] if args else None))
                    inp = kwargs.get("input_tensor", kwargs.get("input", args[1] if len(args) > 1 else None))
                    self.bytes[_name] += _nbytes(_payload(out, inp))
                    self.calls[_name] += 1
                    return _original(*args, **kwargs)

                setattr(dist, name, wrapped)
                self._restore.append((name, original))
        return self

    def detach(self) -> None:
        for name, original in self._restore:
            setattr(dist, name, original)
        self._restore.clear()

    def reset(self) -> None:
        self.bytes.clear()
        self.calls.clear()

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {"bytes": dict(self.bytes), "calls": dict(self.calls)}


def predicted(n_params: int, block_params: int, world_size: int, strategy: str, grad_accum: int) -> dict:
    """The calculator's numbers for this run: model states per rank (fp32 weights and gradients and
    AdamW m, v: the `fp32-adamw` recipe, which bf16 autocast keeps) and collective payloads per step."""
    from training.memory import model_states
    from training.parallel import ring_all_reduce_bytes

    sharded = strategy == "fsdp" and world_size > 1
    zero = 3 if sharded else 0
    states = model_states(n_params, world_size, zero, "fp32-adamw")
    comm = {}
    if world_size > 1 and strategy == "ddp":
        payload = 4 * n_params  # fp32 gradients, all-reduced once per step (no_sync before)
        comm["all_reduce"] = {"predicted": payload, "traffic": ring_all_reduce_bytes(payload, world_size)}
    elif sharded:
        # forward gathers every group; backward gathers the blocks again (resharded after forward);
        # the root group stays unsharded until its backward. Gradients reduce-scattered once per step.
        gather = 4 * grad_accum * (n_params + block_params)
        comm["all_gather_single"] = {"predicted": gather, "traffic": (world_size - 1) / world_size * gather}
        scatter = 4 * n_params
        comm["reduce_scatter_single"] = {"predicted": scatter, "traffic": (world_size - 1) / world_size * scatter}
    return {"recipe": "fp32-adamw", "zero": zero,
            "predicted": {k: states[k] for k in ("weights", "gradients", "optimizer")}, "communication": comm}
