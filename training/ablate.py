"""`refinery ablate`: compare mixtures and filter settings by the validation loss of small proxy models.

    refinery ablate --pool OUT --out ABL --variant natural= --variant web-heavy='--mix web=0.8,wayback=0.2' \
        --variant hq='--min-quality 0.5' --tokens 200000 --seeds 3

Each variant is built from the kept documents of an existing run (`--pool`, no re-extraction): filters on
the stored columns (quality, toxicity, language and its score), then the pipeline's own mixing
(`stages.mix.mix_rates` / `copies`: token shares per source, deterministic draws per (seed, id), repeats
up to `--mix-max-epochs`). The same proxy model is trained on each variant for the same number of tokens
(`--tokens`, rounded up to whole steps) with each of `--seeds` seeds, and evaluated at the end on the
same text: the pool's valid/ split (held out by the run, so no variant trains on it) and any
`--eval-data`. The table (mean, spread over seeds, passes over the variant's data) is printed and
written as ablation.md / ablation.json, with a plot (ablation.png). On a GPU it is the same command with
a bigger proxy (`--base-config` or `--set size=base`).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.settings import error_text
from common.shards import MANIFEST
from common.shards import manifest as shards_manifest
from stages.mix import approx_tokens, copies, mix_rates, parse_weights, repeat_id, unit_hash
from training.curves import pyplot
from training.data import DataError, read_manifest

VALID = "valid"
PROXY = {"size": "tiny", "seq_len": 128, "micro_batch": 8, "warmup": 10, "lr": 1e-3}  # minutes on 2 CPU cores


def variant_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="--variant NAME=", add_help=False, exit_on_error=False)
    p.add_argument("--mix", help="token shares per source, e.g. web=0.7,books=0.3 (the pipeline's --mix)")
    p.add_argument("--min-quality", type=float, help="keep documents with quality_score >= X")
    p.add_argument("--max-toxicity", type=float, help="keep documents with toxicity_score <= X")
    p.add_argument("--languages", help="keep these languages (comma-separated lid.176 codes)")
    p.add_argument("--min-lang-score", type=float, help="keep documents whose language score is >= X")
    p.add_argument("--mix-max-epochs", type=int, default=4, help="at most this many copies of a document")
    p.add_argument("--anneal-fraction", type=float, help="train the last X of the steps on the pool's anneal/ "
                   "split (its high-quality documents), as `refinery train --anneal-data` does")
    return p


def parse_variant(spec: str) -> tuple[str, argparse.Namespace]:
    name, sep, options = spec.partition("=")
    if not sep or not name.strip():
        raise DataError(f"--variant {spec!r}: expected NAME=OPTIONS (OPTIONS may be empty: the pool as it is)")
    try:
        args, unknown = variant_parser().parse_known_args(shlex.split(options))
        if unknown:
            raise DataError(f"--variant {name}: unknown option(s) {' '.join(unknown)} "
                            "(known: --mix, --mix-max-epochs, --min-quality, --max-toxicity, --languages, "
                            "--min-lang-score, --anneal-fraction)")
        if args.mix:
            parse_weights(args.mix)
    except (argparse.ArgumentError, ValueError) as exc:
        raise DataError(f"--variant {name}: {exc}") from None
    return name.strip(), args


def read_pool(pool: str) -> pa.Table:
    manifest = read_manifest(pool, "--pool")
    tables = [pq.read_table(os.path.join(pool, s["path"])) for s in manifest["shards"]]
    table = pa.concat_tables(tables) if tables else None
    if table is None or table.num_rows == 0:
        raise DataError(f"--pool {pool}: no documents")
    return table.filter(pc.equal(table["epoch"], 0))  # originals: the variant's mix makes its own repeats


def select(table: pa.Table, args: argparse.Namespace) -> pa.Table:
    """The filters of a variant, on the pool's stored columns."""
    keep = pa.array([True] * table.num_rows)
    if args.min_quality is not None:
        keep = pc.and_(keep, pc.fill_null(pc.greater_equal(table["quality_score"], args.min_quality), False))
    if args.max_toxicity is not None:
        keep = pc.and_(keep, pc.fill_null(pc.less_equal(table["toxicity_score"], args.max_toxicity), True))
    if args.languages:
        keep = pc.and_(keep, pc.is_in(table["lang"], pa.array(args.languages.split(","))))
    if args.min_lang_score is not None:
        keep = pc.and_(keep, pc.fill_null(pc.greater_equal(table["lang_score"], args.min_lang_score), False))
    return table.filter(keep)


