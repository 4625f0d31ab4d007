"""Throughput of the whole job on one machine: the in-process FnApiRunner vs Beam's multi-process
local mode (`--direct_running_mode=multi_processing --direct_num_workers=N`) vs a Dask scheduler with 2
worker processes (`python -m pipeline.engines.local_cluster --engine dask`), same input, same run.

    .venv/bin/python bench/runners.py [--input ../shared/data/warc/bench_trafilatura_pages.warc.gz] [--repeat 3]

Each configuration is a real `refinery run` process; the table gives median wall time, documents
read per second and the ratio against one in-process worker; "job s" is the job alone (report.json),
without starting the cluster. The outputs are checked to be equal.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_INPUT = os.path.join(REPO, "..", "shared", "data", "warc", "bench_trafilatura_pages.warc.gz")
RUN = [sys.executable, "-m", "pipeline.cli", "run"]
DASK = [sys.executable, "-m", "pipeline.engines.local_cluster", "--engine", "dask", "--timeout", "1800", "--"]
CONFIGS = {  # name: (launcher, extra run flags)
    "FnApiRunner, 1 process": (RUN, []),
    "multi_processing, 2 workers": (RUN, ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]),
    "Dask, scheduler + 2 workers": (DASK, []),
}


def one_run(input_glob: str, launcher, extra) -> tuple:
    with tempfile.TemporaryDirectory() as out:
        cmd = [*launcher, "--input", input_glob, "--output", out, "--quiet", *extra]
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}")
        report = json.load(open(os.path.join(out, "report.json")))
        ids = sorted(pq.read_table(os.path.join(out, "data"), columns=["id"]).column(0).to_pylist())
        return elapsed, report["documents_read"], ids, report["elapsed_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default=DEFAULT_INPUT)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", action="append", choices=sorted(CONFIGS), help="run only these configurations")
    args = p.parse_args()
    rows, outputs = [], {}
    for name, (launcher, extra) in CONFIGS.items():
        if args.only and name not in args.only:
            continue
        runs = [one_run(args.input, launcher, extra) for _ in range(args.repeat)]
        seconds = statistics.median(r[0] for r in runs)
        rows.append((name, seconds, runs[0][1], statistics.median(r[3] for r in runs)))
        outputs[name] = runs[0][2]
        print(f"{name}: {[round(r[0], 1) for r in runs]} s", file=sys.stderr)
    same = len({tuple(v) for v in outputs.values()}) == 1
    print(f"input {os.path.basename(args.input)}, {os.cpu_count()} cores, median of {args.repeat}; outputs equal: {same}")
    print("| runner | wall s | job s | documents read/s | ratio vs 1 process |")
    print("|---|---|---|---|---|")
    for name, seconds, read, job in rows:
        print(f"| {name} | {seconds:.1f} | {job:.1f} | {read / seconds:.1f} | {rows[0][1] / seconds:.2f}x |")


if __name__ == "__main__":
    main()
