"""The run report: a funnel per stage and reason, checked against the files actually written.

Counts come from two independent places: Beam counters (what the workers saw)
and the Parquet footers / ledger rows (what reached storage). The conservation
check compares them: documents read == rows in shards + rows in the ledger.
"""
from __future__ import annotations

import collections
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter

from pipeline import counters as names
from pipeline.counters import NAMESPACE
from pipeline.storage import write_atomically
from stages.table import READ, stage_table

READ_STAGES = tuple(s.name for s in stage_table() if s.runs == READ)  # their `in` counters: documents read


def current_metrics(result):
    """The runner's metrics now. Beam's PortableRunner result keeps its first `metrics()` answer for good; a
    job service reports counters only at the end, so a progress poll during the job cached an empty answer
    and the finished job then seemed to have no metrics at all (2 of 10 `make cluster-demo` runs): ask anew."""
    if hasattr(result, "_job_service") and hasattr(result, "_metrics"):
        result._metrics = None
    return result.metrics()


def counters(result) -> dict[str, int] | None:
    """Beam counters of this run, committed values where the runner has them; None if it reports none."""
    out: dict[str, int] = {}
    try:
        queried = current_metrics(result).query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    except (NotImplementedError, AttributeError):
        return None
    for c in queried:
        value = c.committed if c.committed is not None else c.attempted
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + int(value or 0)
    return out or None  # a run reads at least one file, so no counters at all means no metrics support


def attempted_counters(result) -> dict[str, int]:
    """Counters so far of a running job (attempted values), for progress."""
    out: dict[str, int] = {}
    for c in current_metrics(result).query(MetricsFilter().with_namespace(NAMESPACE))["counters"]:
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + int(c.attempted or 0)
    return out


def distributions(result) -> dict[str, dict[str, int]]:
    """Beam distributions of this run ({name: count, sum, min, max}); empty if the runner has none."""
    out: dict[str, dict[str, int]] = {}
    try:
        queried = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["distributions"]
    except (NotImplementedError, AttributeError, KeyError):
        return out
    for d in queried:
        value = d.committed if d.committed is not None else d.attempted
        if value is None or not value.count:
            continue
        entry = out.setdefault(d.key.metric.name, {"count": 0, "sum": 0, "min": value.min, "max": value.max})
        entry["count"] += value.count
        entry["sum"] += value.sum
        entry["min"], entry["max"] = min(entry["min"], value.min), max(entry["max"], value.max)
    return out


def stage_times(dists: Mapping[str, Mapping[str, int]], stages: Sequence[str]) -> list[dict[str, Any]]:
    """Per-document time of each timed stage: mean, fastest, slowest, and documents per CPU-second."""
    rows = []
    for stage in stages:
        d = dists.get(f"{stage}.time_us")
        if d and d["count"]:
            mean_us = d["sum"] / d["count"]
            rows.append({"stage": stage, "documents": d["count"], "cpu_s": round(d["sum"] / 1e6, 3),
                         "mean_ms": round(mean_us / 1e3, 3), "min_ms": round(d["min"] / 1e3, 3),
                         "max_ms": round(d["max"] / 1e3, 3),
                         "docs_per_cpu_s": round(1e6 / mean_us, 1) if mean_us else None})
    return rows


def list_files(pattern: str) -> list[str]:
    match = FileSystems.match([pattern])[0]
    return sorted(m.path for m in match.metadata_list)


def parquet_row_counts(paths: Sequence[str]) -> dict[str, int]:
    rows = {}
    for path in paths:
        with FileSystems.open(path) as fh:
            rows[path] = pq.ParquetFile(fh).metadata.num_rows
    return rows


def column_counts(paths: Sequence[str], columns: Sequence[str]) -> collections.Counter:
    """Count distinct tuples of `columns` over Parquet files, reading only those columns."""
    counts: collections.Counter = collections.Counter()
    for path in paths:
        with FileSystems.open(path) as fh:
            table = pq.read_table(fh, columns=list(columns))
        counts.update(zip(*(table.column(c).to_pylist() for c in columns)))
    return counts


