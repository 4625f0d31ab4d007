"""Peak memory and time of a whole local `refinery run` (FnApiRunner, one process) as the corpus grows.

    .venv/bin/python bench/run_scale.py [--before CHECKOUT] 100000 [300000 ...]

Input: `bench/dedup_scale.py`'s synthetic corpus (60 words from a 50,000-word vocabulary, 10 % near
copies, 5 % exact copies), written as JSONL files of 50,000 documents (a text source: one prepared part
per file). The synthetic words are no language, so the config turns off what would drop them all:
language threshold 0, the Gopher rules, the quality, bad-words, toxicity and PII stages; reading,
language ID, signatures, exact and near dedup, the holdout, shards, ledger and signatures/ all run.
Each run is a fresh `refinery run` subprocess; peak RSS is its own (VmHWM, read by a wrapper).
`--before CHECKOUT` runs the same sizes with another checkout of refinery (e.g. a `git worktree` of an
earlier commit) in the same session, for a ratio measured under the same conditions.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.dedup_scale import corpus  # noqa: E402

FILE_DOCS = 50_000
CONFIG = """\
langid: {threshold: 0.0}
gopher_repetition: {enabled: false}
gopher_quality: {enabled: false}
quality: {enabled: false}
bad_words: {enabled: false}
toxicity: {enabled: false}
pii: {enabled: false}
"""
# Runs refinery's CLI in this process, then prints this process's peak RSS (the job runs in it).
WRAPPER = """\
import sys
from pipeline.cli import main
sys.argv = ["refinery", "run", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    if e.code:
        raise
print("VmHWM_kB", next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")))
"""


def write_inputs(n: int, folder: str) -> None:
    docs = corpus(n)
    for start in range(0, n, FILE_DOCS):
        with open(os.path.join(folder, f"part-{start // FILE_DOCS:04d}.jsonl"), "w", encoding="utf-8") as fh:
            for d in docs[start:start + FILE_DOCS]:
                fh.write(json.dumps({"text": d.text, "url": f"https://bench.example/{d.id}"}) + "\n")


def one(n: int, checkout: str, work: str, extra: tuple[str, ...] = (), write=None) -> dict:
    """One `refinery run` over n documents (written by `write(n, folder)`, default `write_inputs`) with `extra`
    flags: its time, peak RSS, counts, and the report itself (`report`)."""
    inputs = os.path.join(work, f"in-{n}")
    if not os.path.isdir(inputs):
        os.makedirs(inputs)
        (write or write_inputs)(n, inputs)
    config = os.path.join(work, "bench.yaml")
    with open(config, "w") as fh:
        fh.write(CONFIG)
    out = os.path.join(work, "out")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, "--source", f"bench={inputs}/*.jsonl", "--output", out,
                           "--config", config, "--overwrite", "--quiet", *extra],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=checkout), cwd=checkout)
    wall = time.perf_counter() - started
    if proc.returncode:
        return {"documents": n, "checkout": checkout, "error": proc.stderr[-2000:]}
    peak_kb = int(next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("VmHWM_kB")))
    with open(os.path.join(out, "report.json")) as fh:
        report = json.load(fh)
    return {"documents": n, "checkout": checkout, "seconds": round(wall, 1), "peak_rss_mb": round(peak_kb / 1024),
            "kept": report["kept"], "ledger": report["conservation"]["ledger"],
            "conservation": report["conservation"]["holds"], "report": report}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="+", type=int)
    ap.add_argument("--before", metavar="CHECKOUT", help="another refinery checkout to run first, same sizes")
    args = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory(prefix="run_scale-") as work:
        for n in args.sizes:
            for checkout in ([args.before] if args.before else []) + [here]:
                found = one(n, checkout, work)
                found.pop("report", None)
                print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
