"""`refinery report memory|parallel|numerics|training`: readable tables on stdout, JSON (and PNG plots
when matplotlib is installed) in --out."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from common.settings import error_text
from training import memory, numerics, parallel
from training.curves import pyplot
from training.memory import GIB, Shape, duration, size

USAGE = """usage: refinery report KIND [options]   (refinery report KIND --help: its options)

kinds:
  memory     predicted model states per device by ZeRO stage, activations, LoRA/QLoRA;
             --run OUT sets a training run's measured bytes next to the prediction
  parallel   data / tensor / pipeline parallel traffic, pipeline bubble, and a GPU layout plan
             (shown only where its throughput model holds: >= 1e8 parameters, GPUs)
  numerics   number formats, gradient underflow, swamping, MinHash error, LSH S-curve
  training   a training run's curves (--run OUT): loss, gradient norm, learning rate, tokens/s,
             skipped steps and rollbacks -> curves.png"""
PLAN_MIN_PARAMS = 1e8  # below this a step is latency/bandwidth-bound: the planner's FLOP model does not hold


def _devices(run: dict[str, Any], n: int) -> str:
    """What the ranks ran on, for titles: "2 CPU ranks" for a CPU run, "8 GPUs" otherwise."""
    return f"{n} CPU rank{'s' if n != 1 else ''}" if run.get("device") == "cpu" else f"{n} GPU{'s' if n != 1 else ''}"


def _unit(most_bytes: float) -> tuple[str, float]:
    """The binary unit that keeps `most_bytes` between 1 and 1024 (for axes)."""
    for name, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if most_bytes >= scale:
            return name, scale
    return "B", 1


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[f"{v:,.2f}" if isinstance(v, float) else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in cells]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


class ReportError(Exception):
    """The report cannot be made from what was given (a missing run, too few numbers): one line, exit 2."""


def _run_summary(run: str | None) -> dict[str, Any]:
    if not run:
        return {}
    try:
        with open(os.path.join(run, "summary.json"), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise ReportError(f"--run {run}: cannot read summary.json ({error_text(exc)}); "
                          "is it the --out of a finished `refinery train`?") from exc


def _parser(kind: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=f"refinery report {kind}", description=description,
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def _shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", type=float, help="parameter count, e.g. 7e9")
    p.add_argument("--layers", type=int, help="transformer blocks")
    p.add_argument("--hidden", type=int, help="model width (d_model)")
    p.add_argument("--heads", type=int, help="attention heads")
    p.add_argument("--seq", type=int, help="sequence length in tokens")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per device per forward pass")
    p.add_argument("--vocab", type=int, help="vocabulary size (default 50257 with --layers/--hidden)")
    p.add_argument("--model-size", help="a model size of this project (training/model.py MODEL_SIZES), "
                   "with --seq and --vocab (default 258, the byte tokenizer)")
    p.add_argument("--run", help="a training run's --out: use its model and report measured next to predicted")
    p.add_argument("--out", help="folder for report JSON and PNG plots (default: none, tables only)")


def _shape(a: argparse.Namespace) -> Shape:
    if a.run and a.params is None and a.model_size is None and a.layers is None:
        from training.model import ModelConfig

        summary = _run_summary(a.run)
        return Shape.from_config(ModelConfig(**summary["model_config"]), summary["micro_batch"])
    if a.model_size:
        from training.model import MODEL_SIZES, ModelConfig

        if a.model_size not in MODEL_SIZES:
            raise ReportError(f"unknown --model-size (one of {', '.join(MODEL_SIZES)})")
        cfg = ModelConfig(vocab_size=a.vocab or 258, seq_len=a.seq or 256, **MODEL_SIZES[a.model_size])
        return Shape.from_config(cfg, a.micro_batch)
    if a.params is None:
        if None in (a.layers, a.hidden):
            raise ReportError("give --params (and optionally the shape) or --run")
        vocab = a.vocab or 50257
        a.params = 12 * a.layers * a.hidden ** 2 + vocab * a.hidden
    return Shape(a.params, a.layers, a.hidden, a.heads, a.seq, a.micro_batch, a.vocab)


def _write(out: str | None, name: str, data: dict[str, Any]) -> None:
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, name), "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)


def _plot(out: str | None, name: str, draw) -> str | None:
    if not out:
        return None
    plt = pyplot()
    if plt is None:
        print(f"(no PNG: matplotlib is not installed; pip install matplotlib for {name})")
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    draw(ax)
    fig.tight_layout()
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def memory_parser() -> argparse.ArgumentParser:
    p = _parser("memory", "Model states per device by ZeRO stage, activations, LoRA/QLoRA (predicted; "
                          "with --run, next to what the run measured).")
    _shape_args(p)
    p.add_argument("--gpus", type=int, help="devices (default 8, or the --run's number of ranks)")
    p.add_argument("--recipe", choices=sorted(memory.STATE_BYTES), help="default mixed-adamw, or the --run's")
    p.add_argument("--no-flash", action="store_true", help="attention scores stored (no FlashAttention)")
    p.add_argument("--tensor-parallel", type=int, default=1, help="tensor-parallel degree (divides activations)")
    p.add_argument("--lora-rank", type=int, default=16, help="LoRA rank for the LoRA/QLoRA estimate")
    return p


def memory_report(argv: Sequence[str]) -> dict[str, Any]:
    a = memory_parser().parse_args(argv)
    run = _run_summary(a.run)
    a.gpus = a.gpus or run.get("world_size", 8)
    a.recipe = a.recipe or run.get("measured_vs_predicted", {}).get("recipe", "mixed-adamw")
    shape = _shape(a)
    result: dict[str, Any] = {"params": shape.params, "gpus": a.gpus, "recipe": a.recipe,
                              "bytes_per_param": dict(zip(("weights", "gradients", "optimizer"),
                                                          memory.STATE_BYTES[a.recipe]))}
    stages = {f"zero{z}": {k: v / GIB for k, v in memory.model_states(shape.params, a.gpus, z, a.recipe).items()}
              for z in range(4)}
    result["model_states_gib"] = stages
    print(f"model states for {shape.params:.3g} parameters on {_devices(run, a.gpus)}, {a.recipe} "
          f"({sum(memory.STATE_BYTES[a.recipe])} B/parameter unsharded), per rank (predicted):")
    print(table(["stage", "weights", "gradients", "optimizer", "total"],
                [[f"ZeRO-{z}" + (" (DDP)" if z == 0 else " (FSDP)" if z == 3 else ""),
                  *(size(v * GIB) for v in stages[f"zero{z}"].values())] for z in range(4)]))
    if shape.layers and shape.hidden and shape.heads and shape.seq:
        flash = not a.no_flash
        acts = {"plain": memory.activations(shape, flash, False, a.tensor_parallel) / GIB,
                "checkpointed": memory.activations(shape, flash, True, a.tensor_parallel) / GIB}
        result["activations_gib"] = acts
        result["recompute_overhead"] = memory.recompute_overhead(True)
        print(f"\nactivations (Korthikanti et al. 2022, s·b·h·(34{'' if flash else ' + 5as/h'}) B per layer"
              f"{', FlashAttention' if flash else ''}, TP={a.tensor_parallel}): {size(acts['plain'] * GIB)}; with per-layer "
              f"checkpointing {size(acts['checkpointed'] * GIB)} for +{memory.recompute_overhead(True):.0%} compute")
        trainable = memory.lora_parameters(shape.layers, shape.hidden, a.lora_rank)
        result["lora_gib"] = {k: v / GIB for k, v in memory.lora(shape.params, trainable).items()}
        result["qlora_gib"] = {k: v / GIB for k, v in memory.lora(shape.params, trainable, quantized=True).items()}
        print(f"LoRA r={a.lora_rank} on q,k,v,o ({trainable:,} trainable): {size(result['lora_gib']['total'] * GIB)}; "
              f"QLoRA (NF4 base): {size(result['qlora_gib']['total'] * GIB)} (one GPU, before activations)")
    if a.run:
        result["measured"] = measured_vs_predicted(a.run)
    _write(a.out, "memory.json", result)
    _plot(a.out, "memory_by_zero_stage.png",
          lambda ax: _bars(ax, stages, _devices(run, a.gpus), a.recipe, result.get("measured")))
    return result


def _bars(ax, stages: dict[str, dict[str, float]], devices: str, recipe: str,
          measured: dict[str, Any] | None = None) -> None:
    names = list(stages)
    unit, scale = _unit(max(sum(s.values()) for s in stages.values()) * GIB)
    bottom = [0.0] * len(names)
    for part in ("weights", "gradients", "optimizer"):
        values = [stages[n][part] * GIB / scale for n in names]
        ax.bar(names, values, bottom=bottom, label=f"{part} (predicted)")
        bottom = [b + v for b, v in zip(bottom, values)]
    if measured:  # the run's own stage: what rank 0 held after its first update
        held = sum(measured["ranks"][0]["measured"].values()) / scale
        ax.scatter([f"zero{measured['zero']}"], [held], color="black", zorder=3, label="measured (rank 0)")
    ax.set_ylabel(f"{unit} per rank")
    ax.set_title(f"model states per rank on {devices}, {recipe}: predicted by ZeRO stage", fontsize=10)
    ax.legend(fontsize=8)


def measured_vs_predicted(run: str) -> dict[str, Any]:
    """The run's measured bytes next to the calculator (printed and returned)."""
    summary = _run_summary(run)
    check = summary.get("measured_vs_predicted")
    if not check:
        raise ReportError(f"{run}/summary.json has no measurements (a run of an older version?)")
    rows = []
    for rank, r in enumerate(check["ranks"]):
        for part in ("weights", "gradients", "optimizer"):
            m, p = r["measured"][part], check["predicted"][part]
            rows.append([rank, part, f"{m:,}", f"{p:,.0f}", f"{(m - p) / p:+.3%}"])
    print(f"\nrun {run}: {summary['world_size']} rank(s) {summary['strategy']}, {summary['parameters']:,} parameters, "
          f"recipe {check['recipe']} (ZeRO-{check['zero']}); bytes per rank:")
    print(table(["rank", "state", "measured", "predicted", "difference"], rows))
    comm = check.get("communication")
    if comm:
        print(table(["collective", "measured payload B/step", "predicted", "ring traffic per rank B/step"],
                    [[k, f"{v['measured']:,}", f"{v['predicted']:,.0f}", f"{v['traffic']:,.0f}"]
                     for k, v in comm.items()]))
    return check


