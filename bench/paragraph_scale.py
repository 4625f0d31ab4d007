"""Paragraph dedup's cost on a whole local run (FnApiRunner, one process): peak memory and time with
`--paragraph-dedup` against the same run without it, in the same session, on synthetic documents that carry a
site's template.

    .venv/bin/python bench/paragraph_scale.py 100000 [1000000 ...]

Documents: 6 paragraphs each, 4 of their own (12 words from a 50,000-word vocabulary) and 2 of their
site's 5 template lines (2,000 sites, each line 12 words); 10 % are near copies (3 words replaced) of an
earlier document and 5 % exact copies, as in bench/run_scale.py, whose JSONL layout, wrapper and config (the
stages that would drop made-up words are off) this reuses. Each run is a fresh `refinery run` subprocess;
peak RSS is its own (VmHWM).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.run_scale import CONFIG, FILE_DOCS, WRAPPER  # noqa: E402

SITES, TEMPLATE_LINES, OWN, SHARED, WORDS = 2_000, 5, 4, 2, 12


def texts(n: int, seed: int = 0):
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]

    def line() -> str:
        return " ".join(rng.choice(vocab) for _ in range(WORDS)).capitalize() + "."

    templates = [[line() for _ in range(TEMPLATE_LINES)] for _ in range(SITES)]
    made: list[tuple[int, str]] = []
    for _ in range(n):
        r = rng.random()
        if made and r < 0.10:
            site, text = rng.choice(made)
            words = text.split(" ")
            for _ in range(3):
                words[rng.randrange(len(words))] = rng.choice(vocab)
            text = " ".join(words)
        elif made and r < 0.15:
            site, text = rng.choice(made)
        else:
            site = rng.randrange(SITES)
            text = "\n".join([line() for _ in range(OWN)] + rng.sample(templates[site], SHARED))
        made.append((site, text))
    return made


def write_inputs(n: int, folder: str) -> None:
    made = texts(n)
    for start in range(0, n, FILE_DOCS):
        with open(os.path.join(folder, f"part-{start // FILE_DOCS:04d}.jsonl"), "w", encoding="utf-8") as fh:
            for i, (site, text) in enumerate(made[start:start + FILE_DOCS], start=start):
                fh.write(json.dumps({"text": text, "url": f"https://site{site}.example/{i}"}) + "\n")


def one(n: int, work: str, paragraphs: bool) -> dict:
    inputs = os.path.join(work, f"in-{n}")
    if not os.path.isdir(inputs):
        os.makedirs(inputs)
        write_inputs(n, inputs)
    config = os.path.join(work, "bench.yaml")
    with open(config, "w") as fh:
        fh.write(CONFIG)
    out = os.path.join(work, "out")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, "--source", f"bench={inputs}/*.jsonl", "--output", out,
                           "--config", config, "--overwrite", "--quiet",
                           *(["--paragraph-dedup"] if paragraphs else [])],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=here), cwd=here)
    wall = time.perf_counter() - started
    if proc.returncode:
        return {"documents": n, "paragraph_dedup": paragraphs, "error": proc.stderr[-2000:]}
    peak_kb = int(next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("VmHWM_kB")))
    with open(os.path.join(out, "report.json")) as fh:
        report = json.load(fh)
    edits = report.get("edits", {}).get("paragraph_dedup", {})
    return {"documents": n, "paragraph_dedup": paragraphs, "seconds": round(wall, 1),
            "peak_rss_mb": round(peak_kb / 1024), "kept": report["kept"], "ledger": report["conservation"]["ledger"],
            "conservation": report["conservation"]["holds"], "edited": edits.get("documents"),
            "repeated_paragraphs": edits.get("repeated_paragraphs"), "share_of_text_cut": edits.get("share_of_text")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="+", type=int)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="paragraph_scale-") as work:
        for n in args.sizes:
            for paragraphs in (False, True):
                print(json.dumps(one(n, work, paragraphs)), flush=True)


if __name__ == "__main__":
    main()
