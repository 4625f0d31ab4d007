"""Communication and idle-time cost of data, tensor and pipeline parallelism, and a layout planner.

Bytes are per GPU per training step; GiB = 2^30 bytes, GB/s = 10^9 bytes/s (vendor link speeds).
"""
from __future__ import annotations

import dataclasses

from training.memory import GIB, Shape, activations, duration, model_states, size


def ring_all_reduce_bytes(payload: float, gpus: int) -> float:
    """Bytes each GPU sends (and receives) in a ring all-reduce: reduce-scatter then all-gather, each
    moving (N-1)/N of the payload."""
    return 2 * (gpus - 1) / gpus * payload if gpus > 1 else 0.0


def data_parallel_bytes(params: float, gpus: int, zero: int = 0, grad_bytes: int = 2) -> float:
    """Gradient traffic per GPU per step. ZeRO-1/2 move the same volume as DDP (reduce-scatter the
    gradients, all-gather the updated weights); ZeRO-3/FSDP all-gathers the weights in forward and
    again in backward plus a gradient reduce-scatter: 3 x (N-1)/N, i.e. 1.5x DDP."""
    one_pass = (gpus - 1) / gpus * params * grad_bytes if gpus > 1 else 0.0
    return 3 * one_pass if zero >= 3 else 2 * one_pass


def tensor_parallel_bytes(shape: Shape, value_bytes: int = 2) -> dict[str, float]:
    """Megatron TP: 2 all-reduces per block in forward (after attention and MLP) and 2 in backward,
    each of a (b, s, h) activation. Returns the size of one all-reduce and the step's total."""
    one = shape.micro_batch * shape.seq * shape.hidden * value_bytes
    return {"per_all_reduce": one, "all_reduces": 4 * shape.layers, "total": 4 * shape.layers * one}


def transfer_seconds(nbytes: float, gb_per_s: float) -> float:
    return nbytes / (gb_per_s * 1e9)


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """GPipe/1F1B idle share of the *total* step time: (p-1)/(m+p-1). (Some papers quote (p-1)/m,
    the overhead relative to the ideal time; that is a different quantity.)"""
    return (stages - 1) / (micro_batches + stages - 1)


def pipeline_activation_micro_batches(stages: int, micro_batches: int, schedule: str = "1f1b") -> int:
    """Micro-batches of activations the first stage holds at peak: all m for GPipe, about p for 1F1B."""
    return micro_batches if schedule == "gpipe" else min(stages, micro_batches)


@dataclasses.dataclass
class Layout:
    tp: int
    pp: int
    dp: int
    zero: int
    gib_per_gpu: float
    reasons: list[str]


def plan_layout(shape: Shape, gpus_per_node: int, nodes: int, gpu_gib: float, intra_gb_s: float = 600.0,
                inter_gb_s: float = 25.0, recipe: str = "mixed-adamw", flash: bool = True,
                checkpointing: bool = True, pp_micro_batches: int = 16, gpu_tflops: float = 989.0,
                mfu: float = 0.4) -> Layout:
    """Among TP x PP x DP(ZeRO) layouts that fit in 90 % of GPU memory, the one with the highest
    estimated tokens/s. Step model (each DP replica runs `pp_micro_batches` micro-batches):
    compute = 6·P·tokens / (tp·pp) / (gpu_tflops·mfu), stretched by the bubble 1/(1 - bubble), plus
    TP all-reduces and DP gradient traffic, neither assumed to overlap (pessimistic).
    TP stays inside a node (its all-reduces sit on the critical path and need NVLink), PP goes across
    nodes (point-to-point activations tolerate slower links), DP is outermost; ties go to the lower
    ZeRO stage and the smaller model-parallel degree."""
    total = gpus_per_node * nodes
    fits, best_miss = [], None
    for tp in [t for t in (1, 2, 4, 8, 16) if t <= gpus_per_node and shape.heads % t == 0]:
        for pp in [p for p in (1, 2, 4, 8, 16, 32, 64) if shape.layers % p == 0 and total % (tp * p) == 0]:
            dp = total // (tp * pp)
            stage = dataclasses.replace(shape, layers=shape.layers // pp)
            acts = activations(stage, flash, checkpointing, tp)
            if pp > 1:  # 1F1B: the first stage holds ~pp micro-batches in flight
                acts *= pipeline_activation_micro_batches(pp, pp_micro_batches)
            for zero in range(4):
                gib = (model_states(shape.params / (tp * pp), dp, zero, recipe)["total"] + acts) / GIB
                if gib > 0.9 * gpu_gib:
                    if best_miss is None or gib < best_miss[3]:
                        best_miss = (tp, pp, zero, gib)
                    continue
                dp_link = intra_gb_s if tp * pp * dp <= gpus_per_node or tp * dp <= gpus_per_node and pp > 1 \
                    else inter_gb_s
                dp_s = transfer_seconds(data_parallel_bytes(shape.params / (tp * pp), dp, zero), dp_link)
                tp_s = transfer_seconds(tensor_parallel_bytes(stage)["total"], intra_gb_s) if tp > 1 else 0.0
                bubble = bubble_fraction(pp, pp_micro_batches)
                tokens = pp_micro_batches * shape.micro_batch * shape.seq  # per replica per step
                compute_s = 6 * shape.params * tokens / (tp * pp) / (gpu_tflops * 1e12 * mfu)
                step_s = compute_s / (1 - bubble) + tp_s + dp_s
                rate = dp * tokens / step_s
                fits.append((-rate, zero, tp * pp, Layout(tp, pp, dp, zero, gib, [
                    f"estimated {rate:,.0f} tokens/s: step {duration(step_s)} = compute {duration(compute_s)} "
                    f"(at {mfu:.0%} of {gpu_tflops:g} TFLOP/s){' / (1 - bubble)' if pp > 1 else ''} + comm",
                    f"fits in {size(gib * GIB)} of {gpu_gib:g} GiB per GPU (10 % kept free)",
                    f"DP={dp} outermost, ZeRO-{zero}: {duration(dp_s)} of gradient traffic per step at "
                    f"{dp_link:g} GB/s" + (" (ZeRO-3 moves 1.5x DDP's bytes)" if zero == 3 else ""),
                    *([f"TP={tp} inside a node: {duration(tp_s)} of all-reduce per step at {intra_gb_s:g} GB/s "
                       f"({intra_gb_s / inter_gb_s:.0f}x that across nodes)"] if tp > 1 else []),
                    *([f"PP={pp}: bubble {bubble:.1%} of step time with {pp_micro_batches} micro-batches"]
                      if pp > 1 else []),
                ])))
    if not fits:
        raise ValueError(f"no TP x PP x DP layout fits {gpu_gib:g} GiB per GPU on {total} GPUs"
                         + (f" (closest: TP={best_miss[0]} PP={best_miss[1]} ZeRO-{best_miss[2]} needs "
                            f"{best_miss[3]:.1f} GiB)" if best_miss else ""))
    return min(fits, key=lambda f: f[:3])[3]