def parallel_parser() -> argparse.ArgumentParser:
    p = _parser("parallel", "Data / tensor / pipeline parallel traffic, the pipeline bubble, and a GPU layout plan "
                            "(predicted).")
    _shape_args(p)
    p.add_argument("--gpus-per-node", type=int, help="default 8, or the --run's number of ranks")
    p.add_argument("--nodes", type=int, default=1, help="machines")
    p.add_argument("--gpu-gib", type=float, default=80.0, help="memory per GPU, GiB")
    p.add_argument("--intra-gbps", type=float, default=600.0, help="GB/s per GPU inside a node (NVLink)")
    p.add_argument("--inter-gbps", type=float, default=25.0, help="GB/s per GPU across nodes (InfiniBand)")
    p.add_argument("--pp-micro-batches", type=int, default=16, help="micro-batches per step with pipeline parallelism")
    p.add_argument("--recipe", choices=sorted(memory.STATE_BYTES), help="default mixed-adamw, or the --run's")
    return p


def parallel_report(argv: Sequence[str]) -> dict[str, Any]:
    a = parallel_parser().parse_args(argv)
    run = _run_summary(a.run)
    a.gpus_per_node = a.gpus_per_node or run.get("world_size", 8)
    recipe = a.recipe or run.get("measured_vs_predicted", {}).get("recipe", "mixed-adamw")
    grad_bytes = memory.STATE_BYTES[recipe][1]
    shape = _shape(a)
    gpus = a.gpus_per_node * a.nodes
    devices = _devices(run, gpus)
    dp = {f"zero{z}": parallel.data_parallel_bytes(shape.params, gpus, z, grad_bytes) / GIB for z in range(4)}
    print(f"data parallel on {devices}, {8 * grad_bytes}-bit gradients ({recipe}) of {shape.params:.3g} parameters, "
          f"traffic per rank per step (predicted):")
    print(table(["stage", "bytes", f"time at {a.intra_gbps:g} GB/s", f"time at {a.inter_gbps:g} GB/s"],
                [[k, size(v * GIB), duration(parallel.transfer_seconds(v * GIB, a.intra_gbps)),
                  duration(parallel.transfer_seconds(v * GIB, a.inter_gbps))] for k, v in dp.items()]))
    result: dict[str, Any] = {"data_parallel_gib": dp}
    bubbles = {m: parallel.bubble_fraction(a.nodes if a.nodes > 1 else 8, m) for m in (1, 2, 4, 8, 16, 32, 64)}
    stages = a.nodes if a.nodes > 1 else 8
    result["bubble_fraction"] = {"stages": stages, "by_micro_batches": bubbles}
    print(f"\npipeline bubble with p={stages} stages: share of *total* step time (p-1)/(m+p-1) — not the "
          f"(p-1)/m overhead relative to the ideal time that some papers quote:")
    print(table(["micro-batches m", "bubble"], [[m, f"{b:.1%}"] for m, b in bubbles.items()]))
    if shape.layers and shape.hidden and shape.seq:
        tp = parallel.tensor_parallel_bytes(shape)
        result["tensor_parallel"] = tp
        print(f"\ntensor parallel: {tp['all_reduces']} all-reduces per step of {size(tp['per_all_reduce'])} = "
              f"{size(tp['total'])}: {duration(parallel.transfer_seconds(tp['total'], a.intra_gbps))} at "
              f"{a.intra_gbps:g} GB/s, {duration(parallel.transfer_seconds(tp['total'], a.inter_gbps))} at "
              f"{a.inter_gbps:g} GB/s")
    why_not = _no_plan_because(shape, run)
    if why_not:
        result["plan"] = {"shown": False, "why": why_not}
        print(f"\nlayout plan: not shown: {why_not}")
    elif shape.layers and shape.hidden and shape.heads and shape.seq:
        layout = parallel.plan_layout(shape, a.gpus_per_node, a.nodes, a.gpu_gib, a.intra_gbps, a.inter_gbps,
                                      recipe=recipe, pp_micro_batches=a.pp_micro_batches)
        result["plan"] = vars(layout)
        print(f"\nrecommended layout: TP={layout.tp} x PP={layout.pp} x DP={layout.dp} (ZeRO-{layout.zero}), "
              f"{size(layout.gib_per_gpu * GIB)} per GPU")
        for reason in layout.reasons:
            print(f"  - {reason}")
    if a.run:
        result["measured"] = measured_vs_predicted(a.run)
    _write(a.out, "parallel.json", result)

    def draw(ax):
        ax.plot(list(bubbles), [100 * b for b in bubbles.values()], marker="o")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("micro-batches m")
        ax.set_ylabel("bubble, % of step time")
        ax.set_title(f"pipeline bubble with p={stages} stages: (p-1)/(m+p-1), predicted", fontsize=10)

    _plot(a.out, "bubble.png", draw)
    return result