def build_report(*, stages: Sequence[str], beam_counters: Mapping[str, int] | None, shard_rows: Mapping[str, int],
                 ledger_rows: Mapping[str, int], ledger_reasons: Mapping[tuple[str, str], int],
                 held_out: int = 0, records_read: int | None = None,
                 languages: Mapping[str, int], config: Mapping[str, Any], runner: str,
                 elapsed_s: float) -> dict[str, Any]:
    """`records_read`: the records the input files held, from the prepared parts' markers (written by the
    tasks that read them): conservation is checked against it, from files alone, and runner metrics, where
    the runner delivers them, only cross-check it (the portable runner sometimes delivers none). Without
    metrics, the funnel's in/kept are derived from the read count and the ledger's drops in stage order."""
    metrics_available = beam_counters is not None
    beam_counters = beam_counters or {}
    kept, ledgered = sum(shard_rows.values()), sum(ledger_rows.values())
    counted_read = sum(beam_counters.get(names.entered(s), 0) for s in stages if s in READ_STAGES)
    read = records_read if records_read is not None else counted_read if metrics_available else None
    funnel, entering = [], read or 0
    for stage in stages:
        dropped = {reason: n for (s, reason), n in sorted(ledger_reasons.items()) if s == stage}
        counted = names.drops_of(beam_counters, stage)
        notes = names.notes_of(beam_counters, stage)
        leaving = entering - sum(dropped.values())
        funnel.append({
            "stage": stage,
            "in": beam_counters.get(names.entered(stage), 0) if metrics_available else entering,
            "kept": beam_counters.get(names.kept(stage), 0) if metrics_available else leaving,
            "kept_tokens": beam_counters.get(names.kept_tokens(stage), 0),
            "dropped": sum(dropped.values()),
            "dropped_by_reason": dropped,
            "counters_agree_with_ledger": counted == dropped if metrics_available else None,
            "notes": dict(sorted(notes.items())),
        })
        entering = leaving
    records = {k.split(".record.", 1)[1]: v for k, v in beam_counters.items() if ".record." in k}
    return {
        "documents_read": read,
        "warc_records_by_type": dict(sorted(records.items())),
        "funnel": funnel,
        "kept": kept,
        "held_out": held_out,
        "ledger": ledgered,
        "conservation": {
            "read": read, "kept": kept, "held_out": held_out, "ledger": ledgered,
            "holds": None if read is None else (
                read == kept + held_out + ledgered
                and (not metrics_available or (counted_read == read
                                                and all(f["counters_agree_with_ledger"] for f in funnel)))),
            "read_from": "input files (prepared parts' markers)" if records_read is not None else "runner metrics",
            "counters": "cross-checked" if metrics_available else "none delivered by the runner",
        },
        "metrics_available": metrics_available,
        "languages": dict(sorted(languages.items(), key=lambda kv: (-kv[1], kv[0]))),
        "shards": [{"path": p, "rows": n} for p, n in sorted(shard_rows.items())],
        "ledger_files": [{"path": p, "rows": n} for p, n in sorted(ledger_rows.items())],
        "runner": runner,
        "elapsed_s": round(elapsed_s, 2),
        "config": dict(config),
    }


def write_json(path: str, payload: Mapping[str, Any]) -> None:
    write_atomically(path, json.dumps(payload, indent=2, ensure_ascii=False, default=str).encode("utf-8"))


def format_funnel(report: Mapping[str, Any]) -> str:
    lines = [f"{'stage':<18}{'in':>8}{'kept':>8}{'dropped':>9}  reasons"]
    for f in report["funnel"]:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(f["dropped_by_reason"].items(), key=lambda kv: -kv[1]))
        lines.append(f"{f['stage']:<18}{f['in']:>8}{f['kept']:>8}{f['dropped']:>9}  {reasons}")
        if f.get("notes"):
            lines.append(f"{'':<18}  notes: " + ", ".join(f"{k} {v}" for k, v in f["notes"].items()))
    c = report["conservation"]
    mark = {True: "holds", False: "BROKEN", None: "not checked (no count of the records read)"}[c["holds"]]
    if c["holds"] is not None and c.get("counters") == "none delivered by the runner":
        mark += " (from the files; the runner delivered no metrics to cross-check)"
    held = f" + held out {c['held_out']} (valid/)" if c.get("held_out") else ""
    lines.append(f"conservation {mark}: read {c['read']} = kept {c['kept']}{held} + ledger {c['ledger']}")
    d = report.get("dedup")
    if d and "rounds" in d:
        lines.append(f"dedup: {d['bands']} bands x {d['rows']} rows (P[candidate] at J=0.5: {d['s_curve']['0.5']}, "
                     f"0.8: {d['s_curve']['0.8']}); components converged in {d['rounds']} rounds; "
                     "clusters by size: " + ", ".join(f"{k} {v}" for k, v in d["cluster_sizes"].items() if v))
    if report["warc_records_by_type"]:
        lines.append("WARC records: " + ", ".join(f"{t} {n}" for t, n in report["warc_records_by_type"].items()))
    if report["languages"]:
        top = list(report["languages"].items())[:12]
        lines.append("languages kept: " + ", ".join(f"{lang} {n}" for lang, n in top))
    mix = report.get("mix")
    if mix:
        lines.append("mix (token shares): " + ", ".join(
            f"{source} {mix['achieved'].get(source, 0):.3f} (asked {share:.3f})" for source, share in mix["requested"].items())
            + (f"; out of reach: {', '.join(mix['capped_sources'])} (--mix-max-epochs)" if mix.get("capped_sources") else ""))
    plan = report.get("plan")
    if plan:
        lines.append(f"plan {plan['file']}: " + (plan["error"] if "error" in plan else "measured / predicted " + ", ".join(
            f"{k} {v}" for k, v in plan["measured_over_predicted"].items() if v is not None)))
    return "\n".join(lines)
