"""`refinery plan`: what a run will cost, predicted before it starts from a measured sample.

    refinery plan --input 'crawl/*.warc.gz' [--sample 200] [--config YAML] [--save plan.json]
    refinery run --input 'crawl/*.warc.gz' --output out/ --plan plan.json   # report.json: predicted vs measured

The sample (about --sample records drawn from all through up to 8 input files spread over the list, or with
--sample-from head their first records) runs through phase 1 in
this process exactly as the job runs it (the PrepareFile task, pipeline/job/prepare.py), then through phase 2's
FinishPart and WritePart tasks (pipeline/job/finish.py) over the parts it wrote. Its per-input-byte costs scale to the whole input, and its per-page costs to a named scale
(one Common Crawl snapshot by default). What the sample cannot show is stated as an assumption.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from common.settings import add_set_flag, error_text, set_values
from pipeline.counters import BYTES_READ, capture_counts
from pipeline.job.config import ConfigError, load_config
from pipeline.job.parts import part_paths, read_rows
from pipeline.job.prepare import READ_COUNTERS, phase1_digest
from pipeline.job.schema import SIGNATURE_SCHEMA, document_from_part

# One Common Crawl snapshot (e.g. CC-MAIN-2024-22: ~90,000 WARC files of ~1 GB, ~2.7-3.1 billion pages).
SNAPSHOT = {"name": "one Common Crawl snapshot", "files": 90_000, "pages": 3_000_000_000}
SAMPLE_FILES = 8
# Per-record costs are heavy-tailed (a page cut at the crawler's 1 MiB cap costs ~50 typical ones), phase 1's peak
# memory is its fullest chunk of documents, and a crawl file's neighbouring records come from the same few sites: on a
# Common Crawl-sized file (bench/crawl_rehearsal.py phase1) 1,000 records from its start predicted 1/1.30 of the
# prepared bytes (windows of 1,000 records in a row range 0.84-1.18x of the file's text per input byte, p5-p95; 1,000
# records drawn across it 0.92-1.09x); see bench/RESULTS.md "Crawl rehearsal"
SAMPLE_RECORDS = 1000
# The job run on its first records costs more a record than its tasks timed alone (on the bench WARC, 2026-12-08:
# 14.5 against 9 ms; a whole run costs more still, 21 ms, so the plan stays a lower bound there): the tasks'
# CPU is scaled by that ratio, measured per plan on this many records.
HEAD_RUN_RECORDS = 100
HEAD_RECORDS = 200  # read (no stages) from the start of each sampled file: its records per byte set the spread share
# Phase 2 shuffles no texts (pipeline/job/finish.py): a slim signature record per document goes through exact
# dedup's grouping and near dedup's placement join (--dedup-against's join takes the whole record), its band
# keys through the buckets.
SIGNED_SHUFFLES = 2
SIGNED_RECORD_BYTES = 110  # slim, packed: id, part key, node number, exact key, quality, length, tokens
KEY_RECORD_BYTES = 20      # one band entry as shuffled: 12-byte digest + 8-byte node number (packed per group)
EDGE_RECORD_BYTES = 80     # one (id, id) edge
COMPONENT_ROUNDS = 4       # rounds that still carry edges (bench/cc_rounds.py: most settle in 2-4)
OCCURRENCE_RECORD_BYTES = 77  # paragraph dedup: one (hash, occurrence) as Beam's coder packs it
# paragraph dedup's phase-2 memory per paragraph hash (bench/paragraph_scale.py: 170 B at 1M documents with owners
# chosen per paragraph; 370 B at 100,000 since they are chosen per group of documents, 2026-12-08)
PARAGRAPH_BYTES_PER_HASH = 370
PHASE2_BYTES_PER_DOCUMENT = 900  # peak memory of one local process per document (bench/run_scale.py, 300k -> 1M)
# --robots (pipeline/job/globals/robots.py): each document's (host, id, part, scheme, URL, fetch date) is grouped by host, and
# its whole signature record joins the decisions by id group; the captures are shuffled by host and once more by
# redirect target, decompressed (a robots WARC's gzip members shrink robots.txt text about 4x)
ROBOTS_PAGE_RECORD_BYTES = 200
SIGNED_FULL_RECORD_BYTES = 300     # with its band digests (the slim record is SIGNED_RECORD_BYTES)
ROBOTS_EXPANSION = 4
ROBOTS_BYTES_PER_DOCUMENT = 1400  # one local process's memory for the join (bench/robots_join.py: 1 M hosts, 3 M
                                  # pages, 4.1 GB over the same pages without it)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refinery plan", description=__doc__.split("\n\n")[0])
    p.add_argument("--input", action="append", required=True, metavar="GLOB", help="input files (repeatable)")
    p.add_argument("--source", default="web", help="source name of --input files (default: web)")
    p.add_argument("--config", metavar="YAML", help="the run's config file (phase-1 costs depend on it)")
    add_set_flag(p)
    p.add_argument("--sample", type=int, default=SAMPLE_RECORDS, metavar="N",
                   help=f"records to measure (default: {SAMPLE_RECORDS})")
    p.add_argument("--sample-from", choices=("spread", "head"), default="spread",
                   help="spread (default): records drawn from all through each sampled file, which is read whole "
                        "(~18 CPU s a 1 GB WARC); head: its first records only (quicker, and as good as the file's "
                        "start is like the rest)")
    p.add_argument("--scale-files", type=int, default=SNAPSHOT["files"], help="files of the named scale")
    p.add_argument("--scale-pages", type=float, default=SNAPSHOT["pages"], help="pages of the named scale")
    p.add_argument("--save", metavar="JSON", help="write the plan here (for `refinery run --plan`)")
    p.add_argument("--robots", action="append", default=[], metavar="GLOB",
                   help="the run's robots.txt captures (as `refinery run --robots`): the host join is planned too")
    return p


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        overrides = set_values(args.set_values, type(load_config()))
        overrides.update({"inputs": args.input, "source": args.source})
        if args.robots:
            overrides["robots"] = args.robots
        config = load_config(args.config, overrides)
        if args.sample < 1:
            raise ConfigError("--sample must be >= 1")
        plan = make_plan(config, args.sample, args.scale_files, args.scale_pages, args.sample_from == "spread")
        print(format_plan(plan))
        if args.save:
            with open(args.save, "w", encoding="utf-8") as fh:
                json.dump(plan, fh, indent=2)
    except (ConfigError, OSError) as exc:
        print(f"refinery plan: error: {error_text(exc)}", file=sys.stderr)
        return 2
    return 0


def make_plan(config, sample: int, scale_files: int, scale_pages: float, spread: bool = True) -> dict[str, Any]:
    from pipeline.job.inputs import input_files, input_root
    from pipeline.job.steps import preflight

    files = input_files(config)
    preflight(config)
    measured = measure_sample(config, files, sample, spread)
    measured["fixed_run"] = measure_fixed_run(config)  # after the sample: a run resets the peak-memory gauge
    measured["head_run"] = measure_fixed_run(config, HEAD_RUN_RECORDS)  # the job's own cost per record (job_factor)
    total_bytes = sum(f.size for f in files)
    if config.robots:  # the captures come with the input: their bytes scale with it
        from apache_beam.io.filesystems import FileSystems

        from pipeline.job.globals.robots import robots_files

        robots_bytes = sum(m.size_in_bytes for path in robots_files(config.robots)
                           for m in FileSystems.match([path])[0].metadata_list)
        measured["robots_bytes_per_input_byte"] = robots_bytes / max(total_bytes, 1)
    whole = predict(measured, total_bytes / measured["bytes_read"], f"{len(files)} input file(s)", files=len(files),
                    input_bytes=total_bytes)
    scale = predict(measured, scale_pages / measured["records"], f"{scale_files:,} files, {scale_pages:,.0f} pages "
                    f"({SNAPSHOT['name']})", files=scale_files,
                    input_bytes=round(scale_pages / measured["records"] * measured["bytes_read"]))
    return {"sample": measured, "input": dict(whole, slurm=slurm_view(whole)), "scale": dict(scale, slurm=slurm_view(scale)),
            "assumptions": assumptions(config, measured), "config_digest": phase1_digest(config),
            "input_root": input_root([f.path for f in files])}


def measure_sample(config, files, sample: int, spread: bool = True) -> dict[str, Any]:
    """Phase 1 on about `sample` records of up to SAMPLE_FILES files spread over the input, then phase 2's
    per-document stages on what passed: CPU seconds, bytes, documents, parts, candidate links. `spread`: the records
    are drawn from all through each file (by id, as --sample-fraction draws them), else they are its first ones."""
    from pipeline.job.inputs import input_root
    from pipeline.job.steps import phase1_task

    step = max(1, len(files) // SAMPLE_FILES)
    picked = files[::step][:SAMPLE_FILES]
    root = input_root([f.path for f in files])
    share = _spread_share(config, picked, root, sample) if spread else 1.0
    run_fraction = config.sample_fraction  # of the records the run itself reads (--sample-fraction)
    cap = None if spread else math.ceil(sample / len(picked))
    with tempfile.TemporaryDirectory(prefix="refinery-plan-") as tmp:
        config = dataclasses.replace(config, output=tmp, sample_fraction=config.sample_fraction * share)
        prepare, _ = phase1_task(dataclasses.replace(config, limit=0), root)
        prepare.setup()  # models load outside the timed part: a worker loads them once
        with capture_counts():  # one record first: the extraction worker has imported everything when timing starts
            prepare.run(picked[0], 1)
        unsampled = _unsampled_cpu(prepare)
        started, wall, children = time.process_time(), time.monotonic(), _children_cpu()
        with capture_counts() as counts:
            keys = [prepare.run(f, cap).key for f in picked]
        # extraction runs in a child; reading past the records outside the sample is the whole files' cost, not theirs
        phase1_cpu = time.process_time() - started + _children_cpu() - children - (_unsampled_cpu(prepare) - unsampled)
        phase1_wall = time.monotonic() - wall
        prepare.teardown()
        phase1_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        parts = [part_paths(tmp, key) for key in keys]
        rows = [row for paths in parts for row in read_rows(paths["docs.parquet"])]
        docs = [document_from_part(row) for row in rows]
        phase2_cpu, phase2_kept = _phase2_parts(config, keys)
        records = sum(counts.get(c, 0) for c in READ_COUNTERS)
        passed = sum(n for name, n in counts.items() if name.endswith(".note.not_sampled"))
        measured = {
            "files": len(picked), "records": records, "drawn": "spread" if spread else "head",
            # the input bytes the sample stands for: a spread sample's share of the files the run would read
            "bytes_read": round(counts.get(BYTES_READ, 0) * records / max(records + passed, 1) / run_fraction
                                if spread else counts.get(BYTES_READ, 0)),
            "documents": len(docs),
            "phase1_cpu_s": round(phase1_cpu, 3), "phase1_wall_s": round(phase1_wall, 3),
            "phase2_cpu_s": round(phase2_cpu, 3), "phase2_kept": phase2_kept,
            "prepared_bytes": sum(os.path.getsize(p) for paths in parts
                                  for kind, p in paths.items() if kind != "done.json"),
            "ledger_bytes": sum(os.path.getsize(paths["ledger.parquet"]) for paths in parts),
            "docs_bytes": sum(os.path.getsize(paths["docs.parquet"]) for paths in parts),
            "signature_bytes": _signature_bytes(rows),
            "candidate_edges": _candidate_edges(rows), "peak_rss_bytes": phase1_rss,
            "paragraph_hashes": sum(len(row["paragraphs"] or ()) for row in rows),  # 0 with paragraph dedup off
            "bands": config.dedup.band_rows()[0],
            # extraction is most of phase 1's cost: the plan holds for this engine (docs/stages.md "Choosing an extraction engine")
            "extract_engine": config.extract.engine}
    if not measured["records"] or not measured["bytes_read"]:
        raise ConfigError("the sample read no records: the input holds no WARC responses or text records")
    return measured


def _spread_share(config, picked, root: str, sample: int) -> float:
    """The share of the picked files' records that makes about `sample`: their records estimated from each file's
    size and the bytes per record of its first HEAD_RECORDS (read only, no stages)."""
    from pipeline.job.steps import file_reader

    records = 0.0
    for file in picked:
        reader = file_reader(config, file.source, root)
        with capture_counts() as counts:
            head = sum(1 for _ in reader.read(file.path, file.size, HEAD_RECORDS))
        consumed = counts.get(BYTES_READ, 0)
        records += head if head < HEAD_RECORDS or not consumed else head * file.size / consumed
    return min(1.0, sample / max(records, 1.0))


def _unsampled_cpu(prepare) -> float:
    return sum(reader.unsampled_cpu_s for reader in prepare.readers.values())


def measure_fixed_run(config, records: int = 1) -> dict[str, Any] | None:
    """CPU and peak memory of the job itself on one record (`refinery run --limit 1`): what a run costs
    besides its documents (loading models, building and executing Beam's graph, writing the outputs); with
    `records`, on its first so many (`records_read`: how many it read)."""
    import contextlib

    from common.settings import to_yaml
    from pipeline.job.run import run

    with tempfile.TemporaryDirectory(prefix="refinery-plan-run-") as tmp:
        path = os.path.join(tmp, "config.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(to_yaml(dataclasses.replace(config, output="", limit=records, plan=None, resume=False, overwrite=False,
                                                 strict=False)))
        try:
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                report = run(["--config", path, "--output", os.path.join(tmp, "out"), "--quiet"])
        except Exception as exc:  # the plan stands without it; its assumptions say so
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    resources = report["resources"]
    return {"cpu_s": round(resources["cpu_hours"] * 3600, 2), "peak_memory_bytes": resources["peak_memory_bytes"],
            "records_read": report["documents_read"]}


def job_factor(m: dict[str, Any]) -> float:
    """How much more CPU a record costs in the job than in its tasks timed alone (at least 1): the run on the first
    records less the run on one, per record, over the sample's tasks per record."""
    fixed, head = m.get("fixed_run") or {}, m.get("head_run") or {}
    if "cpu_s" not in fixed or "cpu_s" not in head or head["records_read"] <= fixed.get("records_read", 1):
        return 1.0
    per_record = (head["cpu_s"] - fixed["cpu_s"]) / (head["records_read"] - fixed.get("records_read", 1))
    tasks_per_record = (m["phase1_cpu_s"] + m["phase2_cpu_s"]) / max(m["records"], 1)
    return round(max(1.0, per_record / tasks_per_record), 3) if tasks_per_record > 0 else 1.0


def _phase2_parts(config, keys: Sequence[str]) -> tuple[float, int]:
    """CPU seconds of phase 2's two tasks over the sample's prepared parts, as the job runs them (FinishPart: read
    the part, the per-document stages, write the finished part; WritePart: the write check, the splits, the shards
    and signatures), and how many documents pass the stages. The mix's and the anneal split's draws need every
    part's totals, so they are left out of the sample (their cost is a hash per document)."""
    from pipeline.job.finish import drain
    from pipeline.job.steps import make_steps, phase2_tasks

    timed = dataclasses.replace(config, mix=None, anneal_fraction=None)
    tasks = phase2_tasks(timed, make_steps(timed, phase=2), {key: i for i, key in enumerate(keys)}, deduplicated=False)
    for task in (tasks.finish, tasks.write):
        task.setup()
    try:
        started = time.process_time()
        kept = sum(drain(tasks.finish.run(key, decided=[])).documents for key in keys)
        for key in keys:
            drain(tasks.write.run(key))
        return time.process_time() - started, kept
    finally:
        for task in (tasks.finish, tasks.write):
            task.teardown()


def _children_cpu() -> float:
    """CPU seconds so far of this process's live child processes (the extraction worker), from /proc."""
    import multiprocessing

    total = 0.0
    for child in multiprocessing.active_children():
        try:
            with open(f"/proc/{child.pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def _candidate_edges(rows) -> int:
    """Star edges LSH buckets give within the sample (one per member beyond the first)."""
    buckets: dict[tuple[int, bytes], int] = {}
    for row in rows:
        for i, digest in enumerate(row["bands"] or ()):
            buckets[(i, digest)] = buckets.get((i, digest), 0) + 1
    return sum(n - 1 for n in buckets.values())


def _signature_bytes(rows) -> int:
    buffer = io.BytesIO()
    table = pa.Table.from_pylist([{k: r[k] for k in SIGNATURE_SCHEMA.names} for r in rows], schema=SIGNATURE_SCHEMA)
    pq.write_table(table, buffer, compression="zstd")
    return len(buffer.getvalue())


def predict(m: dict[str, Any], scale: float, what: str, files: int, input_bytes: int) -> dict[str, Any]:
    """The sample's figures times `scale` (input bytes, or pages, over the sample's)."""
    docs = m["documents"] * scale
    fixed = m.get("fixed_run") or {}
    factor = job_factor(m)
    cpu_s = (m["phase1_cpu_s"] + m["phase2_cpu_s"]) * factor * scale + fixed.get("cpu_s", 0)
    baseline = max(m["peak_rss_bytes"], fixed.get("peak_memory_bytes", 0))  # models, runner
    hashes = m.get("paragraph_hashes", 0) * scale
    robots_memory = docs * ROBOTS_BYTES_PER_DOCUMENT if m.get("robots_bytes_per_input_byte") is not None else 0
    shuffle = docs * (SIGNED_RECORD_BYTES * SIGNED_SHUFFLES + m["bands"] * KEY_RECORD_BYTES) \
        + m["candidate_edges"] * scale * 2 * EDGE_RECORD_BYTES * COMPONENT_ROUNDS + hashes * OCCURRENCE_RECORD_BYTES
    if m.get("robots_bytes_per_input_byte") is not None:  # the host join (ROBOTS_* above)
        shuffle += docs * (ROBOTS_PAGE_RECORD_BYTES + SIGNED_FULL_RECORD_BYTES) \
            + m["robots_bytes_per_input_byte"] * input_bytes * ROBOTS_EXPANSION * 2
    return {
        "what": what, "files": files, "input_bytes": input_bytes, "records": round(m["records"] * scale),
        "documents_after_phase1": round(docs), "cpu_hours": round(cpu_s / 3600, 4),
        "cpu_hours_phase1": round(m["phase1_cpu_s"] * factor * scale / 3600, 4),
        "peak_memory_per_worker_bytes": {"phase1": m["peak_rss_bytes"],
                                         "phase2_one_local_process": round(baseline + docs * PHASE2_BYTES_PER_DOCUMENT
                                                                           + hashes * PARAGRAPH_BYTES_PER_HASH
                                                                           + robots_memory)},
        "prepared_bytes": round(m["prepared_bytes"] * scale),
        "output_bytes_at_most": round((m["docs_bytes"] * m["phase2_kept"] / max(m["documents"], 1) + m["ledger_bytes"]
                                       + m["signature_bytes"]) * scale),
        "phase2_shuffle_bytes": round(shuffle),
    }


MAX_ARRAY_TASKS = 1000        # Slurm's default MaxArraySize is 1001: more files per task beyond it
DASK_WORKER_BYTES = 16e9      # a phase-2 Dask worker's memory, for the suggested cluster size
# A Dask worker's peak grows with its share of the run's documents (the runner's shuffles have 2 partitions per worker
# thread, each task holding its partition): bench/crawl_rehearsal.py on 4 workers, 100 k / 300 k / 1 M documents
# peaked at 487 / 609 / 907 MB (~1.7 KB per document of a worker's share above ~480 MB of models and runtime), 3 M at
# 2,288 MB under a 2.5 GB cap (~2.4 KB: faster than linear; bench/RESULTS.md "Crawl rehearsal"). The larger figure;
# the local process's 900 B per document (PHASE2_BYTES_PER_DOCUMENT) would suggest a third of the workers needed
DASK_BYTES_PER_DOCUMENT = 2400
DASK_WORKER_BASE_BYTES = 480e6


def slurm_view(p: dict[str, Any]) -> dict[str, Any]:
    """`refinery slurm` for a prediction: array tasks, their cost and memory, and phase 2's."""
    files_per_task = max(1, math.ceil(p["files"] / MAX_ARRAY_TASKS))
    tasks = max(1, math.ceil(p["files"] / files_per_task))
    memory = p["peak_memory_per_worker_bytes"]
    phase2_memory = memory["phase2_one_local_process"]
    return {"files_per_task": files_per_task, "array_tasks": tasks,
            "phase1_core_hours": p["cpu_hours_phase1"], "core_hours_per_task": round(p["cpu_hours_phase1"] / tasks, 4),
            "memory_per_task_bytes": round(memory["phase1"] * 1.5),  # --mem with headroom over the measured peak
            "phase2_core_hours": round(p["cpu_hours"] - p["cpu_hours_phase1"], 4),
            "phase2_one_job_memory_bytes": round(phase2_memory * 1.5),
            # measured per worker for dedup's signatures; paragraph dedup's and --robots' memory as the local figure
            "phase2_dask_workers": max(1, math.ceil(p["documents_after_phase1"] * DASK_BYTES_PER_DOCUMENT
                                                    / (DASK_WORKER_BYTES - DASK_WORKER_BASE_BYTES)),
                                       math.ceil(phase2_memory / DASK_WORKER_BYTES))}


def assumptions(config, m: dict[str, Any]) -> list[str]:
    return [
        f"costs scale linearly with input bytes (whole input) or pages (named scale) from a sample of "
        f"{m['records']} records in {m['files']} file(s)"
        + (" drawn from all through each file (their parts compress a little worse than a whole file's, whose "
           "neighbouring pages share a site's text)" if m.get("drawn") == "spread" else ", the first of each file")
        + "; CPU is process time (this process and the extraction "
        f"worker) of the tasks timed alone, times {job_factor(m)} (what a record costs more in the job, from runs on "
        f"the first {(m.get('head_run') or {}).get('records_read', '?')} records and on one), plus once the fixed "
        f"cost of a run measured on one record: {_fixed(m)}",
        "phase 2's grouping steps (dedup's signature records and band entries) are counted as shuffle bytes, not CPU; "
        "decontamination's index build is not counted",
        f"shuffle bytes: no texts; each document's signature record {SIGNED_SHUFFLES} times ({SIGNED_RECORD_BYTES} B), "
        f"{m['bands']} band entries of {KEY_RECORD_BYTES} B each, candidate edges ({m['candidate_edges']} in the sample) "
        f"x 2 directions x {COMPONENT_ROUNDS} component rounds of {EDGE_RECORD_BYTES} B",
        *([f"paragraph dedup: {m['paragraph_hashes'] / max(m['documents'], 1):.1f} paragraph hashes per document in "
           f"the sample, each shuffled once ({OCCURRENCE_RECORD_BYTES} B) and held at {PARAGRAPH_BYTES_PER_HASH} B by "
           "one local process (bench/paragraph_scale.py)"] if m.get("paragraph_hashes") else []),
        *([f"--robots: the captures ({m['robots_bytes_per_input_byte']:.4f} bytes per input byte) shuffled twice at "
           f"{ROBOTS_EXPANSION}x their compressed size, each document's host record ({ROBOTS_PAGE_RECORD_BYTES} B) and "
           f"whole signature record ({SIGNED_FULL_RECORD_BYTES} B) once more; one local process holds "
           f"{ROBOTS_BYTES_PER_DOCUMENT} B a document more (bench/robots_join.py); a host's pages are grouped on one "
           "worker, so the largest site sets that worker's memory (~200 B a page)"]
          if m.get("robots_bytes_per_input_byte") is not None else []),
        "output bytes are an upper bound: a sample shows few of the duplicates a whole crawl holds, so dedup "
        "removes more at scale than in the sample",
        f"phase-2 memory of one local process (FnApiRunner) holds what dedup gathers, {PHASE2_BYTES_PER_DOCUMENT} B "
        "per document (bench/run_scale.py), never texts; a cluster runner spills shuffles to disk and needs only "
        "a partition's share per worker",
    ]


def _fixed(m: dict[str, Any]) -> str:
    fixed = m.get("fixed_run") or {}
    if "cpu_s" not in fixed:
        return f"not measured ({fixed.get('error', 'no run')}), not included"
    return f"{fixed['cpu_s']:.1f} CPU s, {_size(fixed['peak_memory_bytes'])} peak (models, Beam's graph, outputs)"


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n} B"


def _hours(h: float) -> str:
    return f"{h:,.1f} core-hours" if h >= 1 else f"{h * 3600:,.0f} core-seconds"


def format_plan(plan: dict[str, Any]) -> str:
    m = plan["sample"]
    drawn = "drawn across" if m.get("drawn") == "spread" else "from the start of"
    lines = [f"sample: {m['records']} records {drawn} {m['files']} file(s), {_size(m['bytes_read'])} of input; "
             f"{m['documents']} passed phase 1, {m['phase2_kept']} phase 2's per-document stages; "
             f"phase 1 {m['phase1_cpu_s']:.1f} CPU s, phase 2 {m['phase2_cpu_s']:.1f} CPU s"
             + (f"; extract.engine {m['extract_engine']}" if "extract_engine" in m else ""), ""]
    for key in ("input", "scale"):
        p = plan[key]
        memory = p["peak_memory_per_worker_bytes"]
        lines += [f"{p['what']}: {_size(p['input_bytes'])}, ~{p['records']:,} records, "
                  f"~{p['documents_after_phase1']:,} documents after phase 1",
                  f"  CPU: {_hours(p['cpu_hours'])} ({_hours(p['cpu_hours_phase1'])} in phase 1)",
                  f"  peak memory per worker: phase 1 {_size(memory['phase1'])}; phase 2 in one local process "
                  f"{_size(memory['phase2_one_local_process'])}",
                  f"  prepared parts {_size(p['prepared_bytes'])}; output at most {_size(p['output_bytes_at_most'])}; "
                  f"phase-2 shuffle {_size(p['phase2_shuffle_bytes'])}"]
        if "slurm" in p:
            sl = p["slurm"]
            lines += [f"  on Slurm (refinery slurm submit --files-per-task {sl['files_per_task']} "
                      f"--mem {math.ceil(sl['memory_per_task_bytes'] / 1e9)}G): {sl['array_tasks']:,} array task(s), "
                      f"{_hours(sl['phase1_core_hours'])} ({_hours(sl['core_hours_per_task'])} each); phase 2 "
                      f"{_hours(sl['phase2_core_hours'])}, one job with {_size(sl['phase2_one_job_memory_bytes'])} or a "
                      f"Dask cluster of ~{sl['phase2_dask_workers']} worker(s) of {_size(DASK_WORKER_BYTES)}"]
        lines.append("")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in plan["assumptions"]]
    return "\n".join(lines)