def _no_plan_because(shape: Shape, run: dict[str, Any]) -> str | None:
    """Why a GPU layout plan would not be plausible here (None: it is)."""
    if run.get("device") == "cpu":
        return ("the run trained on CPU ranks; the planner models GPU clusters (plan one with --params or "
                "--model-size and no --run)")
    if shape.params < PLAN_MIN_PARAMS:
        return (f"at {shape.params:.3g} parameters a step is bound by kernel latency and memory bandwidth, not the "
                f"FLOPs the planner's throughput model counts (it holds from {PLAN_MIN_PARAMS:.0e} parameters); "
                "plain data parallel (DDP) is the layout")
    return None


def training_parser() -> argparse.ArgumentParser:
    p = _parser("training", "Curves of a training run: loss, gradient norm, learning rate, tokens/s, skipped "
                            "steps and rollbacks.")
    p.add_argument("--run", required=True, help="a `refinery train` --out folder (reads its metrics.jsonl)")
    p.add_argument("--out", help="folder for curves.png and training.json (default: the run folder)")
    return p


def training_report(argv: Sequence[str]) -> dict[str, Any]:
    a = training_parser().parse_args(argv)
    from training import curves

    log = os.path.join(a.run, "metrics.jsonl")
    if not os.path.exists(log):
        raise ReportError(f"--run {a.run}: no metrics.jsonl; is it the --out of `refinery train`?")
    result = curves.summary(log)
    out = a.out or a.run
    print(table(["steps", "first loss", "last loss", "min loss", "grad norm median", "grad norm max",
                 "skipped", "rollbacks", "tokens/s median"],
                [[result["steps"], result.get("first_loss"), result.get("last_loss"), result.get("min_loss"),
                  result.get("grad_norm_median"), result.get("grad_norm_max"), len(result.get("skipped_steps", [])),
                  len(result.get("rollbacks", [])), result.get("tokens_per_s_median")]]))
    _write(out, "training.json", result)
    png = curves.plot(log, os.path.join(out, curves.CURVES), title=os.path.basename(os.path.normpath(a.run)))
    print(f"curves: {png}" if png else "(no curves.png: no steps logged, or matplotlib is not installed)")
    return result


