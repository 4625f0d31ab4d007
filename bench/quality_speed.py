"""Quality scoring speed: documents/second, one fastText call per document vs one call per batch.

    .venv/bin/python bench/quality_speed.py [SHARDS_DIR]   (default out/demo/data, written by `make demo`)
"""
import sys

import pyarrow.parquet as pq
from _timing import median_time

from stages.quality import QualityScorer, load_model, normalize, predict_hq


def main(shards: str) -> None:
    texts = pq.read_table(shards, columns=["text"]).column("text").to_pylist()
    model = load_model(None)
    scorer = QualityScorer()
    normalized = [normalize(t) for t in texts]
    one_by_one = median_time(lambda: [predict_hq(model, [t]) for t in normalized], 5)[0]
    batched = median_time(lambda: predict_hq(model, normalized), 5)[0]
    end_to_end = median_time(lambda: scorer.score(texts), 5)[0]  # normalization included
    n = len(texts)
    print(f"{n} documents, median of 5 runs")
    print(f"  predict one by one : {n / one_by_one:,.0f} docs/s (1.00)")
    print(f"  predict batched    : {n / batched:,.0f} docs/s ({one_by_one / batched:.2f}x)")
    print(f"  normalize + batched: {n / end_to_end:,.0f} docs/s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/demo/data")
