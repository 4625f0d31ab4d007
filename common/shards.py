"""The shard layout that `refinery run` writes and `refinery train` reads, without Beam or torch:
OUT/data/part-*.parquet and OUT/manifest.json, the manifest written last (its presence means the
output is complete). pipeline/job/output.py writes the job's shards through Beam's filesystems;
training/ablate.py writes an ablation's variants with plain files; both describe them here."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MANIFEST = "manifest.json"
FORMAT = "refinery-shards/1"
TOKEN_ESTIMATE = "UTF-8 bytes / 4"   # how `tokens` is counted before a tokenizer is chosen


def manifest(shards: Sequence[dict[str, Any]], schema: str, extra: dict[str, Any]) -> dict[str, Any]:
    """manifest.json's content: each shard's stats (path, rows, bytes, sha256, tokens_by_source, rows_by_source,
    ...), their totals per source, the document schema's version, and `extra` (config, version, splits)."""
    tokens: dict[str, int] = {}
    rows: dict[str, int] = {}
    for s in shards:
        for k, v in s["tokens_by_source"].items():
            tokens[k] = tokens.get(k, 0) + v
        for k, v in s["rows_by_source"].items():
            rows[k] = rows.get(k, 0) + v
    return {"format": FORMAT, "schema": schema, "token_estimate": TOKEN_ESTIMATE, "shards": list(shards),
            "rows": sum(s["rows"] for s in shards), "tokens": sum(tokens.values()),
            "sources": {k: {"rows": rows.get(k, 0), "tokens": tokens.get(k, 0)} for k in sorted(tokens)}, **extra}