def numerics_parser() -> argparse.ArgumentParser:
    p = _parser("numerics", "Number formats, gradient underflow, swamping, MinHash error, the LSH S-curve.")
    p.add_argument("--out", help="folder for numerics.json and lsh_s_curve.png (default: none, tables only)")
    p.add_argument("--bands", type=int, default=14, help="LSH bands for the S-curve")
    p.add_argument("--rows", type=int, default=8, help="LSH rows per band")
    p.add_argument("--trials", type=int, default=200, help="random trials of the MinHash error estimate")
    return p


def numerics_report(argv: Sequence[str]) -> dict[str, Any]:
    a = numerics_parser().parse_args(argv)
    formats = numerics.format_table()
    print(table(["format", "bits", "max", "smallest normal", "smallest subnormal", "epsilon"],
                [[f["format"], f["bits"], f"{f['max']:.4g}", f"{f['smallest_normal']:.4g}",
                  f"{f['smallest_subnormal']:.4g}", f"{f['epsilon']:.4g}"] for f in formats]))
    under = numerics.gradient_underflow()
    print(f"\ngradients {under['distribution']}: share that becomes 0")
    print(table(["loss scale", "fp16", "bf16"],
                [[s, f"{under[f'fp16_zero_share_scale_{s}']:.4%}", f"{under[f'bf16_zero_share_scale_{s}']:.4%}"]
                 for s in ("1", "1024", "65536")]))
    swamp = numerics.swamping()
    print("\nswamping: " + ", ".join(f"{k} = {v!r}" for k, v in swamp.items()))
    mh = numerics.minhash_error(trials=a.trials)
    print("\nMinHash estimator: measured std of the J estimate vs sqrt(J(1-J)/k)")
    print(table(["J", "k", "measured std", "predicted", "mean estimate"],
                [[f"{r['jaccard']:.2f}", r["k"], f"{r['measured_std']:.4f}", f"{r['predicted_std']:.4f}",
                  f"{r['mean_estimate']:.3f}"] for r in mh]))
    curve = numerics.lsh_s_curve(a.bands, a.rows)
    print(f"\nLSH S-curve, {a.bands} bands x {a.rows} rows: "
          + ", ".join(f"J={c['jaccard']:.2f}: {c['p_candidate']:.3f}" for c in curve[::4]))
    result = {"formats": formats, "gradient_underflow": under, "swamping": swamp, "minhash": mh, "lsh_s_curve": curve}
    _write(a.out, "numerics.json", result)

    def draw(ax):
        ax.plot([c["jaccard"] for c in curve], [c["p_candidate"] for c in curve])
        ax.set_xlabel("Jaccard similarity")
        ax.set_ylabel("P(candidate pair)")
        ax.set_title(f"LSH S-curve, b={a.bands}, r={a.rows}")

    _plot(a.out, "lsh_s_curve.png", draw)
    return result


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    kinds = {"memory": memory_report, "parallel": parallel_report, "numerics": numerics_report,
             "training": training_report}
    if argv[0] not in kinds:
        print(f"refinery report: error: unknown kind {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        kinds[argv[0]](argv[1:])
    except ReportError as exc:
        print(f"refinery report {argv[0]}: error: {exc}", file=sys.stderr)
        return 2
    return 0
