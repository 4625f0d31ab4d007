"""The main job: WARC files -> extracted, language-tagged Parquet shards + drop ledger + report.

    refinery run --input 'data/warc/*.warc.gz' --output out/ [--config configs/default.yaml] [beam flags]

`run(argv)` is what the console script calls and what tests call. Flags it does
not know are Beam pipeline options (--runner, --direct_num_workers, ...).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from common.settings import add_flags, add_set_flag, flag_values, set_values
from common.version import version
from pipeline.engines.beam_options import check_beam_args, give_freed_buffers_back, loopback_only_grpc
from pipeline.job.config import TABLE, ConfigError, RunConfig, load_config
from pipeline.job.dedup import EXACT, NEAR, ExactDedup, NearDedup, dedup_report
from pipeline.job.finish import Finish
from pipeline.job.ledger import ResolveKeptCopies
from pipeline.job.mix import STAGE as MIX_STAGE
from pipeline.job.mix import Mix
from pipeline.job.outdir import (
    FAILED_REPORTS,
    OutputLock,
    discard_previous,
    lock_note,
    prepare_output,
    remove_finished,
    remove_partial,
    restore_previous,
)
from pipeline.job.output import MANIFEST, collect_shards, collect_signature_files, write_manifest
from pipeline.job.prepare import (
    PREPARED_DIR,
    InputFile,
    Prepare,
    PrepareFiles,
    ReadSigned,
    file_part_key,
    in_phase1,
    part_paths,
    phase1_digest,
    read_json,
    signature_settings,
)
from pipeline.job.schema import LEDGER_SCHEMA, OutputCheck, ledger_row
from pipeline.job.signatures import SIGNATURES_DIR, DedupAgainst, check_old_runs
from pipeline.job.transforms import SOURCE_RECORDS, FileReader, ReadSource
from pipeline.reports import html_report
from pipeline.reports import report as reporting
from pipeline.reports.resources import ResourceUsage
from pipeline.reports.resources import compare as plan_vs_measured
from stages.decontam import DecontaminationIndex, Decontaminator, read_benchmarks
from stages.dedup import DEDUP_AGAINST
from stages.extraction import trafilatura_speedups
from stages.extraction.extract import Extractor
from stages.extraction.warc import STAGE as WARC_STAGE
from stages.langid import STAGE as LANGID_STAGE
from stages.mix import parse_weights
from stages.runner import Step
from stages.table import DOCUMENT, EXTRACT, GLOBAL, READ, WRITE, StageSpec

DEFAULT_RUNNER = "FnApiRunner"  # in-process; DirectRunner first tries to download Prism
DATA_DIR, LEDGER_DIR, REPORT_FILE, ANNEAL_DIR, VALID_DIR = "data", "ledger", "report.json", "anneal", "valid"
HTML_REPORT_FILE = "report.html"
WRITE_STAGE = next(spec.name for spec in TABLE if spec.runs == WRITE)

# Short names kept from before the flags were generated (README examples, users' scripts).
SHORT_FLAGS = {"langid.languages": ["--languages"], "langid.threshold": ["--lang-threshold"],
               "langid.model": ["--lid-model"], "extract.timeout_s": ["--extract-timeout"],
               "extract.max_html_bytes": ["--max-html-bytes"], "decontam.benchmarks": ["--decontaminate"]}
# Job settings with hand-made flags (below): several sources, repeated globs.
HAND_FLAGS = ("inputs", "source", "sources", "inject_errors")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="refinery run", usage="refinery run --input GLOB --output DIR [--config YAML] [options]",
        description="Turn WARC files into clean text shards (Parquet, zstd) with a drop ledger and a report. "
                    "Every setting of configs/default.yaml is a flag: --SECTION-KEY VALUE (a section's `enabled` "
                    "is --SECTION / --no-SECTION); --set SECTION.KEY=VALUE reaches any of them too.",
        epilog="Any other --flag is a Beam pipeline option, e.g. --runner=FnApiRunner (default), "
               "--direct_running_mode=multi_processing --direct_num_workers=2 (local processes), "
               "--runner=PortableRunner --job_endpoint=HOST:PORT, --runner=DataflowRunner --project ... "
               "--setup_file ./setup.py. Outputs: OUTPUT/data/part-*.parquet (documents), "
               "OUTPUT/ledger/part-*.parquet (every dropped document with stage and reason), OUTPUT/report.json.")
    p.add_argument("--input", action="append", metavar="GLOB",
                   help="WARC file glob, local or on a Beam filesystem (gs://, s3://); repeat for more")
    p.add_argument("--config", metavar="YAML", help="YAML config file; flags override it "
                   "(configs/default.yaml has every setting at its default)")
    add_set_flag(p)
    p.add_argument("--source", action="append", metavar="NAME or NAME=GLOB",
                   help="NAME: the `source` value of --input files (default: web). NAME=GLOB (repeatable): another "
                        "source; WARC files are extracted, JSONL[.gz]/Parquet text (e.g. code, books) joins after "
                        "extraction")
    p.add_argument("--inject-error", action="append", metavar="STAGE=URL_PART", dest="inject_errors",
                   help="fault injection (testing): STAGE raises ValueError on documents whose URL contains "
                        "URL_PART; they must end in the ledger as error:ValueError while the job goes on")
    p.add_argument("--no-dedup", action="store_true", help="skip exact and near-duplicate removal")
    p.add_argument("--quiet", action="store_true", help="do not print the funnel or progress")
    p.add_argument("--progress-every", type=float, metavar="SECONDS", default=None,
                   help="seconds between progress updates (default: 1 on a terminal, 10 in a log; 0: none)")
    p.add_argument("--version", action="version", version=f"refinery {version()}")
    add_flags(p, RunConfig, skip=HAND_FLAGS, aliases=SHORT_FLAGS)
    return p


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """Defaults <- --config file <- --set <- flags, checked."""
    overrides: dict[str, Any] = set_values(args.set_values, RunConfig)
    overrides.update(flag_values(args, RunConfig))
    if args.input:
        overrides["inputs"] = args.input
    if args.inject_errors:
        overrides["inject_errors"] = args.inject_errors
    for value in args.source or []:
        if "=" in value:
            overrides.setdefault("sources", []).append(value)
        else:
            overrides["source"] = value
    if args.no_dedup:
        overrides["dedup.exact"] = overrides["dedup.near"] = False
    config = load_config(args.config, overrides)
    if not config.inputs and not config.sources:
        raise ConfigError("no input: pass --input GLOB or --source NAME=GLOB (or `inputs:` in the config file)")
    if not config.output:
        raise ConfigError("no output: pass --output DIR")
    return config


def check_inputs(patterns: Sequence[str], written: Mapping[str, str] | None = None) -> dict[str, int]:
    """Fail before the job starts if a pattern matches nothing (a typo would otherwise give an empty run)
    or names a folder; the distinct files matched, with their sizes. `written`: how the user gave each pattern
    (`--source NAME=GLOB`), for the error line."""
    return {m.path: m.size_in_bytes for m in _match(patterns, written).values()}


def as_written(config) -> dict[str, str]:
    """{glob: the flag that gave it}: --input GLOB, --source NAME=GLOB (--lid-source for calibration's)."""
    written = {glob: f"--input {glob!r}" for glob in config.inputs}
    for spec in config.sources:
        name, glob = spec.split("=", 1)
        flag = "--lid-source" if name.startswith("lid.") else "--source"
        written.setdefault(glob, f"{flag} {name.removeprefix('lid.')}={glob!r}")
    return written


def _match(patterns: Sequence[str], written: Mapping[str, str] | None = None) -> dict:
    files: dict = {}
    for pattern in patterns:
        given = (written or {}).get(pattern, f"--input {pattern!r}")
        if "://" not in pattern and os.path.isdir(pattern):
            raise ConfigError(f"{given} is a folder: give a glob of its files, e.g. "
                              f"'{os.path.join(pattern, '*.warc.gz')}'")
        match = FileSystems.match([pattern])[0]
        found = {m.path: m for m in match.metadata_list}
        if "://" not in pattern:  # entries Beam's listing drops without a word: read (and ledgered) by name
            found.update((path, FileMetadata(path, 0, 0.0)) for path in unlisted_local_entries(pattern, found))
        if not found:
            raise ConfigError(f"{given} matches no files")
        files.update(found)
    return files


def unlisted_local_entries(pattern: str, listed) -> list[str]:
    """Entries a local glob names that Beam's match leaves out because they cannot be stat'ed (symlink loops,
    dangling links): the reader ledgers each as one `read` row, so a skipped input is never silent."""
    prefix = re.match(r"^[^[*?]*", pattern).group(0)
    if prefix == pattern:
        return [pattern] if os.path.islink(pattern) and pattern not in listed else []
    folder = prefix if prefix.endswith(os.sep) else os.path.dirname(prefix) or "."
    regex = re.compile(LocalFileSystem.translate_pattern(pattern))
    return sorted(path for root, _, names in os.walk(folder) for path in (os.path.join(root, n) for n in names)
                  if path not in listed and regex.match(path) and not os.path.isdir(path))


def input_files(config: RunConfig) -> list[InputFile]:
    """Every input file once (the first source naming it reads it), in name order: phase 1's work list."""
    files: dict[str, InputFile] = {}
    written = as_written(config)
    for name, globs in source_groups(config):
        for path, m in _match(globs, written).items():
            files.setdefault(path, InputFile(name, path, m.size_in_bytes, m.last_updated_in_seconds or 0.0))
    return sorted(files.values(), key=lambda f: f.path)


def input_root(files: Sequence[str]) -> str:
    """The folder all input files lie in (ending with '/'), or "": files are named below it."""
    prefix = os.path.commonprefix(list(files))
    cut = prefix.rfind("/")
    return prefix[:cut + 1] if cut >= 0 else ""


def enabled_stages(config: RunConfig) -> list[StageSpec]:
    return [spec for spec in TABLE if spec.is_enabled(config)]


def preflight(config: RunConfig) -> None:
    """Everything every worker will need, checked once here by each enabled stage: models load,
    language codes exist, the extractor runs, optional decoders are installed. A failure is one
    error line, before any work."""
    names = {name for name, _ in source_groups(config)}
    for spec in enabled_stages(config):
        unknown = sorted(set(getattr(spec.settings(config), "sources", ())) - names)
        if unknown:  # a typo would silently run the stage on nothing
            raise ConfigError(f"{spec.section}.sources: no source named {', '.join(map(repr, unknown))} in this run "
                              f"(sources: {', '.join(sorted(names))})")
        spec.preflight(config)
    if config.plan and not os.path.isfile(config.plan):
        raise ConfigError(f"--plan {config.plan}: no such file (write one with `refinery plan ... --save FILE`)")
    if config.dedup_against:
        own = os.path.abspath(config.output)
        if any(os.path.abspath(folder) == own for folder in config.dedup_against):
            raise ConfigError("--dedup-against names this run's own --output; give earlier runs' folders")
        check_old_runs(config.dedup_against, config.dedup)


def _global_step(spec: StageSpec, config: RunConfig, facts: dict[str, Any]):
    """What the job runs for a stage that needs all documents at once (what it loaded goes into `facts`):
    dedup transforms over signatures, decontamination (a per-document stage with the index loaded here),
    the mix (applied while shards are written)."""
    if spec.name == DEDUP_AGAINST:
        return DedupAgainst(config.dedup_against, config.dedup)
    if spec.name == "exact_dedup":
        return ExactDedup()
    if spec.name == "near_dedup":
        return NearDedup(config.dedup)
    if spec.name == "decontaminate":
        c = config.decontam
        index = DecontaminationIndex(read_benchmarks(c.benchmarks), c.n, c.min_words)
        loaded = collections.Counter(item.benchmark for item in index.items)
        facts["decontamination"] = {b: {"items": n, "too_short": index.skipped.get(b, 0)} for b, n in sorted(loaded.items())}
        print("[refinery] decontamination: " + ", ".join(
            f"{b} {n:,} items" + (f" ({index.skipped[b]} too short to match)" if index.skipped.get(b) else "")
            for b, n in sorted(loaded.items())), file=sys.stderr)
        return Step(Decontaminator(index, c))
    if spec.name == MIX_STAGE:
        return Mix(parse_weights(config.mix), config.seed, config.mix_max_epochs)
    raise ConfigError(f"stage {spec.name}: runs over all documents, but the pipeline has no transform for it")


def make_steps(config: RunConfig, facts: dict[str, Any] | None = None, phase: int | None = None) -> list[tuple]:
    """(name, transform) of every enabled stage after reading (of one phase: 1, per input file, or 2),
    in the stage table's order: stages before extraction (on the URL: every document), extraction (HTML
    documents only), the rest; the last is the write check."""
    faults: dict[str, list[str]] = {}
    for spec in config.inject_errors:
        stage_name, _, url_part = spec.partition("=")
        faults.setdefault(stage_name, []).append(url_part)
    steps, per_document = [], []
    for spec in enabled_stages(config):
        if spec.runs in (EXTRACT, DOCUMENT):
            per_document.append(spec.name)
        if phase is not None and in_phase1(spec) != (phase == 1):
            continue
        if spec.runs in (EXTRACT, DOCUMENT):
            steps.append((spec.name, Step(spec.make(config), fail_urls=tuple(faults.get(spec.name, ())),
                                          sources=frozenset(getattr(spec.settings(config), "sources", ())),
                                          html_only=spec.runs == EXTRACT)))
        elif spec.runs == GLOBAL:
            steps.append((spec.name, _global_step(spec, config, {} if facts is None else facts)))
        elif spec.runs == WRITE:  # the last check before a shard
            steps.append((spec.name, Step(OutputCheck())))
    unknown = set(faults) - set(per_document)
    if unknown:
        raise ConfigError(f"--inject-error: no per-document stage named {sorted(unknown)} in this run "
                          f"(stages: {', '.join(per_document)})")
    return steps


def source_groups(config: RunConfig) -> list[tuple]:
    """[(source name, [globs])]: --input globs under --source, plus every --source NAME=GLOB. The reader
    (WARC or text) is chosen per file when it is read, not from the glob."""
    groups: dict[str, list[str]] = {}
    for name, pattern in [(config.source, g) for g in config.inputs] + [tuple(spec.split("=", 1)) for spec in config.sources]:
        groups.setdefault(name.strip(), []).append(pattern)
    return list(groups.items())


def read_sources(p: beam.Pipeline, config: RunConfig, root: str = "") -> tuple:
    """(HTML documents, text documents, read drops) of every source, each read by its own files' reader
    (`refinery run` and `refinery calibrate` read alike)."""
    html_docs, text_docs, drops = [], [], []
    for name, globs in source_groups(config):
        read = FileReader(name, config.warc, config.text, config.extract.max_html_bytes, root)
        html, text, dropped = p | f"Read_{name}" >> ReadSource(globs, read)
        html_docs.append(html)
        text_docs.append(text)
        drops.append(dropped)
    return tuple(pcolls[0] if len(pcolls) == 1 else pcolls | f"All{what}" >> beam.Flatten()
                 for what, pcolls in (("Html", html_docs), ("Text", text_docs), ("ReadDrops", drops)))


def build_pipeline(p: beam.Pipeline, config: RunConfig, files: Sequence[InputFile], root: str = "",
                   facts: dict[str, Any] | None = None, run_id: str = "") -> list[str]:
    """Adds the job to `p`; returns the stage names in order (for the report). Phase 1 prepares each input
    file (pipeline/job/prepare.py), phase 2 runs the global stages and the rest on the prepared documents.
    Input files are named by their path below `root` (see `input_root`); what the stages loaded is added
    to `facts`."""
    phase1 = make_steps(config, facts, phase=1)
    readers = {name: FileReader(name, config.warc, config.text, config.extract.max_html_bytes, root,
                                config.sample_fraction) for name, _ in source_groups(config)}
    prepare = PrepareFiles(config.output, readers, phase1, root, phase1_digest(config), config.dedup,
                           config.ledger_snippet_chars, config.limit, run_id)
    keys = p | "Prepare" >> Prepare(files, prepare, one_task=bool(config.limit))
    names = [spec.name for spec in TABLE if spec.runs == READ] + [name for name, _ in phase1]
    file_index = {file_part_key(f, root): i for i, f in enumerate(files)}  # numbers shards and dedup's nodes
    signed = keys | "ReadSigned" >> beam.ParDo(ReadSigned(config.output, config.dedup, file_index))
    decisions, per_document, mix, write_check, entering = [], [], None, None, None
    for name, step in make_steps(config, facts, phase=2):
        names.append(name)
        if name in (DEDUP_AGAINST, EXACT, NEAR):  # on signatures only
            if name != DEDUP_AGAINST and entering is None:
                entering = signed  # near dedup bands every record that enters exact dedup (NearDedup says why)
            signed, decided = ({"kept": signed, "signed": entering} if name == NEAR else signed) | f"Stage_{name}" >> step
            decisions.append(decided)
        elif isinstance(step, Mix):
            mix = step
        elif name == WRITE_STAGE:
            write_check = step
        else:
            per_document.append((name, step))
    decided = (decisions or [p | "NoDecisions" >> beam.Create([])]) | "AllDecisions" >> beam.Flatten()
    drops, prepared_rows = (keys, decided) | "Finish" >> Finish(config, per_document, mix, write_check, file_index)
    dedup_stages = sum(1 for name in names if name in (EXACT, NEAR))
    phase2_rows = (drops
                   | "ResolveKeptCopies" >> ResolveKeptCopies(rounds=dedup_stages)
                   | "LedgerRows" >> beam.Map(ledger_row, config.ledger_snippet_chars))
    # Two writers: phase 1's rows stream from the parts to their files, never held with phase 2's.
    for name, rows, prefix in (("WriteLedger", phase2_rows, "part-p2"), ("WritePreparedLedger", prepared_rows, "part-p1")):
        _ = rows | name >> beam.io.WriteToParquet(FileSystems.join(config.output, LEDGER_DIR, prefix), LEDGER_SCHEMA,
                                                  codec="zstd", file_name_suffix=".parquet", num_shards=config.num_shards)
    return names


class RunFailed(RuntimeError):
    """The job ran, but a check failed: report.json says which; no manifest was written."""

    exit_code = 3


def run(argv: Sequence[str] | None = None, interrupted: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Run the job; returns the report. Raises ConfigError/OutputError on bad settings (nothing
    written), RunFailed when a check after the job fails (report.json written, no manifest).
    `interrupted()` is asked once the job has run: True (a Ctrl-C that Beam swallowed while the job
    went on) ends the run as interrupted, before anything is published."""
    parser = build_parser()
    args, beam_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    check_beam_args(beam_args, parser)
    config = config_from_args(args)
    files = input_files(config)
    preflight(config)
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = [f"--runner={DEFAULT_RUNNER}", *beam_args]
    options = PipelineOptions(beam_args)
    runner = options.view_as(StandardOptions).runner
    with OutputLock(config.output, take_stale=config.resume):
        prepared = prepare_output(config.output, config.overwrite, config.resume)
        try:
            report = _run_job(config, args, options, runner, files, prepared, interrupted)
        except BaseException as exc:  # a complete earlier output set aside comes back, this run's outputs go
            remove_partial(config.output)
            if restore_previous(config.output) and isinstance(exc, RunFailed):
                raise RunFailed(f"{exc}; the previous output in {config.output} was put back (this run's report: "
                                f"{FAILED_REPORTS[REPORT_FILE]})") from None
            raise
        discard_previous(config.output)
    return report


def _run_job(config: RunConfig, args: argparse.Namespace, options: PipelineOptions, runner, files: list[InputFile],
             prepared: int, interrupted: Callable[[], bool]) -> dict[str, Any]:
    """Build and run the job in the held output folder, then check and publish (`_finish`)."""
    total_bytes = sum(f.size for f in files)
    if not args.quiet:
        print(f"[refinery] {len(files)} input file(s), {total_bytes / 1e6:.1f} MB; runner {runner}"
              + (f"; resuming with {prepared} prepared part(s)" if config.resume else ""), file=sys.stderr)
    started, usage = time.monotonic(), ResourceUsage()
    p = beam.Pipeline(options=options)
    root = input_root([f.path for f in files])
    facts: dict[str, Any] = {}
    facts["run_id"] = uuid.uuid4().hex  # written into the markers this run writes (phase1_files)
    names = build_pipeline(p, config, files, root, facts, facts["run_id"])
    if str(runner).endswith("FnApiRunner"):  # the job's groupings live in this process
        give_freed_buffers_back()
    with loopback_only_grpc():  # FnApiRunner's worker servers listen on 127.0.0.1/::1 only
        result = _run_with_progress(p, options, names, total_bytes, 0 if args.quiet else args.progress_every,
                                    config.output)
    if interrupted():
        raise KeyboardInterrupt  # a Ctrl-C that Beam swallowed while the job went on
    elapsed = time.monotonic() - started
    facts["resources"] = usage.measured()
    try:
        return _finish(config, result, names, runner, elapsed, quiet=args.quiet, root=root,
                       interrupted=interrupted, facts=facts, files=files)
    finally:
        remove_finished(config.output)


def _run_with_progress(p: beam.Pipeline, options: PipelineOptions, names: list[str], total_bytes: int,
                       every_s: float | None, output: str = ""):
    """Run the job while showing progress: from this process's own counts when the workers run in it
    (FnApiRunner, one worker or threads), from the phase-1 markers when they are local processes, else from
    the runner's metrics while it runs (the markers while those say nothing)."""
    from apache_beam.options.pipeline_options import DirectOptions

    from pipeline.job.prepare import MarkerCounts
    from pipeline.reports.progress import TALLY, Display, runner_or_markers, workers_logging_aside

    runner = str(options.view_as(StandardOptions).runner or "")
    direct = options.view_as(DirectOptions)
    local = runner.endswith("FnApiRunner")
    in_process = local and (direct.direct_running_mode in (None, "in_memory") and (direct.direct_num_workers or 1) == 1
                            or direct.direct_running_mode == "multi_threading")
    if every_s == 0:
        result = p.run()
        result.wait_until_finish()
        return result
    markers = MarkerCounts(FileSystems.join(output, PREPARED_DIR))
    if in_process or local:
        if in_process:
            TALLY.on, TALLY.counts = True, {}
        try:
            with contextlib.ExitStack() as stack:
                stream = None if in_process else stack.enter_context(workers_logging_aside())
                with Display(TALLY.snapshot if in_process else markers, names, total_bytes, every_s, stream=stream,
                             nothing_yet="no input file is prepared yet"):
                    result = p.run()
                    result.wait_until_finish()
        finally:
            TALLY.on = False
        return result
    result = p.run()  # other runners return at once and report attempted metrics while they run
    with Display(runner_or_markers(lambda: reporting.attempted_counters(result), markers), names, total_bytes,
                 every_s):
        result.wait_until_finish()
    return result


def _finish(config: RunConfig, result, names: list[str], runner, elapsed: float, quiet: bool,
            root: str = "", interrupted: Callable[[], bool] = lambda: False,
            facts: dict[str, Any] | None = None, files: Sequence[InputFile] = ()) -> dict[str, Any]:
    """Count what reached storage, check it against what was read, write report.json; then, only if
    every check passed, the manifest (the commit point)."""
    counters = reporting.counters(result)
    after_markers = markers(config, files, root)
    shards = collect_shards(config.output, DATA_DIR)
    shard_paths = [FileSystems.join(config.output, s["path"]) for s in shards]
    ledger_files = reporting.list_files(FileSystems.join(config.output, LEDGER_DIR, "part-*.parquet"))
    originals = reporting.column_counts(shard_paths, ["epoch"])  # from the files, not the writers' stats
    if counters is not None:  # a read stage that saw nothing (no such files) stays out of the funnel
        names = [n for n in names if n not in reporting.READ_STAGES or counters.get(f"{n}.in", 0)]
        if not counters.get(f"{WARC_STAGE}.in", 0):
            names = [n for n in names if n != Extractor.name]  # text sources alone: nothing to extract
    valid_dir = FileSystems.join(config.output, VALID_DIR)
    valid_shards = collect_shards(valid_dir, DATA_DIR) if config.holdout_fraction else []
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
    _add_sections(config, report, counters, by_source, valid_shards)
    # per language seen: the language-ID threshold applied and where it came from (file, user, default)
    langid = next(spec for spec in TABLE if spec.name == LANGID_STAGE).make(config)
    seen = {*report["languages"], *(lang for (lang,) in reporting.column_counts(ledger_files, ["lang"]) if lang)}
    report["langid_thresholds"] = {lang: langid.applied(lang, config.user_settings) for lang in sorted(seen)}
    note = lock_note(config.output)
    if note:
        report["lock"] = note
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
    if report["kept"] == 0:
        print("[refinery] WARNING: this run kept 0 documents (see the funnel above and the ledger); "
              "--strict makes that an error", file=sys.stderr)
    if report.get("mix", {}).get("capped_sources"):
        print(f"[refinery] warning: the mix shares of {', '.join(report['mix']['capped_sources'])} cannot be "
              f"reached with at most {config.mix_max_epochs} copies per document "
              f"(achieved {report['mix']['achieved']})", file=sys.stderr)
    if problems:
        raise RunFailed(f"run failed its checks, no manifest written ({REPORT_FILE} has details): " + "; ".join(problems))

    extra = {"config": config.to_dict(), "refinery_version": version(), "extraction": trafilatura_speedups.versions(),
             "signatures": signature_settings(config.dedup)}
    if config.holdout_fraction:
        write_manifest(valid_dir, valid_shards, dict(extra, split=VALID_DIR))
        extra[VALID_DIR] = {k: report["valid"][k] for k in ("manifest", "rows", "tokens", "fraction")}
    if config.anneal_fraction:
        anneal = FileSystems.join(config.output, ANNEAL_DIR)
        anneal_manifest = write_manifest(anneal, collect_shards(anneal, DATA_DIR), extra)
        extra["anneal"] = {"manifest": f"{ANNEAL_DIR}/manifest.json", "rows": anneal_manifest["rows"],
                           "tokens": anneal_manifest["tokens"]}
        report["anneal"] = dict(extra["anneal"], fraction_of_tokens=round(extra["anneal"]["tokens"] / max(tokens, 1), 4),
                                requested_fraction=config.anneal_fraction)
        reporting.write_json(FileSystems.join(config.output, REPORT_FILE), report)
    if interrupted():
        raise KeyboardInterrupt  # a Ctrl-C during the checks: publish nothing
    # last: its presence means every check passed; it lists the signature files --dedup-against checks
    write_manifest(config.output, shards, dict(extra, signature_files=collect_signature_files(config.output)))
    if not quiet:
        print(f"shards: {FileSystems.join(config.output, DATA_DIR)} ({len(shards)} file(s)); "
              f"ledger: {FileSystems.join(config.output, LEDGER_DIR)}; "
              f"report: {FileSystems.join(config.output, REPORT_FILE)}; {elapsed:.1f} s")
    return report


def markers(config: RunConfig, files: Sequence[InputFile], root: str) -> dict[str, Any]:
    """{part key: its phase-1 marker, None where there is none}: each written by the task that read the file."""
    prepared = FileSystems.join(config.output, PREPARED_DIR)
    keys = [file_part_key(file, root) for file in files]
    return {key: read_json(part_paths(prepared, key)["done.json"]) for key in keys}


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
                  by_source: dict[str, dict[str, int]], valid_shards: list[dict[str, Any]]) -> None:
    """The report's mix, valid split and dedup sections, for runs that have them."""
    tokens = report["output"]["tokens"]
    if config.mix:
        report["mix"] = {"requested": parse_weights(config.mix),
                         "achieved": {k: round(v["tokens"] / max(tokens, 1), 4) for k, v in sorted(by_source.items())},
                         "max_epochs": config.mix_max_epochs,
                         "capped_sources": sorted(k.split(".", 3)[3] for k, v in (counters or {}).items()
                                                  if k.startswith(f"{MIX_STAGE}.note.capped.") and v)}
    if config.holdout_fraction:
        report["valid"] = {"manifest": f"{VALID_DIR}/{MANIFEST}", "rows": report["held_out"],
                           "tokens": sum(s["tokens"] for s in valid_shards), "fraction": config.holdout_fraction,
                           "counted": None if counters is None else counters.get("holdout.valid", 0),
                           "written": sum(s["rows"] for s in valid_shards)}
    if config.dedup.exact or config.dedup.near:
        report["dedup"] = dedup_report(config.dedup, counters or {})


def _write_html_report(config: RunConfig, report: dict[str, Any]) -> None:
    """report.html, for every run that got this far; a bug in drawing it must not withhold a correct output."""
    try:
        html_report.write(FileSystems.join(config.output, HTML_REPORT_FILE), report, config.output, config)
    except Exception as exc:
        print(f"[refinery] warning: {HTML_REPORT_FILE} not written: {type(exc).__name__}: {exc}", file=sys.stderr)


def _checks(config: RunConfig, report: dict[str, Any], counters: dict[str, int] | None,
            shards: list[dict[str, Any]]) -> list[str]:
    """Why this run's output must not be published (empty when it may)."""
    problems = []
    written = sum(s["rows"] for s in shards)
    if written != report["output"]["rows"]:
        problems.append(f"shard writers reported {written} rows but the shard files hold {report['output']['rows']}")
    if report.get("dedup", {}).get("converged") is False:
        problems.append(f"near-duplicate clustering did not converge in {config.dedup.max_rounds} rounds: "
                        "raise dedup.max_rounds")
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
            if not counters.get(f"{SOURCE_RECORDS}{name}", 0):
                problems.append(f"source {name!r} yielded no records: its files hold no WARC response, JSONL or "
                                "Parquet record (the ledger's `read` rows say why)")
    if config.strict and report["kept"] == 0:
        problems.append("the run kept 0 documents (--strict)")
    return problems
