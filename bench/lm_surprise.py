"""`lm_surprise` of web prose from a source the reference models were not fitted on: Leipzig's sentences
(lingua's test data, shared/data/multilingual/lingua_testdata; CC BY-NC: measured here, never shipped), 8
sentences a document, per language: median, p95, p99, max and the share at or over the cap's start.

    python bench/lm_surprise.py [--data ../shared/data/multilingual] [--models stages/models/reference_lm.npz]
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from stages.quality_signals import RAMPS  # noqa: E402
from stages.reference_lm import ReferenceModels  # noqa: E402

PER_DOC = 8


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=shared_data.path("multilingual"))
    parser.add_argument("--models", default=None, help="a reference_lm.npz (default: the bundled one)")
    args = parser.parse_args(argv)
    folder = os.path.join(args.data, "lingua_testdata", "sentences")
    shared_data.require("bench/lm_surprise.py", {folder: "lingua's test sentences (Leipzig corpora)"}, "--data")
    models, start = ReferenceModels(args.models), RAMPS["lm_surprise"][0]
    rows, missing = [], []
    for path in sorted(glob.glob(os.path.join(folder, "*.txt"))):
        lang = os.path.basename(path)[:-4]
        with open(path, encoding="utf-8") as fh:
            lines = [line.strip() for line in fh if line.strip()]
        docs = ["\n".join(lines[i:i + PER_DOC]) for i in range(0, len(lines) - PER_DOC + 1, PER_DOC)]
        values = sorted(v for v in (models.surprise(d, lang) for d in docs) if v is not None)
        if not values:
            missing.append(lang)
            continue
        q = statistics.quantiles(values, n=100)
        rows.append((lang, len(values), statistics.median(values), q[94], q[98], values[-1],
                     sum(v >= start for v in values) / len(values)))
    print(f"| lang | documents | median | p95 | p99 | max | share >= {start} |\n|---|---|---|---|---|---|---|")
    for row in sorted(rows, key=lambda r: -r[4]):
        lang, n, *values = row
        print(f"| {lang} | {n} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    print(f"{len(rows)} languages; no reference model: {', '.join(missing) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
