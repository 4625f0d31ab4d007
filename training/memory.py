"""Memory per GPU for training a transformer: model states under ZeRO stages, activations, LoRA/QLoRA.

All results in GiB (2^30 bytes). Sources:
- Model states: Rajbhandari et al. 2020 (ZeRO), mixed-precision AdamW = 2 (bf16 weights) + 2 (bf16
  grads) + 12 (fp32 master weights, momentum, variance) = 16 bytes per parameter; stage 1 shards the
  12, stage 2 also the gradients, stage 3 (= FSDP full sharding) also the weights.
- Activations: Korthikanti et al. 2022, per layer s·b·h·(34 + 5·a·s/h) bytes with 16-bit values; the
  5·a·s/h term (attention scores, softmax, dropout mask) is not stored with FlashAttention; tensor
  parallelism divides by t; per-layer checkpointing keeps 2·s·b·h bytes per layer (the layer inputs)
  plus one layer's full activations while it is recomputed.
"""
from __future__ import annotations

import dataclasses

GIB = 2 ** 30


def size(num_bytes: float) -> str:
    """For reports: bytes in the largest binary unit that keeps the number >= 1."""
    for unit, factor in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(num_bytes) >= factor:
            return f"{num_bytes / factor:,.2f} {unit}"
    return f"{num_bytes:,.0f} B"


def duration(seconds: float) -> str:
    """For reports: seconds in the largest unit that keeps the number >= 1."""
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= factor:
            return f"{seconds / factor:,.1f} {unit}"
    return f"{seconds * 1e9:,.0f} ns"


# Bytes per parameter: (weights, gradients, optimizer states incl. any fp32 master copy)
STATE_BYTES = {
    "mixed-adamw": (2, 2, 12),   # bf16/fp16 weights and grads; fp32 master + m + v
    "fp32-adamw": (4, 4, 8),     # fp32 weights and grads; m + v (also bf16 autocast: weights stay fp32)
    "mixed-sgd": (2, 2, 8),      # fp32 master + momentum
    "fp32-sgd": (4, 4, 4),       # momentum
}


@dataclasses.dataclass(frozen=True)
class Shape:
    params: float
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    seq: int | None = None
    micro_batch: int = 1
    vocab: int | None = None

    @staticmethod
    def from_config(cfg, micro_batch: int = 1) -> Shape:
        """From a training.model.ModelConfig (parameter count as the model builds it)."""
        d, v, t, n = cfg.n_embd, cfg.vocab_size, cfg.seq_len, cfg.n_layer
        per_layer = 12 * d * d + 13 * d  # qkv + proj + 2 MLP matrices, their biases, 2 LayerNorms
        params = v * d + t * d + n * per_layer + 2 * d
        return Shape(params, n, d, cfg.n_head, t, micro_batch, v)


def model_states(params: float, gpus: int = 1, zero: int = 0, recipe: str = "mixed-adamw") -> dict[str, float]:
    """Per-GPU bytes of weights, gradients and optimizer states for ZeRO stage 0-3 on `gpus` GPUs."""
    if zero not in (0, 1, 2, 3):
        raise ValueError("ZeRO stage is 0, 1, 2 or 3")
    w, g, o = STATE_BYTES[recipe]
    weights = params * w / (gpus if zero >= 3 else 1)
    grads = params * g / (gpus if zero >= 2 else 1)
    optim = params * o / (gpus if zero >= 1 else 1)
    return {"weights": weights, "gradients": grads, "optimizer": optim, "total": weights + grads + optim}


def activations_per_layer(shape: Shape, flash: bool = True, tensor_parallel: int = 1) -> float:
    """Bytes stored per transformer layer for backward (Korthikanti et al. 2022, eq. 2/3)."""
    s, b, h, a = shape.seq, shape.micro_batch, shape.hidden, shape.heads
    if None in (s, h, a, shape.layers):
        raise ValueError("activations need --layers, --hidden, --heads and --seq")
    per_token = 34 + (0 if flash else 5 * a * s / h)
    return s * b * h * per_token / tensor_parallel


def activations(shape: Shape, flash: bool = True, checkpointing: bool = False, tensor_parallel: int = 1) -> float:
    """Bytes of activations of all layers; with per-layer checkpointing only the layer inputs are kept,
    plus one layer's activations during its recomputation (which include that layer's own input, so
    it is not counted twice: checkpointing one layer saves nothing, and never costs more)."""
    layer = activations_per_layer(shape, flash, tensor_parallel)
    if not checkpointing:
        return shape.layers * layer
    inputs = 2 * shape.seq * shape.micro_batch * shape.hidden  # one 16-bit (s, b, h) tensor per layer
    return (shape.layers - 1) * inputs + layer


def lora(params: float, trainable: float, quantized: bool = False) -> dict[str, float]:
    """LoRA: frozen base in bf16 (2 B/param), or 4-bit NF4 for QLoRA (0.5 B/param plus quantization
    constants: one fp32 absmax per 64 weights, double-quantized to 8 bits with fp32 constants per 256
    blocks: 8/64 + 32/(64·256) bits ≈ 0.127 bits ≈ 0.016 B/param, Dettmers et al. 2023). Adapters train
    in mixed precision (16 B per trainable parameter)."""
    base = params * (0.5 + (8 / 64 + 32 / (64 * 256)) / 8 if quantized else 2.0)
    adapters = model_states(trainable, recipe="mixed-adamw")["total"]
    return {"base": base, "adapters": adapters, "total": base + adapters}


def lora_parameters(layers: int, hidden: int, rank: int, matrices_per_layer: int = 4) -> int:
    """Trainable parameters of rank-r adapters on `matrices_per_layer` square h×h projections per layer
    (q, k, v, o by default): r·(h + h) each."""
    return layers * matrices_per_layer * rank * 2 * hidden


def recompute_overhead(checkpointing: bool) -> float:
    """Extra compute as a fraction of a training step: checkpointing reruns the forward pass (1 of the
    ~3 forward-equivalents of forward + backward), ≈ +33 %."""
    return 1 / 3 if checkpointing else 0.0


def plan(shape: Shape, gpus: int, recipe: str = "mixed-adamw", flash: bool = True,
         checkpointing: bool = False, tensor_parallel: int = 1) -> dict[str, dict[str, float]]:
    """Per-GPU GiB for ZeRO stages 0-3: model states + activations (when the shape is known)."""
    acts = None
    if shape.layers and shape.hidden and shape.heads and shape.seq:
        acts = activations(shape, flash, checkpointing, tensor_parallel)
    out = {}
    for zero in range(4):
        states = model_states(shape.params / tensor_parallel, gpus, zero, recipe)
        row = {k: v / GIB for k, v in states.items()}
        if acts is not None:
            row["activations"] = acts / GIB
            row["total"] += row["activations"]
        out[f"zero{zero}"] = row
    return out
