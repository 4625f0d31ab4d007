"""Training options: a YAML file and/or the command line -> one TrainConfig -> data, model, loop.

`--config FILE` reads TrainConfig's fields from YAML (`seq_len: 512`, `spike: {factor: 4}`);
options given on the command line win. A run's own `train_config.json` is valid input, so
`--config RUN/train_config.json` repeats a run.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from typing import Any, Dict, List, Optional, Sequence, Tuple

from training.distributed import STRATEGIES
from training.model import MODEL_SIZES, ModelConfig
from training.spikes import SpikeConfig
from training.step import PRECISIONS


@dataclasses.dataclass
class TrainConfig:
    data: str
    out: str
    tokenizer: str = "bytes"
    mode: str = "packed"
    text_field: str = "text"
    seq_len: int = 256
    micro_batch: int = 8
    grad_accum: int = 1
    steps: int = 100
    size: str = "small"
    n_layer: Optional[int] = None
    n_head: Optional[int] = None
    n_embd: Optional[int] = None
    dropout: float = 0.0
    # AdamW and schedule: nanoGPT/GPT-3 small-model values (betas 0.9/0.95, wd 0.1, clip 1.0)
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup: int = 10
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    clip: float = 1.0
    strategy: str = "ddp"
    precision: str = "fp32"
    grad_checkpoint: bool = False
    device: str = "auto"
    seed: int = 0
    workers: int = 0
    verify_checksums: bool = True
    checkpoint_every: int = 50
    keep_checkpoints: int = 2
    resume: bool = False
    overwrite: bool = False
    peak_tflops: Optional[float] = None
    stop_after: Optional[int] = None
    log_every: int = 10
    spike: SpikeConfig = dataclasses.field(default_factory=SpikeConfig)
    inject: Tuple[Tuple[int, str], ...] = ()

    def model_config(self, vocab_size: int) -> ModelConfig:
        if self.size not in MODEL_SIZES:
            raise ValueError(f"unknown model size {self.size!r} (one of {', '.join(MODEL_SIZES)})")
        shape = dict(MODEL_SIZES[self.size])
        for key in ("n_layer", "n_head", "n_embd"):
            if getattr(self, key) is not None:
                shape[key] = getattr(self, key)
        return ModelConfig(vocab_size=vocab_size, seq_len=self.seq_len, dropout=self.dropout, **shape)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)


def _faults(spec: str) -> Tuple[Tuple[int, str], ...]:
    out = []
    for item in filter(None, spec.split(",")):
        step, _, kind = item.partition(":")
        if kind not in ("spike", "nan"):
            raise argparse.ArgumentTypeError(f"--inject-fault {item!r}: expected STEP:spike or STEP:nan")
        out.append((int(step), kind))
    return tuple(out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refinery train", description=(
        "Train a small GPT on refinery shards. Several ranks: `refinery train --nproc-per-node 2 ...`, or "
        "torchrun --standalone --nproc_per_node=2 -m training.train --data OUT --out RUN"))
    d = TrainConfig(data="", out="")
    p.add_argument("--config", metavar="FILE.yaml", help="options as YAML (TrainConfig field names); "
                   "command-line options override it")
    p.add_argument("--data", help="output directory of `refinery run` (has manifest.json); required")
    p.add_argument("--out", help="run directory: checkpoints/, metrics.jsonl, train_config.json; required")
    p.add_argument("--tokenizer", default=d.tokenizer, help="'bytes' (UTF-8 bytes) or a BPE tokenizer.json")
    p.add_argument("--mode", choices=("packed", "padded"), default=d.mode)
    p.add_argument("--text-field", default=d.text_field)
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--micro-batch", type=int, default=d.micro_batch, help="sequences per rank per micro-batch")
    p.add_argument("--grad-accum", type=int, default=d.grad_accum, help="micro-batches per optimizer step")
    p.add_argument("--steps", type=int, default=d.steps, help="optimizer steps (the LR schedule's length)")
    p.add_argument("--size", default=d.size, help=f"model size: {', '.join(MODEL_SIZES)}")
    for key in ("n_layer", "n_head", "n_embd"):
        p.add_argument("--" + key.replace("_", "-"), type=int, default=None)
    p.add_argument("--dropout", type=float, default=d.dropout)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--min-lr-ratio", type=float, default=d.min_lr_ratio)
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--clip", type=float, default=d.clip, help="max global grad norm (0: no clipping)")
    p.add_argument("--strategy", choices=STRATEGIES, default=d.strategy)
    p.add_argument("--precision", choices=PRECISIONS, default=d.precision)
    p.add_argument("--grad-checkpoint", action="store_true")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=d.device)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--workers", type=int, default=d.workers, help="DataLoader worker processes per rank")
    p.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false")
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every)
    p.add_argument("--keep-checkpoints", type=int, default=d.keep_checkpoints)
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoints (error if none)")
    p.add_argument("--overwrite", action="store_true", help="start afresh in OUT, deleting its checkpoints and logs")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="peak dense TFLOP/s of one device for MFU (known GPUs are looked up)")
    p.add_argument("--stop-after", type=int, default=None, help="exit after this step, as a crash would")
    p.add_argument("--log-every", type=int, default=d.log_every)
    s = SpikeConfig()
    p.add_argument("--spike-factor", type=float, default=s.factor, help="0 turns spike skipping off")
    p.add_argument("--spike-history", type=int, default=s.history)
    p.add_argument("--spike-min-history", type=int, default=s.min_history)
    p.add_argument("--spike-max-skips", type=int, default=s.max_skips)
    p.add_argument("--spike-window", type=int, default=s.skip_window)
    p.add_argument("--spike-max-rollbacks", type=int, default=s.max_rollbacks,
                   help="more rollbacks than this within --spike-rollback-window steps stop the run with an error")
    p.add_argument("--spike-rollback-window", type=int, default=s.rollback_window)
    p.add_argument("--inject-fault", type=_faults, default=(), metavar="STEP:spike|nan,...",
                   help="fault injection for testing the spike guard: scale the loss of this process's STEP-th "
                        "update attempt by 1e3, or make it NaN")
    return p


_SPIKE_OPTIONS = {"factor": "spike_factor", "history": "spike_history", "min_history": "spike_min_history",
                  "max_skips": "spike_max_skips", "skip_window": "spike_window",
                  "max_rollbacks": "spike_max_rollbacks", "rollback_window": "spike_rollback_window"}
_CHOICES = {"mode": ("packed", "padded"), "strategy": STRATEGIES, "precision": PRECISIONS,
            "device": ("auto", "cpu", "cuda"), "size": tuple(MODEL_SIZES)}


def _check_type(name: str, value: Any, hint: Any) -> Any:
    """The value if it fits the field's type (ints for floats; YAML 1.1 reads `3e-4` as a string)."""
    allowed = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    if value is None and type(None) in allowed:
        return value
    if float in allowed and not isinstance(value, bool):
        try:
            return float(value) if isinstance(value, (int, str)) else value
        except ValueError:
            pass
    if not any(isinstance(value, t) and not (t is int and isinstance(value, bool))
               for t in allowed if isinstance(t, type)):
        names = " or ".join(getattr(t, "__name__", str(t)) for t in allowed)
        raise SystemExit(f"training.train: error: config {name}: expected {names}, got {value!r}")
    return value


