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
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import run_scale  # noqa: E402
from bench.run_scale import FILE_DOCS  # noqa: E402

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
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = run_scale.one(n, here, work, ("--paragraph-dedup",) if paragraphs else (), write_inputs)
    found.pop("checkout", None)
    edits = found.pop("report", {}).get("edits", {}).get("paragraph_dedup", {})
    return {"documents": n, "paragraph_dedup": paragraphs, **found, "edited": edits.get("documents"),
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