def mix(table: pa.Table, spec: str | None, seed: int, max_epochs: int) -> tuple[pa.Table, dict[str, float]]:
    """The pipeline's mixing over a table of documents: (mixed rows in a seeded order, rates per source)."""
    rows = table.to_pylist()
    rates: dict[str, float] = {}
    if spec:
        tokens: dict[str, int] = {}
        for row in rows:
            tokens[row["source"]] = tokens.get(row["source"], 0) + approx_tokens(row["text"])
        weights = parse_weights(spec)
        missing = sorted(set(weights) - set(tokens))
        if missing:
            raise DataError(f"--mix {spec}: the pool has no documents of source {', '.join(missing)} "
                            f"(it has {', '.join(sorted(tokens))})")
        rates = mix_rates(weights, tokens)
        mixed = []
        for row in rows:
            for epoch in range(copies(row["id"], rates.get(row["source"], 1.0), seed, max_epochs)):
                mixed.append(row if epoch == 0 else dict(row, id=repeat_id(row["id"], epoch), epoch=epoch))
        rows = mixed
    rows.sort(key=lambda r: unit_hash(seed, "ablate-order", r["id"]))
    return pa.Table.from_pylist(rows, schema=table.schema), rates


def write_variant(folder: str, table: pa.Table, extra: dict[str, Any], row_group_rows: int = 16) -> dict[str, Any]:
    """One shard + manifest.json (the layout `refinery train --data` reads, common/shards.py; the job writes
    its own through Beam's filesystems, which training does not import)."""
    os.makedirs(os.path.join(folder, "data"), exist_ok=True)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", row_group_size=row_group_rows)
    data = buffer.getvalue()
    path = "data/part-00000-of-00001.parquet"
    with open(os.path.join(folder, path), "wb") as fh:
        fh.write(data)
    tokens: collections.Counter = collections.Counter()
    for source, text in zip(table["source"].to_pylist(), table["text"].to_pylist()):
        tokens[source] += approx_tokens(text)
    counts = _counts(table["source"])
    shard = {"path": path, "rows": table.num_rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
             "row_groups": pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups, "tokens_by_source": dict(tokens),
             "rows_by_source": counts, "originals": int(pc.sum(pc.equal(table["epoch"], 0)).as_py() or 0),
             "tokens": sum(tokens.values())}
    manifest = shards_manifest([shard], (table.schema.metadata or {}).get(b"refinery.schema", b"").decode(), extra)
    temp = os.path.join(folder, "." + MANIFEST + ".tmp")
    with open(temp, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1)
    os.replace(temp, os.path.join(folder, MANIFEST))
    return manifest


def train_proxy(data: str, out: str, seed: int, steps: int, eval_data: list[str], base: list[str],
                extra: Sequence[str] = ()) -> dict[str, Any]:
    """One proxy run in this process (one rank; CUDA when there is a GPU); its summary.json."""
    from training.train import main as train

    argv = ["--data", data, "--out", out, "--overwrite", "--seed", str(seed), "--steps", str(steps),
            "--eval-every", str(steps), "--log-every", str(steps), "--checkpoint-every", str(steps),
            "--keep-checkpoints", "1", "--no-tensorboard", *base, *extra]
    if eval_data:
        argv += ["--eval-data", *eval_data]  # one flag, several values (a repeated flag keeps its last)
    code = train(argv)
    if code == 130:
        raise KeyboardInterrupt  # Ctrl-C: train said so in one line
    if code != 0:
        raise DataError(f"proxy training failed: refinery train {' '.join(argv)}")
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
        return json.load(fh)


