"""After the job: count what reached storage, check it against what was read, write report.json and
report.html; then, only if every check passed, the manifests (the commit point of a run)."""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from common.version import version
from pipeline.counters import HOLDOUT_VALID, REHYDRATE_REPEATS, entered, source_records
from pipeline.job.config import TABLE, RunConfig
from pipeline.job.globals import stage_class
from pipeline.job.inputs import InputFile, source_groups
from pipeline.job.outdir import (
    ANNEAL_DIR,
    CARD_FILE,
    DATA_DIR,
    HTML_REPORT_FILE,
    LEDGER_DIR,
    PREPARED_DIR,
    REPORT_FILE,
    SIGNATURES_DIR,
    VALID_DIR,
    lock_note,
)
from pipeline.job.output import (
    MANIFEST,
    collect_anneal_top,
    collect_shards,
    collect_signature_files,
    edits_report,
    write_manifest,
)
from pipeline.job.parts import file_part_key, part_paths
from pipeline.job.prepare import paragraph_settings, signature_settings
from pipeline.job.schema import DOCUMENT_SCHEMA
from pipeline.reports import html_report
from pipeline.reports import report as reporting
from pipeline.reports.card import dataset_card
from pipeline.reports.resources import compare as plan_vs_measured
from pipeline.reports.wet import wet_vs_warc
from pipeline.storage import read_json, write_atomically
from stages.extraction import trafilatura_speedups
from stages.extraction.extract import Extractor
from stages.extraction.warc import STAGE as WARC_STAGE
from stages.extraction.wet import STAGE as WET_STAGE
from stages.langid import STAGE as LANGID_STAGE
from stages.optout.agents import LIST_VERSION as AGENT_LIST_VERSION
from stages.optout.signals import STAGE as OPTOUT_STAGE
from stages.table import GLOBAL, plugins

OPTOUT_STAGES = [spec.name for spec in TABLE if spec.section == OPTOUT_STAGE]  # the signals and robots.txt


class RunFailed(RuntimeError):
    """The job ran, but a check failed: report.json says which; no manifest was written."""

    exit_code = 3


def publish(config: RunConfig, result, names: list[str], runner, elapsed: float, quiet: bool,
            root: str = "", interrupted: Callable[[], bool] = lambda: False,
            facts: dict[str, Any] | None = None, files: Sequence[InputFile] = ()) -> dict[str, Any]:
    """Count what reached storage, check it against what was read, write report.json; then, only if
    every check passed, the manifest (the commit point)."""
    counters = reporting.counters(result)
    shards = collect_shards(config.output, DATA_DIR)
    valid_shards = collect_shards(FileSystems.join(config.output, VALID_DIR), DATA_DIR) if config.holdout_fraction else []
    report = build_report(config, result, counters, names, shards, valid_shards, runner, elapsed, root, facts, files)
    anneal_shards = collect_shards(FileSystems.join(config.output, ANNEAL_DIR), DATA_DIR) if config.anneal_fraction else []
    if config.anneal_fraction:
        report["anneal"] = _anneal_report(config, report, anneal_shards)
    problems = _checks(config, report, counters, shards)
    report["status"] = "failed" if problems else "ok"
    report["problems"] = problems
    reporting.write_json(FileSystems.join(config.output, REPORT_FILE), report)
    _write_html_report(config, report)
    if not quiet:
        print(reporting.format_funnel(report))
        prepared = report["prepared"]
        print(f"[refinery] phase 1: {prepared['files_prepared']} file(s) prepared, {prepared['files_reused']} reused"
              + (f", {prepared['files_redone']} redone (input or phase-1 settings changed)"
                 if prepared["files_redone"] else ""), file=sys.stderr)
    _warn(config, report)
    if problems:
        raise RunFailed(f"run failed its checks, no manifest written ({REPORT_FILE} has details): " + "; ".join(problems))
    split_bytes = {split: sum(s["bytes"] for s in files)
                   for split, files in (("train", shards), ("validation", valid_shards), ("anneal", anneal_shards))}
    write_atomically(FileSystems.join(config.output, CARD_FILE),  # checks passed: a card
                     dataset_card(report, DOCUMENT_SCHEMA, version(), split_bytes).encode("utf-8"))
    _write_manifests(config, report, shards, valid_shards, anneal_shards, interrupted)
    if not quiet:
        print(f"shards: {FileSystems.join(config.output, DATA_DIR)} ({len(shards)} file(s)); "
              f"ledger: {FileSystems.join(config.output, LEDGER_DIR)}; "
              f"report: {FileSystems.join(config.output, REPORT_FILE)}; {elapsed:.1f} s")
    return report


