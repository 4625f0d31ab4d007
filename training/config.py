"""Training options: a YAML file and/or the command line -> one TrainConfig -> data, model, loop.

`--config FILE` reads TrainConfig's fields from YAML (`seq_len: 512`, `spike: {factor: 4}`);
`--set spike.factor=4` and the flags (generated from the fields, `--seq-len`, `--spike-factor`)
win over it. A run's own `train_config.json` is valid input, so `--config RUN/train_config.json`
repeats a run. Loading and checking are `common/settings.py`'s, shared with `refinery run`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence

from common.settings import ConfigError, add_flags, add_set_flag, check, flag_values, load, set_values
from training.spikes import SpikeConfig

# No torch here: `refinery train --nproc-per-node N` checks the options in its own process before torchrun starts
# the ranks, and a mistake is one line within a second (torch's import alone takes one to two).
MODES, DEVICES, SCHEDULES = ("packed", "padded"), ("auto", "cpu", "cuda"), ("cosine", "wsd")
STRATEGIES = ("ddp", "fsdp")            # training/distributed.py
PRECISIONS = ("fp32", "bf16", "fp16")   # training/step.py (autocast)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The shape of training/model.py's GPT."""
    vocab_size: int = 258
    seq_len: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")


# Named sizes; --n-layer/--n-head/--n-embd override any of them.
MODEL_SIZES = {
    "tiny": dict(n_layer=2, n_head=2, n_embd=64),
    "small": dict(n_layer=4, n_head=4, n_embd=128),
    "base": dict(n_layer=6, n_head=6, n_embd=384),
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768),
}


@dataclasses.dataclass
class TrainConfig:
    data: str = ""                 # output folder of `refinery run` (has manifest.json); this or `tokens` is required
    tokens: str = ""               # instead of `data`: token shards of `refinery tokenize` (no tokenizing while training)
    out: str = ""                  # run folder: checkpoints/, metrics.jsonl, train_config.json; required
    tokenizer: str = "bytes"       # 'bytes' (UTF-8 bytes) or a BPE tokenizer.json (`refinery train-tokenizer`)
    mode: str = "packed"           # packed (documents joined, EOS between) or padded (one document per row)
    text_field: str = "text"
    seq_len: int = 256
    micro_batch: int = 8           # sequences per rank per micro-batch
    grad_accum: int = 1            # micro-batches per optimizer step
    steps: int = 100               # optimizer steps (the LR schedule's length)
    size: str = "small"            # model size: tiny, small, ... (MODEL_SIZES above)
    n_layer: int | None = None  # overrides the size's shape
    n_head: int | None = None
    n_embd: int | None = None
    dropout: float = 0.0
    # AdamW and schedule: nanoGPT/GPT-3 small-model values (betas 0.9/0.95, wd 0.1, clip 1.0)
    lr: float = 1e-3
    min_lr_ratio: float = 0.1      # the schedule ends at lr x this
    warmup: int = 10               # linear warm-up steps
    schedule: str = "cosine"       # cosine (decay over all steps) or wsd (warm-up, stable, then linear decay)
    decay_fraction: float | None = None  # wsd: share of the steps the decay takes; none: anneal_fraction
                                         # when annealing, else 0.2
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    clip: float = 1.0              # max global grad norm (0: no clipping)
    strategy: str = "ddp"          # ddp or fsdp (several ranks)
    precision: str = "fp32"        # fp32, bf16 or fp16 (autocast)
    grad_checkpoint: bool = False  # activation checkpointing: recompute blocks in the backward pass
    device: str = "auto"           # auto, cpu or cuda
    seed: int = 0
    workers: int = 0               # DataLoader worker processes per rank
    verify_checksums: bool = True  # check each shard against the manifest's SHA-256 before reading it
    eval_every: int = 50           # steps between validation losses (and at the last step); 0: none
    eval_tokens: int = 65536       # tokens of each evaluation set (its first documents, in manifest order)
    eval_data: tuple[str, ...] = ()  # more evaluation sets besides DATA/valid: DIR or NAME=DIR (a run's output
                                     # or token folder), e.g. a clean reference corpus
    anneal_data: str = ""          # a run's anneal/ folder (or its token shards): drawn from in the last steps
    anneal_fraction: float = 0.1   # with anneal_data: the share of the steps (the last ones) that draw from it
    checkpoint_every: int = 50
    # also a checkpoint once this many minutes passed since the last (a preempted job loses at most this much)
    checkpoint_minutes: float | None = None
    keep_checkpoints: int = 2
    resume: bool = False           # continue from OUT/checkpoints (error if none)
    overwrite: bool = False        # start afresh in OUT, deleting its checkpoints and logs
    peak_tflops: float | None = None  # peak dense TFLOP/s of one device, for MFU (known GPUs are looked up)
    stop_after: int | None = None     # exit after this step, as a crash would (tests resumption)
    log_every: int = 10
    tensorboard: bool = True       # also log the curves to OUT/tensorboard when the tensorboard package is installed
    spike: SpikeConfig = dataclasses.field(default_factory=SpikeConfig)
    inject: tuple[tuple[int, str], ...] = ()  # fault injection for testing the spike guard: [[step, spike|nan]]

    def __post_init__(self):
        small = [k for k in ("seq_len", "micro_batch", "grad_accum", "steps", "checkpoint_every", "log_every")
                 if getattr(self, k) < 1]
        check(not small, "; ".join(f"--{k.replace('_', '-')} must be >= 1" for k in small))
        check(self.eval_every >= 0 and self.eval_tokens >= 1, "--eval-every must be >= 0 and --eval-tokens >= 1")
        check(self.checkpoint_minutes is None or self.checkpoint_minutes > 0,
              f"--checkpoint-minutes must be > 0, not {self.checkpoint_minutes}")
        check(0 < self.anneal_fraction < 1, f"--anneal-fraction must be in (0, 1), not {self.anneal_fraction}")
        check(self.decay_fraction is None or 0 < self.decay_fraction <= 1,
              f"--decay-fraction must be in (0, 1], not {self.decay_fraction}")
        check(not (self.data and self.tokens), "--data and --tokens exclude each other: give one")
        check(not (self.tokens and self.tokenizer not in ("", "bytes")),
              "--tokens: token shards carry their own tokenizer (`refinery tokenize --tokenizer`); drop --tokenizer")
        for key, choices in (("schedule", SCHEDULES), ("mode", MODES), ("strategy", STRATEGIES), ("precision", PRECISIONS),
                             ("device", DEVICES), ("size", tuple(MODEL_SIZES))):
            check(getattr(self, key) in choices,
                  f"--{key} must be one of {', '.join(choices)}, not {getattr(self, key)!r}")
        bad = [f for f in self.inject if len(f) != 2 or f[1] not in ("spike", "nan")]
        check(not bad, f"inject: expected [[step, spike|nan], ...], got {list(self.inject)!r}")

    def model_config(self, vocab_size: int) -> ModelConfig:
        shape = dict(MODEL_SIZES[self.size])
        for key in ("n_layer", "n_head", "n_embd"):
            if getattr(self, key) is not None:
                shape[key] = getattr(self, key)
        return ModelConfig(vocab_size=vocab_size, seq_len=self.seq_len, dropout=self.dropout, **shape)

    def anneal_start(self) -> int | None:
        """Steps after this one draw from anneal_data (None: no anneal phase)."""
        return self.steps - max(1, round(self.steps * self.anneal_fraction)) if self.anneal_data else None

    def decay_steps(self) -> int:
        fraction = self.decay_fraction or (self.anneal_fraction if self.anneal_data else 0.2)
        return max(1, round(self.steps * fraction))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)


