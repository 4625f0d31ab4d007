"""Quality scoring speed: documents/second, one fastText call per document vs one call per batch.

    .venv/bin/python bench/quality_speed.py [SHARDS_DIR]   (default out/demo/data, written by `make demo`)
"""
import statistics
import sys
import time

import pyarrow.parquet as pq

from stages.quality import QualityScorer, load_model, normalize, predict_hq


def median_time(fn, repeat=5):
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main(shards: str) -> None:
    texts = pq.read_table(shards, columns=["text"]).column("text").to_pylist()
    model = load_model(None)
    scorer = QualityScorer()
    normalized = [normalize(t) for t in texts]
    one_by_one = median_time(lambda: [predict_hq(model, [t]) for t in normalized])
    batched = median_time(lambda: predict_hq(model, normalized))
    end_to_end = median_time(lambda: scorer.score(texts))  # normalization included
    n = len(texts)
    print(f"{n} documents, median of 5 runs")
    print(f"  predict one by one : {n / one_by_one:,.0f} docs/s (1.00)")
    print(f"  predict batched    : {n / batched:,.0f} docs/s ({one_by_one / batched:.2f}x)")
    print(f"  normalize + batched: {n / end_to_end:,.0f} docs/s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/demo/data")