def _anneal_report(config: RunConfig, report: dict[str, Any], shards: list[dict[str, Any]]) -> dict[str, Any]:
    """report.json's anneal section: its size, caps and largest pages, sites and languages."""
    rows, tokens = sum(s["rows"] for s in shards), sum(s["tokens"] for s in shards)
    return {"manifest": f"{ANNEAL_DIR}/manifest.json", "rows": rows, "tokens": tokens,
            "fraction_of_tokens": round(tokens / max(report["output"]["tokens"], 1), 4),
            "requested_fraction": config.anneal_fraction,
            "caps": {"page": config.anneal_max_page_share, "site": config.anneal_max_site_share,
                     "language_excess": config.anneal_max_language_excess},
            "largest": collect_anneal_top(config.output, tokens)}


def _warn(config: RunConfig, report: dict[str, Any]) -> None:
    anneal = report.get("anneal")
    if anneal is not None and not anneal["rows"] and report["kept"]:
        print(f"[refinery] warning: the anneal split is empty: too few pages score >= {config.anneal_min_quality} "
              f"for a split where no page holds more than {config.anneal_max_page_share} of its tokens (lower "
              "--anneal-min-quality or raise --anneal-max-page-share)", file=sys.stderr)
    if report["kept"] == 0:
        print("[refinery] WARNING: this run kept 0 documents (see the funnel above and the ledger); "
              "--strict makes that an error", file=sys.stderr)
    if report.get("mix", {}).get("capped_sources"):
        print(f"[refinery] warning: the mix shares of {', '.join(report['mix']['capped_sources'])} cannot be "
              f"reached with at most {config.mix_max_epochs} copies per document "
              f"(achieved {report['mix']['achieved']})", file=sys.stderr)


def _write_manifests(config: RunConfig, report: dict[str, Any], shards: list[dict[str, Any]],
                     valid_shards: list[dict[str, Any]], anneal_shards: list[dict[str, Any]],
                     interrupted: Callable[[], bool]) -> None:
    """valid/ and anneal/ manifests, then the output's: the last file a run writes."""
    valid_dir = FileSystems.join(config.output, VALID_DIR)
    extra = {"config": config.to_dict(), "refinery_version": version(), "extraction": trafilatura_speedups.versions(),
             "signatures": signature_settings(config.dedup),
             "paragraph_signatures": paragraph_settings(config.paragraph_dedup)}
    installed = plugins()  # stages and formats of other packages, with their versions (the corpus depends on them)
    if installed:
        extra["plugins"] = installed
    if config.optout.enabled:  # what the corpus honoured: the agent list (its version) and the agents chosen
        extra["optout"] = {k: report["optout"][k] for k in ("agent_list", "agents", "require_license", "robots")}
    if config.holdout_fraction:
        write_manifest(valid_dir, valid_shards, dict(extra, split=VALID_DIR))
        extra[VALID_DIR] = {k: report["valid"][k] for k in ("manifest", "rows", "tokens", "fraction")}
    if config.anneal_fraction:
        write_manifest(FileSystems.join(config.output, ANNEAL_DIR), anneal_shards, extra)
        extra["anneal"] = {k: report["anneal"][k] for k in ("manifest", "rows", "tokens")}
    if interrupted():
        raise KeyboardInterrupt  # a Ctrl-C during the checks: publish nothing
    # last: its presence means every check passed; it lists the signature files --dedup-against checks
    write_manifest(config.output, shards, dict(extra, signature_files=collect_signature_files(config.output)))