def _faults(spec: str) -> tuple[tuple[int, str], ...]:
    out = []
    for item in filter(None, spec.split(",")):
        step, _, kind = item.partition(":")
        if kind not in ("spike", "nan") or not step.strip().isdigit():
            raise ConfigError(f"--inject-fault {item!r}: expected STEP:spike or STEP:nan")
        out.append((int(step), kind))
    return tuple(out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="refinery train", usage="refinery train --data OUT|--tokens TOK --out RUN [--config YAML] [options]",
        description="Train a small GPT on refinery shards. Several ranks: `refinery train --nproc-per-node 2 ...`, "
                    "or torchrun --standalone --nproc_per_node=2 -m training.train --data OUT --out RUN")
    p.add_argument("--config", metavar="FILE.yaml", help="options as YAML (TrainConfig field names, e.g. a run's "
                   "train_config.json); the flags below override it")
    add_set_flag(p)
    # Read by `refinery train` (training/launch.py) before this parser; listed here so --help shows it.
    p.add_argument("--nproc-per-node", type=int, default=1, metavar="N",
                   help="ranks to start on this machine through `torchrun --standalone` (default: 1, this process "
                        "alone); gloo on CPU, NCCL on GPUs")
    p.add_argument("--inject-fault", metavar="STEP:spike|nan,...",
                   help="fault injection for testing the spike guard: scale the loss of this process's STEP-th "
                        "update attempt by 1e3, or make it NaN")
    add_flags(p, TrainConfig, skip={"inject"}, aliases={"spike.skip_window": ["--spike-window"]})
    return p


def parse(argv: Sequence[str] | None = None) -> TrainConfig:
    """The checked config, or ConfigError (one line) for a bad file, flag or value."""
    args = parser().parse_args(argv)
    overrides = set_values(args.set_values, TrainConfig)
    overrides.update(flag_values(args, TrainConfig))
    if args.inject_fault is not None:
        overrides["inject"] = _faults(args.inject_fault)
    cfg = load(TrainConfig, args.config, overrides)
    missing = ([] if cfg.data or cfg.tokens else ["--data (or --tokens)"]) + ([] if cfg.out else ["--out"])
    if missing:
        raise ConfigError(f"{' and '.join(missing)} required (on the command line or in --config)")
    return cfg