def _spread(values: list[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def table_lines(results: list[dict[str, Any]], sets: list[str]) -> list[str]:
    head = ["variant", "documents", "data tokens", "passes"] + [f"{s} loss (mean ± sd)" for s in sets] + ["per seed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r["variant"], f"{r['documents']:,}", f"{r['data_tokens']:,}", f"{r['passes']:.2f}"]
        for s in sets:
            e = r["eval"][s]
            cells.append(f"{e['mean']:.4f}" + (f" ± {e['sd']:.4f}" if e["sd"] is not None else ""))
        cells.append("; ".join(", ".join(f"{v:.4f}" for v in r["eval"][s]["per_seed"]) for s in sets))
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""] + [verdict(results, s) for s in sets]


def verdict(results: list[dict[str, Any]], name: str) -> str:
    """Which variant is best on `name`, only when no other variant's range (mean ± sd) overlaps it."""
    ranked = sorted(results, key=lambda r: r["eval"][name]["mean"])
    best, rest = ranked[0], ranked[1:]
    if not rest:
        return f"{name}: one variant only"
    if best["eval"][name]["sd"] is None:
        return f"{name}: lowest mean {best['variant']} (one seed: no spread to judge the difference by)"
    top = best["eval"][name]["mean"] + best["eval"][name]["sd"]
    if all(r["eval"][name]["mean"] - (r["eval"][name]["sd"] or 0) > top for r in rest):
        return f"{name}: {best['variant']} is lowest beyond the spread across seeds (mean ± sd ranges do not overlap)"
    return (f"{name}: lowest mean {best['variant']}, but within the spread across seeds of "
            + ", ".join(r["variant"] for r in rest if r["eval"][name]["mean"] - (r["eval"][name]["sd"] or 0) <= top)
            + ": not distinguishable at this token budget")


def plot(results: list[dict[str, Any]], sets: list[str], path: str, title: str) -> str | None:
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(results) * len(sets), 4))
    width = 0.8 / len(sets)
    for j, s in enumerate(sets):
        xs = [i + j * width for i in range(len(results))]
        means = [r["eval"][s]["mean"] for r in results]
        ax.bar(xs, means, width, yerr=[r["eval"][s]["sd"] or 0 for r in results], capsize=4, label=s, alpha=0.8)
        for x, r in zip(xs, results):
            ax.scatter([x] * len(r["eval"][s]["per_seed"]), r["eval"][s]["per_seed"], color="k", s=10, zorder=3)
    lows = [v for r in results for s in sets for v in r["eval"][s]["per_seed"]]
    highs = [r["eval"][s]["mean"] + (r["eval"][s]["sd"] or 0) for r in results for s in sets]
    pad = max(0.02, 0.25 * (max(highs) - min(lows)))
    ax.set_ylim(min(lows) - pad, max(highs) + pad)
    ax.set_xticks([i + width * (len(sets) - 1) / 2 for i in range(len(results))], [r["variant"] for r in results])
    ax.set_ylabel("validation loss (nats/token, measured)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refinery ablate", description=(
        "Compare mixtures or filter settings of an existing run's kept documents by the validation loss of the "
        "same small proxy model trained on each for the same number of tokens."),
        epilog="Variant options: " + "; ".join(f"{a.option_strings[0]}: {a.help}" for a in variant_parser()._actions))
    p.add_argument("--pool", required=True, help="output folder of `refinery run` whose kept documents are mixed "
                   "and filtered (its valid/ split is the common evaluation set)")
    p.add_argument("--out", required=True, help="folder for the variants' data, proxy runs and the table")
    p.add_argument("--variant", action="append", required=True, metavar="NAME=OPTIONS",
                   help="a variant: NAME=, NAME='--mix web=0.7,books=0.3', NAME='--min-quality 0.5' (repeat)")
    p.add_argument("--tokens", type=int, default=200_000, help="training tokens per proxy run, the same for every "
                   "variant (rounded up to whole steps) (default: %(default)s)")
    p.add_argument("--seeds", type=int, default=3, help="proxy runs per variant, seeds 0..N-1 (default: %(default)s)")
    p.add_argument("--eval-data", action="append", default=[], metavar="DIR or NAME=DIR",
                   help="more evaluation sets besides the pool's valid/ (default: none)")
    p.add_argument("--eval-tokens", type=int, default=65536, help="tokens per evaluation set (default: %(default)s)")
    p.add_argument("--base-config", metavar="YAML", help="the proxy's training options (TrainConfig fields, "
                   "e.g. a run's train_config.json); default: a tiny GPT, seq_len 128, micro-batch 8")
    p.add_argument("--set", action="append", default=[], dest="set_values", metavar="KEY=VALUE",
                   help="a training option of the proxy, e.g. --set size=base (default: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the variants' mix draws (default: %(default)s)")
    return p


def proxy_args(args: argparse.Namespace) -> tuple[list[str], int]:
    """The proxy's training flags and tokens per step."""
    from common.settings import load, set_values
    from training.config import TrainConfig

    overrides = dict(PROXY) if not args.base_config else {}
    overrides.update(set_values(args.set_values, TrainConfig))
    cfg = load(TrainConfig, args.base_config, dict(overrides, data="-", out="-"))
    flags = ["--size", cfg.size, "--seq-len", str(cfg.seq_len), "--micro-batch", str(cfg.micro_batch),
             "--grad-accum", str(cfg.grad_accum), "--lr", str(cfg.lr), "--warmup", str(cfg.warmup),
             "--schedule", cfg.schedule, "--precision", cfg.precision, "--tokenizer", cfg.tokenizer,
             "--eval-tokens", str(args.eval_tokens), "--device", cfg.device]
    for key in ("n_layer", "n_head", "n_embd", "decay_fraction"):
        if getattr(cfg, key) is not None:
            flags += [f"--{key.replace('_', '-')}", str(getattr(cfg, key))]
    return flags, cfg.seq_len * cfg.micro_batch * cfg.grad_accum