def build_report(config: RunConfig, result, counters: dict[str, int] | None, names: list[str],
                 shards: list[dict[str, Any]], valid_shards: list[dict[str, Any]], runner, elapsed: float, root: str,
                 facts: dict[str, Any] | None, files: Sequence[InputFile]) -> dict[str, Any]:
    """report.json's content, from the runner's counters and what the files on storage hold."""
    after_markers = markers(config, files, root)
    shard_paths = [FileSystems.join(config.output, s["path"]) for s in shards]
    ledger_files = reporting.list_files(FileSystems.join(config.output, LEDGER_DIR, "part-*.parquet"))
    originals = reporting.column_counts(shard_paths, ["epoch"])  # from the files, not the writers' stats
    if counters is not None:  # a read stage that saw nothing (no such files) stays out of the funnel
        names = [n for n in names if n not in reporting.READ_STAGES or counters.get(entered(n), 0)]
        if not counters.get(entered(WARC_STAGE), 0):
            names = [n for n in names if n != Extractor.name]  # text sources alone: nothing to extract
    valid_dir = FileSystems.join(config.output, VALID_DIR)
    held_out = reporting.parquet_row_counts([FileSystems.join(valid_dir, s["path"]) for s in valid_shards])
    report = reporting.build_report(
        stages=names, beam_counters=counters,
        shard_rows={"all": originals.get((0,), 0)}, held_out=sum(held_out.values()),  # from the files too
        ledger_rows=reporting.parquet_row_counts(ledger_files),
        ledger_reasons=reporting.column_counts(ledger_files, ["stage", "reason"]),
        records_read=records_read(after_markers, config.limit),
        languages={lang: n for (lang,), n in reporting.column_counts(shard_paths, ["lang"]).items()},
        config=config.to_dict(), runner=str(runner), elapsed_s=elapsed)
    report["shards"] = [{"path": s["path"], "rows": s["rows"]} for s in shards]
    report["stage_times"] = reporting.stage_times(reporting.distributions(result), names)
    report["input_root"] = root  # file names in ids, metadata and the ledger are relative to it
    report.update(facts or {})
    report["resources"] = dict(report.get("resources", {}), **_output_bytes(config, shards, valid_shards),
                               records=report["conservation"]["read"])
    if config.plan:
        report["plan"] = plan_vs_measured(config.plan, report["resources"])
    report["prepared"] = {"folder": PREPARED_DIR, **phase1_files(after_markers, (facts or {}).get("run_id"))}
    rows = sum(originals.values())
    tokens = sum(s["tokens"] for s in shards)
    by_source: dict[str, dict[str, int]] = {}
    for s in shards:
        for k in s["rows_by_source"]:
            entry = by_source.setdefault(k, {"rows": 0, "tokens": 0})
            entry["rows"] += s["rows_by_source"][k]
            entry["tokens"] += s["tokens_by_source"].get(k, 0)
    report["output"] = {"rows": rows, "repeats": rows - report["kept"], "tokens": tokens,
                        "sources": dict(sorted(by_source.items()))}
    _add_sections(config, report, counters, valid_shards)
    # per language seen: the language-ID threshold applied and where it came from (file, user, default)
    langid = next(spec for spec in TABLE if spec.name == LANGID_STAGE).make(config)
    seen = {*report["languages"], *(lang for (lang,) in reporting.column_counts(ledger_files, ["lang"]) if lang)}
    report["langid_thresholds"] = {lang: langid.applied(lang, config.user_settings) for lang in sorted(seen)}
    note = lock_note(config.output)
    if note:
        report["lock"] = note
    return report


def markers(config: RunConfig, files: Sequence[InputFile], root: str) -> dict[str, Any]:
    """{part key: its phase-1 marker, None where there is none}: each written by the task that read the file."""
    keys = [file_part_key(file, root) for file in files]
    return {key: read_json(part_paths(config.output, key)["done.json"]) for key in keys}


