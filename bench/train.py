"""Training throughput: tokens/second of the training loop for one fixed model, one process vs
N ranks (DDP and FSDP), medians of --repeat runs, ratios against the single process of the same run.

    .venv/bin/python bench/train.py --data out/demo               # CPU: gloo, 1 vs 2 ranks
    .venv/bin/python bench/train.py --data out/demo --device cuda --precision bf16 --size gpt2 \\
        --seq-len 1024 --micro-batch 16 --ranks 1                  # one GPU: tokens/s, MFU, peak memory

Needs shards: `make demo` writes out/demo. Each run is a real `refinery train` process (torchrun for
several ranks); the first step is left out of tokens/s (allocation and warm-up).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_run(args, ranks: int, strategy: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "pipeline.cli", "train",
               "--nproc-per-node", str(ranks), "--data", args.data, "--out", out, "--size", args.size,
               "--seq-len", str(args.seq_len), "--micro-batch", str(args.micro_batch), "--steps", str(args.steps),
               "--strategy", strategy, "--precision", args.precision, "--device", args.device,
               "--checkpoint-every", str(args.steps + 1), "--log-every", str(args.steps)]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"run failed ({' '.join(cmd)}):\n{proc.stderr[-3000:]}")
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
            return json.load(fh)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(REPO, "out", "demo"))
    p.add_argument("--size", default="small")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if not os.path.isfile(os.path.join(args.data, "manifest.json")):
        raise SystemExit(f"no shards in {args.data}: run `make demo` first or pass --data")
    rows = []
    for ranks in args.ranks:
        for strategy in (["ddp"] if ranks == 1 else ["ddp", "fsdp"]):
            runs = [one_run(args, ranks, strategy) for _ in range(args.repeat)]
            rate = statistics.median(r["tokens_per_s"] for r in runs)
            mfu = [r["mfu"] for r in runs if r["mfu"] is not None]
            peak = max(max(m.get("cuda_max_allocated_mib", m["peak_rss_mib"]) for m in r["memory_per_rank"])
                       for r in runs)
            rows.append((ranks, strategy if ranks > 1 else "-", rate, statistics.median(mfu) if mfu else None,
                         peak, runs[0]["parameters"], runs[0]["flops_per_token"]))
    base = rows[0][2]
    print(f"model {args.size}: {rows[0][5]:,} parameters, {rows[0][6] / 1e6:.2f} MFLOP/token (6N + 12·L·d·T); "
          f"seq {args.seq_len}, micro-batch {args.micro_batch}/rank, {args.precision} on {args.device}; "
          f"{args.steps} steps, median of {args.repeat}")
    print("| ranks | strategy | tokens/s | ratio vs 1 process | MFU | peak memory per rank (MiB) |")
    print("|---|---|---|---|---|---|")
    for ranks, strategy, rate, mfu, peak, _, _ in rows:
        mfu_text = f"{mfu:.1%}" if mfu is not None else "-"
        print(f"| {ranks} | {strategy} | {rate:,.0f} | {rate / base:.2f}x | {mfu_text} | {peak:,.0f} |")


if __name__ == "__main__":
    main()