def _file_options(path: str) -> Dict[str, Any]:
    """argparse destinations -> values, from a YAML (or JSON) file of TrainConfig fields."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            raw = yaml.safe_load(fh) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"training.train: error: cannot read --config {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise SystemExit(f"training.train: error: --config {path}: expected a mapping of option: value")
    hints = typing.get_type_hints(TrainConfig)
    spike_hints = typing.get_type_hints(SpikeConfig)
    known = sorted(hints)
    out: Dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name == "spike":
            if not isinstance(value, dict) or set(value) - set(_SPIKE_OPTIONS):
                raise SystemExit(f"training.train: error: config spike: expected a mapping with keys "
                                 f"{', '.join(_SPIKE_OPTIONS)}, got {value!r}")
            for spike_key, spike_value in value.items():
                out[_SPIKE_OPTIONS[spike_key]] = _check_type(f"spike.{spike_key}", spike_value, spike_hints[spike_key])
        elif name == "inject":
            try:
                out["inject_fault"] = _faults(",".join(f"{int(step)}:{kind}" for step, kind in value or ()))
            except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
                raise SystemExit(f"training.train: error: config inject: expected [[step, spike|nan], ...], "
                                 f"got {value!r}") from exc
        elif name in hints:
            out[name] = _check_type(name, value, hints[name])
        else:
            raise SystemExit(f"training.train: error: config {path}: unknown option {key!r} (known: {', '.join(known)})")
    return out


def parse(argv: Optional[Sequence[str]] = None) -> TrainConfig:
    p = parser()
    first, _ = p.parse_known_args(argv)
    if first.config:
        p.set_defaults(**_file_options(first.config))  # the command line still overrides these
    a = p.parse_args(argv)
    missing = [f"--{k}" for k in ("data", "out") if not getattr(a, k)]
    if missing:
        p.error(f"{' and '.join(missing)} required (on the command line or in --config)")
    spike = SpikeConfig(factor=a.spike_factor, history=a.spike_history, min_history=a.spike_min_history,
                        max_skips=a.spike_max_skips, skip_window=a.spike_window,
                        max_rollbacks=a.spike_max_rollbacks, rollback_window=a.spike_rollback_window)
    values = {f.name: getattr(a, f.name, f.default) for f in dataclasses.fields(TrainConfig)
              if f.name not in ("spike", "inject")}
    cfg = TrainConfig(spike=spike, inject=tuple(a.inject_fault), **values)
    problems: List[str] = [f"--{k.replace('_', '-')} must be >= 1" for k in
                           ("seq_len", "micro_batch", "grad_accum", "steps", "checkpoint_every", "log_every")
                           if getattr(cfg, k) < 1]
    problems += [f"--{k.replace('_', '-')} must be one of {', '.join(choices)}, not {getattr(cfg, k)!r}"
                 for k, choices in _CHOICES.items() if getattr(cfg, k) not in choices]
    if problems:
        raise SystemExit("training.train: error: " + "; ".join(problems))
    return cfg