def records_read(found: Mapping[str, Any], limit: int | None = None) -> int | None:
    """The records this run's input files held, from their markers: conservation is checked against this, not
    against runner metrics. None when a read file's marker is missing (conservation then cannot be proven: the
    run fails); with --limit the files after the record budget are not read and have none."""
    if any(marker is None for marker in found.values()) and not limit:
        return None
    return sum(marker["records"] for marker in found.values() if marker is not None)


def phase1_files(found: Mapping[str, Any], run_id: str | None) -> dict[str, int]:
    """Files prepared, reused and redone by this run, from the markers (not from runner metrics, which some
    runners do not deliver): a marker this run wrote (its `run`) was prepared, or redone where it replaced
    an earlier one; one it did not write was reused."""
    outcome = {"files_prepared": 0, "files_reused": 0, "files_redone": 0}
    for marker in found.values():
        if marker is None:
            continue
        ours = marker.get("run") == run_id
        outcome["files_reused" if not ours else "files_redone" if marker.get("replaced") else "files_prepared"] += 1
    return outcome


def _output_bytes(config: RunConfig, shards, valid_shards) -> dict[str, int]:
    """Bytes of the prepared parts and of the outputs (shards, ledger, signatures), as `refinery plan` predicts them."""
    def listed(*patterns: str) -> int:
        globs = [FileSystems.join(config.output, pattern) for pattern in patterns]
        return sum(m.size_in_bytes for r in FileSystems.match(globs) for m in r.metadata_list)

    return {"prepared_bytes": listed(f"{PREPARED_DIR}/*.parquet"),
            "output_bytes": listed(f"{LEDGER_DIR}/part-*.parquet", f"{SIGNATURES_DIR}/part-*.parquet")
            + sum(s["bytes"] for s in shards + valid_shards)}


def _add_sections(config: RunConfig, report: dict[str, Any], counters: dict[str, int] | None,
                  valid_shards: list[dict[str, Any]]) -> None:
    """The report's sections for runs that have them: the valid split, rehydration, edits, opt-outs, the global
    stages' own (dedup, mix), WET against WARC."""
    if config.holdout_fraction:
        report["valid"] = {"manifest": f"{VALID_DIR}/{MANIFEST}", "rows": report["held_out"],
                           "tokens": sum(s["tokens"] for s in valid_shards), "fraction": config.holdout_fraction,
                           "counted": None if counters is None else counters.get(HOLDOUT_VALID, 0),
                           "written": sum(s["rows"] for s in valid_shards)}
    if config.rehydrate:
        report["rehydration"] = {"weights": config.rehydrate_weights, "max_epochs": config.mix_max_epochs,
                                 "repeats": None if counters is None else counters.get(REHYDRATE_REPEATS, 0),
                                 "repeats_in_output": report["output"]["repeats"]}
    edits = edits_report(config.output, counters)
    if edits:
        report["edits"] = edits
    if config.optout.enabled:
        report["optout"] = optout_report(config, report)
    for stage in _global_stage_classes(config):  # their own sections (dedup, mix), or what they add to one
        report.update(stage.report(config, counters, report))
    if counters and counters.get(entered(WET_STAGE)) and counters.get(entered(WARC_STAGE)):  # both kinds given
        report["wet_vs_warc"] = wet_vs_warc(
            [FileSystems.join(config.output, s["path"]) for s in report["shards"]],
            reporting.list_files(FileSystems.join(config.output, LEDGER_DIR, "part-*.parquet")))


