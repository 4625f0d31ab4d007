"""What a training run reports: the per-step log (metrics.jsonl and progress lines) and the run's
summary (throughput, FLOPs, MFU against the device's peak, memory, measured vs predicted costs)."""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import torch

from common import files
from training.curves import LivePlot
from training.distributed import Dist, gather_to_main
from training.measure import predicted

if TYPE_CHECKING:
    from training.config import TrainConfig
    from training.train import Trainer


class Metrics:
    """Rank 0's log: one JSON line per step (and per event), a progress line on stdout, and the
    curves (curves.png next to the log) redrawn while it runs and at the end."""

    def __init__(self, path: str, total_steps: int, enabled: bool, tensorboard: bool = False) -> None:
        self.total, self.enabled, self.path = total_steps, enabled, path
        self.fh = files.open_for_writing(path, "a") if enabled else None
        self.curves = LivePlot(path) if enabled else None
        self.board = _board(os.path.join(os.path.dirname(path), "tensorboard")) if enabled and tensorboard else None

    def write(self, record: dict[str, Any], show: bool = False) -> None:
        if not self.enabled:
            return
        self.fh.write(json.dumps(record) + "\n")
        self.fh.flush()
        if self.board is not None:
            _to_board(self.board, record)
        if "eval" in record:
            print(f"[train] validation loss at step {record['step']}: " + ", ".join(
                f"{name} {r['loss']:.4f}" for name, r in record["eval"].items()), flush=True)
        elif "event" in record:
            print(f"[train] {record['event']}: " + ", ".join(f"{k}={v}" for k, v in record.items() if k != "event"),
                  flush=True)
        elif show:
            done = record["step"] / self.total
            bar = "#" * int(20 * done) + "-" * (20 - int(20 * done))
            print(f"[train] [{bar}] step {record['step']}/{self.total} loss {record['loss']:.4f} "
                  f"gnorm {record['grad_norm']:.3f} lr {record['lr']:.2e} tok/s {record['tokens_per_s']:,.0f}"
                  + (" SKIPPED" if record["skipped"] else ""), flush=True)
            self.curves.maybe()

    def forget_after(self, step: int) -> float | None:
        """On resume from `step`: the log keeps what happened up to it (the steps after it are trained again,
        and would otherwise appear twice); returns the run's first logged loss (None if none is left)."""
        if not self.enabled:
            return None
        self.fh.close()
        path = self.path
        with open(path, encoding="utf-8") as fh:
            kept = [record for record in map(json.loads, filter(str.strip, fh)) if record.get("step", 0) <= step]
        files.write_atomically(path, "".join(json.dumps(record) + "\n" for record in kept))
        self.fh = files.open_for_writing(path, "a")
        return next((r["loss"] for r in kept if "loss" in r and not r.get("skipped")), None)

    def close(self) -> None:
        if self.fh:
            self.fh.close()
            self.curves.draw()
        if self.board is not None:
            self.board.close()


RECENT_STEPS = 10  # the summary's `recent_loss`: the mean loss of this many last applied steps


def _board(folder: str):
    """A TensorBoard SummaryWriter when the `tensorboard` package is installed, else None."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # torch's writer needs the tensorboard package
        return None
    return SummaryWriter(folder)


def _to_board(board, record: dict[str, Any]) -> None:
    step = record.get("step", 0)
    if "eval" in record:
        for name, result in record["eval"].items():
            board.add_scalar(f"eval/{name}", result["loss"], step)
        return
    if "event" in record:
        board.add_text("events", f"{record['event']}: {json.dumps(record)}", step)
        if record["event"] == "rolled back":
            board.add_scalar("train/rollback", 1, step)
        return
    for key in ("loss", "grad_norm", "lr", "tokens_per_s"):
        value = record.get(key)
        if isinstance(value, (int, float)) and value == value and abs(value) != float("inf"):
            board.add_scalar(f"train/{key}", value, step)
    board.add_scalar("train/skipped", int(bool(record.get("skipped"))), step)


# Dense bf16 peak of common accelerators (vendor datasheets), for MFU; --peak-tflops overrides.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}


def peak_tflops(cfg: TrainConfig, env: Dist) -> float | None:
    if cfg.peak_tflops:
        return cfg.peak_tflops
    if env.device.type == "cuda":
        name = torch.cuda.get_device_name(env.device)
        return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    return None


def summarize(trainer: Trainer, history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Throughput (first step left out: allocation and warm-up), FLOPs, MFU and peak memory per rank."""
    import resource

    env = trainer.env
    memory = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if env.device.type == "cuda":
        memory["cuda_max_allocated_mib"] = torch.cuda.max_memory_allocated(env.device) / 2**20
    per_rank = gather_to_main(memory, env)
    measured = gather_to_main(trainer.measured, env)
    if not env.main or not history:
        return None
    timed = history[1:] or history
    rate = sum(h["tokens"] for h in timed) / max(sum(h["seconds"] for h in timed), 1e-9)
    flops = rate * trainer.flops_per_token
    peak = peak_tflops(trainer.cfg, env)
    # one batch's loss is noisy (a page of another script: 7 where the run is at 2.6): the mean of the last
    # applied steps says where the run ended
    recent = [h["loss"] for h in history if not h["skipped"]][-RECENT_STEPS:] or [history[-1]["loss"]]
    return {"step": trainer.step, "parameters": trainer.n_params, "world_size": env.world_size,
            "strategy": trainer.cfg.strategy, "precision": trainer.cfg.precision, "device": str(env.device.type),
            "first_loss": trainer.first_loss if trainer.first_loss is not None else history[0]["loss"],
            "last_loss": history[-1]["loss"],
            "recent_loss": sum(recent) / len(recent), "recent_steps": len(recent),
            "skipped_steps": sum(1 for h in history if h["skipped"]), "tokens_per_s": rate,
            "flops_per_token": trainer.flops_per_token,
            "flops_formula": "6*N + 12*n_layer*n_embd*seq_len (PaLM appendix B; N without position embeddings)",
            "achieved_tflops": flops / 1e12, "peak_tflops_per_device": peak,
            "mfu": flops / (peak * 1e12 * env.world_size) if peak else None, "memory_per_rank": per_rank,
            "model_config": dict(vars(trainer.model_cfg)), "micro_batch": trainer.cfg.micro_batch,
            "eval": {name: dict(result, step=trainer.evals[-1]["step"])
                     for name, result in (trainer.evals[-1]["eval"].items() if trainer.evals else [])},
            "eval_history": trainer.evals,
            "phases": {phase: sum(1 for h in history if h.get("phase") == phase) for phase in ("main", "anneal")},
            "measured_vs_predicted": compare(trainer, measured)}


def compare(trainer: Trainer, measured: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    if not measured or any(m is None for m in measured):
        return None
    check = predicted(trainer.n_params, trainer.block_params, trainer.env.world_size, trainer.cfg.strategy,
                      trainer.cfg.grad_accum)
    check["ranks"] = [{"measured": m["state"], "comm": m["comm"]} for m in measured]
    for kind, row in check["communication"].items():
        row["measured"] = measured[0]["comm"]["bytes"].get(kind, 0)
        row["calls"] = measured[0]["comm"]["calls"].get(kind, 0)
    check["max_state_difference"] = max(abs(r["measured"][k] - check["predicted"][k]) / check["predicted"][k]
                                        for r in check["ranks"] for k in check["predicted"])
    return check


