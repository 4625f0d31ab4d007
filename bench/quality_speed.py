"""Quality scoring speed: documents/second, one fastText call per document vs one call per batch; with
`--old MODEL`, the same texts scored end to end by another model too (the bundled one before issue 23 read
text without line breaks: its normalization is `normalize`).

    .venv/bin/python bench/quality_speed.py [SHARDS_DIR] [--old OLD.ftz]   (default out/demo/data)
"""
import argparse

import pyarrow.parquet as pq
from _timing import median_time

from stages.quality import QualityScorer, load_model, normalize, normalize_page, predict_hq


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("shards", nargs="?", default="out/demo/data")
    p.add_argument("--old", help="another model, scored end to end with the plain normalization")
    args = p.parse_args()
    texts = pq.read_table(args.shards, columns=["text"]).column("text").to_pylist()
    model = load_model(None)
    scorer = QualityScorer()
    normalized = [normalize_page(t) for t in texts]
    one_by_one = median_time(lambda: [predict_hq(model, [t]) for t in normalized], 5)[0]
    batched = median_time(lambda: predict_hq(model, normalized), 5)[0]
    end_to_end = median_time(lambda: scorer.score(texts), 5)[0]  # normalization included
    n = len(texts)
    print(f"{n} documents, median of 5 runs")
    print(f"  predict one by one : {n / one_by_one:,.0f} docs/s (1.00)")
    print(f"  predict batched    : {n / batched:,.0f} docs/s ({one_by_one / batched:.2f}x)")
    print(f"  normalize + batched: {n / end_to_end:,.0f} docs/s")
    if args.old:
        old = load_model(args.old)
        old_time = median_time(lambda: predict_hq(old, [normalize(t) for t in texts]), 5)[0]
        print(f"  old model, normalize + batched: {n / old_time:,.0f} docs/s (new/old: {old_time / end_to_end:.2f})")


if __name__ == "__main__":
    main()