def optout_report(config: RunConfig, report: dict[str, Any]) -> dict[str, Any]:
    """What honouring opt-outs cost, per signal and language (documents, and tokens: the ledger's value), next to
    what each language kept; the agents honoured and the licences the kept pages state."""
    ledger_files = reporting.list_files(FileSystems.join(config.output, LEDGER_DIR, "part-*.parquet"))
    removed: dict[str, dict[str, dict[str, int]]] = {}
    for path in ledger_files:  # the opt-out rows only, summed by Arrow: a crawl's ledger has billions of rows
        with FileSystems.open(path) as fh:
            table = pq.read_table(fh, columns=["stage", "reason", "lang", "value"],
                                  filters=[("stage", "in", OPTOUT_STAGES)])
        sums = table.group_by(["reason", "lang"]).aggregate([("stage", "count"), ("value", "sum")]).to_pylist()
        for row in sums:
            entry = removed.setdefault(row["reason"], {}).setdefault(row["lang"] or "unknown", {"documents": 0, "tokens": 0})
            entry["documents"] += row["stage_count"]
            entry["tokens"] += int(row["value_sum"] or 0)
    licences: dict[str, int] = {}
    for shard in report.get("shards", []):
        with FileSystems.open(FileSystems.join(config.output, shard["path"])) as fh:
            metadata = pq.read_table(fh, columns=["metadata"]).column("metadata").combine_chunks()
        for count in pc.value_counts(metadata.field("license")).to_pylist():
            key = count["values"] or "none"
            licences[key] = licences.get(key, 0) + count["counts"]
    return {"agents": list(config.optout.agents), "agent_list": AGENT_LIST_VERSION,
            "require_license": config.optout.require_license, "robots": list(config.robots),
            "robots_as_of": config.optout.robots_as_of if config.robots else None,
            "robots_unreadable": [],  # what of the captures could not be read: the robots stage's report
            "removed": {reason: dict(sorted(langs.items())) for reason, langs in sorted(removed.items())},
            "kept_by_language": report["languages"], "licenses_kept": dict(sorted(licences.items()))}


def _write_html_report(config: RunConfig, report: dict[str, Any]) -> None:
    """report.html, for every run that got this far; a bug in drawing it must not withhold a correct output."""
    try:
        html_report.write(FileSystems.join(config.output, HTML_REPORT_FILE), report, config.output, config)
    except Exception as exc:
        print(f"[refinery] warning: {HTML_REPORT_FILE} not written: {type(exc).__name__}: {exc}", file=sys.stderr)


def _global_stage_classes(config: RunConfig) -> list:
    return [stage_class(spec) for spec in TABLE if spec.runs == GLOBAL and spec.is_enabled(config)]


def _checks(config: RunConfig, report: dict[str, Any], counters: dict[str, int] | None,
            shards: list[dict[str, Any]]) -> list[str]:
    """Why this run's output must not be published (empty when it may)."""
    problems = []
    written = sum(s["rows"] for s in shards)
    if written != report["output"]["rows"]:
        problems.append(f"shard writers reported {written} rows but the shard files hold {report['output']['rows']}")
    for stage in _global_stage_classes(config):
        problems += stage.problems(config, report)
    valid = report.get("valid")
    if valid and valid["counted"] is not None and valid["counted"] != valid["rows"]:
        problems.append(f"the holdout counted {valid['counted']} validation documents but valid/ holds {valid['rows']}")
    if valid and valid["written"] != valid["rows"]:
        problems.append(f"valid/ shard writers reported {valid['written']} rows but the files hold {valid['rows']}")
    conservation = report["conservation"]
    if conservation["holds"] is None:
        problems.append("conservation cannot be proven: the prepared part of an input file has no marker")
    elif not conservation["holds"]:
        problems.append(f"documents lost or double-counted: read {conservation['read']} != kept "
                        f"{conservation['kept']} + held out {conservation['held_out']} + ledger {conservation['ledger']} "
                        "(or counters disagree with the ledger)")
    if counters is not None:
        for name, _ in source_groups(config):
            if not counters.get(source_records(name), 0):
                problems.append(f"source {name!r} yielded no records: its files hold no WARC response, JSONL or "
                                "Parquet record (the ledger's `read` rows say why)")
    if config.strict and report["kept"] == 0:
        problems.append("the run kept 0 documents (--strict)")
    return problems
