"""Training curves from metrics.jsonl: loss, gradient norm, learning rate and tokens/s against the step,
with skipped steps and rollbacks marked (the first thing to look at when a loss spikes).

Written as OUT/curves.png during training (at most every `every_s` seconds) and at its end, and by
`refinery report training --run OUT`. Needs matplotlib (the `plots` extra); without it, no PNG.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from common import files

CURVES = "curves.png"


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, or None when matplotlib is not installed (the
    PNGs are optional: the numbers are in the JSON next to them)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def read_log(path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(steps, events, skipped) of a metrics.jsonl; a torn last line (a run killed mid-write) is left out.
    A step logged twice (replayed after a rollback, or by a resumed run) keeps its latest record in
    `steps`; `skipped` has every skipped update, replayed ones included."""
    steps: dict[int, dict[str, Any]] = {}
    events, skipped = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if "event" in record or "eval" in record:
                events.append(record)
            elif "step" in record and "loss" in record:
                steps[record["step"]] = record
                if record.get("skipped"):
                    skipped.append(record)
    return [steps[s] for s in sorted(steps)], events, skipped


def plot(metrics_path: str, png_path: str, title: str = "") -> str | None:
    """Draw the curves of one run; None when there is nothing to draw or matplotlib is missing."""
    steps, events, skipped = read_log(metrics_path)
    if not steps:
        return None
    plt = pyplot()
    if plt is None:
        return None
    x = [s["step"] for s in steps]
    rollbacks = [e["step"] for e in events if e.get("event") == "rolled back"]
    evals = [e for e in events if "eval" in e]
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharex=True)
    panels = [("loss", "training loss (measured, nats/token)", False),
              ("grad_norm", "gradient norm before clipping (measured)", True),
              ("lr", "learning rate (schedule)", False),
              ("tokens_per_s", "throughput (measured, tokens/s, all ranks)", False)]
    for ax, (key, name, log) in zip(axes.flat, panels):
        ax.plot(x, [s.get(key) for s in steps], lw=1.2)
        if skipped and key in ("loss", "grad_norm"):
            ax.scatter([s["step"] for s in skipped], [s.get(key) for s in skipped], color="#d9534f", marker="x",
                       zorder=3, label=f"skipped update ({len(skipped)})")
            ax.legend(loc="upper right", fontsize=8)
        if key == "loss":
            for eval_name in sorted({n for e in evals for n in e["eval"]}):
                points = [(e["step"], e["eval"][eval_name]["loss"]) for e in evals if eval_name in e["eval"]]
                ax.plot(*zip(*points), marker="o", ms=4, lw=1.2, label=f"validation: {eval_name}")
            anneal = [s["step"] for s in steps if s.get("phase") == "anneal"]
            if anneal:
                ax.axvspan(anneal[0] - 0.5, anneal[-1] + 0.5, color="#f0ad4e", alpha=0.15, label="anneal phase")
            if evals or anneal:
                ax.legend(loc="upper right", fontsize=8)
        for r in rollbacks:
            ax.axvline(r, color="#d9534f", ls="--", lw=1)
        if log and all((s.get(key) or 0) > 0 for s in steps):
            ax.set_yscale("log")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("step")
    fig.suptitle((title + " · " if title else "") + f"{len(steps)} steps"
                 + (f", {len(rollbacks)} rollback(s) (dashed)" if rollbacks else ""), fontsize=11)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(png_path)), exist_ok=True)
    with files.atomic_writer(png_path) as fh:  # a reader never sees half a picture
        fig.savefig(fh, dpi=100, format="png")
    plt.close(fig)
    return png_path


class LivePlot:
    """Redraws OUT/curves.png from the log while training runs: at most every `every_s` seconds."""

    def __init__(self, metrics_path: str, every_s: float = 30.0, title: str = ""):
        self.metrics_path, self.every_s, self.title = metrics_path, every_s, title
        self.png = os.path.join(os.path.dirname(metrics_path), CURVES)
        self.last = time.monotonic()

    def maybe(self) -> None:
        if time.monotonic() - self.last >= self.every_s:
            self.draw()

    def draw(self) -> str | None:
        self.last = time.monotonic()
        try:
            return plot(self.metrics_path, self.png, self.title)
        except Exception as exc:  # a picture must never stop training
            print(f"[train] warning: {CURVES} not drawn: {type(exc).__name__}: {exc}", flush=True)
            return None


def summary(metrics_path: str) -> dict[str, Any]:
    steps, events, skipped = read_log(metrics_path)
    if not steps:
        return {"steps": 0}
    losses = [s["loss"] for s in steps]
    norms = sorted(s["grad_norm"] for s in steps if s.get("grad_norm") is not None)
    rates = [s["tokens_per_s"] for s in steps[1:] or steps]
    return {"steps": len(steps), "first_step": steps[0]["step"], "last_step": steps[-1]["step"],
            "first_loss": losses[0], "last_loss": losses[-1], "min_loss": min(losses),
            "grad_norm_median": norms[len(norms) // 2] if norms else None, "grad_norm_max": norms[-1] if norms else None,
            "skipped_steps": [s["step"] for s in skipped],
            "rollbacks": [e["step"] for e in events if e.get("event") == "rolled back"],
            "validation": {name: [[e["step"], e["eval"][name]["loss"]] for e in events if name in e.get("eval", {})]
                           for name in sorted({n for e in events for n in e.get("eval", {})})},
            "tokens_per_s_median": sorted(rates)[len(rates) // 2]}