def run(args: argparse.Namespace) -> dict[str, Any]:
    from training.tokenizer import load_tokenizer

    variants = [parse_variant(v) for v in args.variant]
    names = [n for n, _ in variants]
    if len(set(names)) != len(names):
        raise DataError(f"--variant: names must differ, got {names}")
    base, per_step = proxy_args(args)
    steps = math.ceil(args.tokens / per_step)
    pool = read_pool(args.pool)
    eval_data = ([f"{VALID}={os.path.join(args.pool, VALID)}"]
                 if os.path.isfile(os.path.join(args.pool, VALID, MANIFEST)) else []) + list(args.eval_data)
    if not eval_data:
        raise DataError(f"--pool {args.pool} has no valid/ split (`refinery run --holdout-fraction F`) and no "
                        "--eval-data was given: nothing to compare the variants on")
    tokenizer = load_tokenizer(base[base.index("--tokenizer") + 1])
    results = []
    for name, options in variants:
        table, rates = mix(select(pool, options), options.mix, args.seed, options.mix_max_epochs)
        if table.num_rows == 0:
            raise DataError(f"--variant {name}: no document of the pool passes its filters")
        folder = os.path.join(args.out, "variants", name)
        write_variant(folder, table, {"ablation": {"pool": os.path.abspath(args.pool), "variant": vars(options),
                                                   "rates": rates, "seed": args.seed}})
        data_tokens = sum(len(ids) + 1 for ids in tokenizer.encode_batch(table["text"].to_pylist()))
        extra = []
        if options.anneal_fraction:
            anneal = os.path.join(args.pool, "anneal")
            if not os.path.isfile(os.path.join(anneal, MANIFEST)):
                raise DataError(f"--variant {name}: --pool {args.pool} has no anneal/ split "
                                "(`refinery run --anneal-fraction F` writes one)")
            extra = ["--anneal-data", anneal, "--anneal-fraction", str(options.anneal_fraction)]
        runs = []
        for seed in range(args.seeds):
            print(f"[ablate] {name}: seed {seed}, {steps} steps x {per_step} tokens", flush=True)
            runs.append(train_proxy(folder, os.path.join(args.out, "runs", f"{name}-seed{seed}"), seed, steps,
                                    eval_data, base, extra))
        sets = sorted(runs[0]["eval"])
        results.append({"variant": name, "options": {k: v for k, v in vars(options).items() if v is not None},
                        "documents": table.num_rows, "data_tokens": data_tokens,
                        "passes": steps * per_step / data_tokens,
                        "sources": _counts(table["source"]),
                        "eval": {s: {"per_seed": [r["eval"][s]["loss"] for r in runs],
                                     "mean": statistics.fmean(r["eval"][s]["loss"] for r in runs),
                                     "sd": _spread([r["eval"][s]["loss"] for r in runs]),
                                     "tokens": runs[0]["eval"][s]["tokens"]} for s in sets}})
    return {"pool": os.path.abspath(args.pool), "tokens_per_run": steps * per_step, "steps": steps,
            "seeds": args.seeds, "proxy": base, "eval_sets": sets, "results": results}


def _counts(column: pa.ChunkedArray) -> dict[str, int]:
    return dict(sorted(collections.Counter(column.to_pylist()).items()))


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.tokens < 1 or args.seeds < 1:
        print("refinery ablate: error: --tokens and --seeds must be >= 1", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        report = run(args)
    except (DataError, OSError, ValueError) as exc:
        print(f"refinery ablate: error: {error_text(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"refinery ablate: interrupted; finished variants' runs are in {args.out}", file=sys.stderr)
        return 130
    sets = report["eval_sets"]
    title = (f"{report['tokens_per_run']:,} tokens per run, {report['seeds']} seed(s); validation loss on "
             + ", ".join(f"{s} ({report['results'][0]['eval'][s]['tokens']:,} tokens)" for s in sets))
    lines = table_lines(report["results"], sets)
    with open(os.path.join(args.out, "ablation.json"), "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
    with open(os.path.join(args.out, "ablation.md"), "w", encoding="utf-8") as fh:
        fh.write(title + "\n\n" + "\n".join(lines) + "\n")
    png = plot(report["results"], sets, os.path.join(args.out, "ablation.png"), title)
    print("\n" + title + "\n" + "\n".join(lines))
    print(f"[ablate] {len(report['results'])} variant(s) x {report['seeds']} seed(s) in "
          f"{time.monotonic() - started:.0f} s; {args.out}/ablation.md, ablation.json" + (", ablation.png" if png else ""))
    return 0
