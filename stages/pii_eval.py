"""Precision and recall of `find_pii` per kind on a labeled set (tests and reports share this)."""
from __future__ import annotations

import collections
import json
from collections.abc import Iterable

from stages.pii import KINDS, find_pii


def evaluate(rows: Iterable[dict]) -> dict[str, dict[str, float]]:
    """rows: {"text": str, "pii": [{"kind", "value"}]}. A hit must have the right kind and exact value."""
    tp, fp, fn = collections.Counter(), collections.Counter(), collections.Counter()
    errors = []
    for row in rows:
        text = row["text"]
        gold = collections.Counter((p["kind"], p["value"]) for p in row["pii"])
        found = collections.Counter((kind, text[s:e]) for s, e, kind in find_pii(text))
        for key in gold | found:
            hit = min(gold[key], found[key])
            tp[key[0]] += hit
            fp[key[0]] += found[key] - hit
            fn[key[0]] += gold[key] - hit
            if found[key] != gold[key]:
                errors.append((key, text))
    report = {}
    for kind in KINDS:
        p_den, r_den = tp[kind] + fp[kind], tp[kind] + fn[kind]
        report[kind] = {"precision": tp[kind] / p_den if p_den else 1.0, "recall": tp[kind] / r_den if r_den else 1.0,
                        "tp": tp[kind], "fp": fp[kind], "fn": fn[kind]}
    report["_errors"] = errors  # type: ignore[assignment]
    return report


def load_jsonl(path: str):
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
