"""PII stage speed: real extracted text and hostile inputs, RE2 (ours) vs the same patterns in Python's `re`.

    .venv/bin/python bench/pii_speed.py [SHARDS_DIR]   (default out/demo/data, written by `make demo`)

Both engines run the same candidate patterns and the same validators, in the same run, so
the ratio isolates the regex engine. Python's `re` backtracks; on hostile input its time
grows faster than the input.
"""
import functools
import re
import sys

import pyarrow.parquet as pq
from _timing import median_time

import stages.pii as pii

HOSTILE = {"a@a.a@": "a@a.a@", "digits": "1", "dotted": "1.", "colons": "a:", "spaced digits": "1 ", "iban-ish": "DE89"}




def with_engine(engine_patterns, fn):
    saved = dict(pii._PATTERNS)
    pii._PATTERNS.update(engine_patterns)
    try:
        return fn()
    finally:
        pii._PATTERNS.update(saved)


def main(shards: str) -> None:
    texts = pq.read_table(shards, columns=["text"]).column("text").to_pylist()
    corpus_mb = sum(len(t.encode()) for t in texts) / 1e6
    python_re = {kind: re.compile(p.pattern) for kind, p in pii._PATTERNS.items()}
    re2_s = median_time(lambda: [pii.redact(t) for t in texts])[0]
    re_s = with_engine(python_re, lambda: median_time(lambda: [pii.redact(t) for t in texts])[0])
    print(f"real text: {len(texts)} documents, {corpus_mb:.2f} MB")
    print(f"  RE2 {corpus_mb / re2_s:.1f} MB/s, {len(texts) / re2_s:.0f} docs/s; "
          f"Python re {corpus_mb / re_s:.1f} MB/s; ratio re/RE2 time {re_s / re2_s:.2f}")
    print("hostile input (seconds; 100 KB and 1 MB):")
    for name, unit in HOSTILE.items():
        small, large = unit * (100_000 // len(unit)), unit * (1_000_000 // len(unit))
        r2_small, r2_large = (median_time(functools.partial(pii.redact, small), 1)[0],
                              median_time(functools.partial(pii.redact, large), 1)[0])
        re_small = with_engine(python_re, functools.partial(median_time, functools.partial(pii.redact, small), 1))[0]
        print(f"  {name:<14} RE2 {r2_small:.3f} / {r2_large:.3f}   Python re {re_small:.3f} / (1 MB not run)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/demo/data")
