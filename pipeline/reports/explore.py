"""Reading a finished run's Parquet back: what `refinery inspect` and the HTML report show.

Only the Parquet files are read (pyarrow datasets: local paths and object-store URIs alike), in
record batches with the columns needed, and every sample is bounded, so a billion-row ledger
costs a streaming pass, never the driver's memory.
"""
from __future__ import annotations

import collections
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

DATA, LEDGER, VALID, EDITS = "data", "ledger", "valid/data", "edits"
EDITS_COLUMNS = ["id", "stage", "paragraphs", "chars", "kept_in", "removed"]
LEDGER_COLUMNS = ["id", "source", "url", "stage", "reason", "detail", "value", "threshold", "kept_id", "lang",
                  "file", "offset", "line", "snippet"]


def dataset(output: str, part: str) -> ds.Dataset | None:
    """The run's `data` or `ledger` files as one dataset; None if the folder holds none."""
    path = output.rstrip("/") + "/" + part
    try:
        found = ds.dataset(path, format="parquet", exclude_invalid_files=True,
                           ignore_prefixes=[".", "_"])
    except (FileNotFoundError, pa.ArrowInvalid):
        return None
    return found if found.files else None


def batches(data: ds.Dataset | None, columns: Sequence[str], where: pc.Expression | None = None,
            batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
    if data is None:
        return
    present = [c for c in columns if c in data.schema.names]  # older schema versions lack new columns
    yield from data.to_batches(columns=present, filter=where, batch_size=batch_rows)


def rows(data: ds.Dataset | None, columns: Sequence[str], where: pc.Expression | None = None,
         limit: int | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for batch in batches(data, columns, where):
        out += batch.to_pylist()[: None if limit is None else limit - len(out)]
        if limit is not None and len(out) >= limit:
            break
    return out


def sample_rows(data: ds.Dataset | None, columns: Sequence[str], where: pc.Expression | None, n: int,
                seed: int) -> tuple[list[dict[str, Any]], int]:
    """A seeded reservoir sample of `n` matching rows, and how many matched (one streaming pass)."""
    rng, chosen, seen = random.Random(seed), [], 0
    for batch in batches(data, columns, where):
        for row in batch.to_pylist():
            seen += 1
            if len(chosen) < n:
                chosen.append(row)
            elif (j := rng.randrange(seen)) < n:
                chosen[j] = row
    return chosen, seen


@dataclass
class ReasonSample:
    """One (stage, reason) of the ledger: its count, a bounded sample of measured values, the thresholds
    applied (per language they differ), and a few dropped rows."""

    stage: str
    reason: str
    count: int = 0
    values: list[float] = field(default_factory=list)
    thresholds: collections.Counter = field(default_factory=collections.Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def common_threshold(self) -> float | None:
        return self.thresholds.most_common(1)[0][0] if self.thresholds else None


@dataclass
class LedgerSummary:
    reasons: dict[tuple[str, str], ReasonSample]
    languages: collections.Counter           # dropped documents per language (None: before language ID)
    duplicates: dict[str, list[dict[str, Any]]]  # kept id -> some of its removed copies


def summarize_ledger(output: str, examples: int = 5, max_values: int = 20000,
                     max_clusters: int = 4) -> LedgerSummary:
    """One streaming pass over the ledger, vectorized per record batch (a Python loop only over the few
    rows kept as samples)."""
    reasons: dict[tuple[str, str], ReasonSample] = {}
    languages: collections.Counter = collections.Counter()
    duplicates: dict[str, list[dict[str, Any]]] = {}
    for batch in batches(dataset(output, LEDGER), LEDGER_COLUMNS):
        table = pa.Table.from_batches([batch])
        for row in table.group_by(["stage", "reason"]).aggregate([([], "count_all")]).to_pylist():
            key = (row["stage"], row["reason"])
            sample = reasons.get(key) or reasons.setdefault(key, ReasonSample(*key))
            sample.count += row["count_all"]
        for row in table.group_by(["stage", "reason", "threshold"]).aggregate([([], "count_all")]).to_pylist():
            if row["threshold"] is not None:
                reasons[(row["stage"], row["reason"])].thresholds[row["threshold"]] += row["count_all"]
        for row in pc.value_counts(table.column("lang")).to_pylist():
            languages[row["values"]] += row["counts"]
        for key, sample in reasons.items():
            needs_values, needs_examples = max_values - len(sample.values), examples - len(sample.examples)
            if needs_values <= 0 and needs_examples <= 0:
                continue
            mine = table.filter((pc.field("stage") == key[0]) & (pc.field("reason") == key[1]))
            if not mine.num_rows:
                continue
            if needs_values > 0:
                sample.values += [v for v in mine.column("value").drop_null().to_pylist()[:needs_values]]
            if needs_examples > 0:
                sample.examples += mine.slice(0, needs_examples).to_pylist()
        _sample_clusters(table, duplicates, max_clusters)
    return LedgerSummary(reasons, languages, duplicates)


def _sample_clusters(table: pa.Table, duplicates: dict[str, list[dict[str, Any]]], max_clusters: int) -> None:
    """A few near-duplicate clusters: up to 3 removed copies of up to `max_clusters` kept documents."""
    near = table.filter((pc.field("stage") == "near_dedup") & pc.field("kept_id").is_valid())
    if not near.num_rows or (len(duplicates) >= max_clusters and all(len(v) >= 3 for v in duplicates.values())):
        return
    for row in near.slice(0, 64).to_pylist():
        kept = row["kept_id"]
        if kept in duplicates or len(duplicates) < max_clusters:
            if len(duplicates.setdefault(kept, [])) < 3:
                duplicates[kept].append(row)


def documents(output: str, ids: Sequence[str], columns: Sequence[str] = ("id", "url", "lang", "text")) -> dict:
    """Output documents by id (original copies, epoch 0)."""
    if not ids:
        return {}
    where = pc.field("id").isin(list(ids)) & (pc.field("epoch") == 0)
    return {r["id"]: r for r in rows(dataset(output, DATA), list(columns), where)}


def kept_sample(output: str, n: int = 2000) -> list[dict[str, Any]]:
    """The first `n` original documents of the output: shards are shuffled by a seeded hash, so these
    are a sample of every source and file."""
    return rows(dataset(output, DATA), ["id", "url", "source", "lang", "lang_score", "quality_score",
                                        "toxicity_score", "text", "pii_counts"], pc.field("epoch") == 0, n)


def rescued(output: str, n: int = 20) -> tuple[list[dict[str, Any]], int]:
    """Kept documents that missed one repetition limit by a hair and were kept on the quality model's word
    (`metadata.rescued`, stages/rescue.py): the first `n` and how many there are."""
    data = dataset(output, DATA)
    if data is None or "metadata" not in data.schema.names or \
            data.schema.field("metadata").type.get_field_index("rescued") < 0:  # an output of an older schema
        return [], 0
    where = pc.field("metadata", "rescued").is_valid() & (pc.field("epoch") == 0)
    found = rows(data, ["url", "lang", "quality_score", "metadata"], where)
    return [{"url": r["url"], "lang": r["lang"], "quality_score": r["quality_score"],
             "rescued": r["metadata"]["rescued"]} for r in found[:n]], len(found)


def score_columns(output: str, columns: Sequence[str], max_values: int = 200000) -> dict[str, list[float]]:
    """Values of numeric columns over the output (originals), at most `max_values` each."""
    out: dict[str, list[float]] = {c: [] for c in columns}
    for batch in batches(dataset(output, DATA), list(columns), pc.field("epoch") == 0):
        for c in columns:
            if c in batch.schema.names and len(out[c]) < max_values:
                out[c] += [v for v in batch.column(c).to_pylist() if v is not None][: max_values - len(out[c])]
        if all(len(v) >= max_values for v in out.values()):
            break
    return out


def pii_totals(output: str, parts: tuple[str, ...] = (DATA, VALID)) -> dict[str, int]:
    """Placeholders inserted per PII kind over the whole output, data/ and the held-out valid/ alike (as the
    funnel counts them; one small struct column)."""
    totals: collections.Counter = collections.Counter()
    for part in parts:
        for batch in batches(dataset(output, part), ["pii_counts"], pc.field("epoch") == 0):
            counts = batch.column("pii_counts")
            for i, kind in enumerate(counts.type):
                totals[kind.name] += pc.sum(counts.field(i)).as_py() or 0
    return {k: v for k, v in totals.items() if v}
