"""`refinery run`: WARC files -> extracted, language-tagged Parquet shards + drop ledger + report.

    refinery run --input 'data/warc/*.warc.gz' --output out/ [--config configs/default.yaml] [beam flags]

`run(argv)` is what the console script calls and what tests call. Flags it does not know are Beam
pipeline options (--runner, --direct_num_workers, ...). It parses the flags, matches the inputs
(`inputs`), checks every stage (`steps.preflight`), holds the output folder (`outdir`), builds and runs
the graph (`graph`) with a progress display, and publishes (`publish`).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from common.settings import add_flags, add_set_flag, flag_values, set_values
from common.version import version
from pipeline import storage
from pipeline.job.beam_options import check_beam_args, give_freed_buffers_back, loopback_only_grpc
from pipeline.job.config import ConfigError, RunConfig, load_config
from pipeline.job.graph import build_pipeline
from pipeline.job.inputs import InputFile, input_files, input_root
from pipeline.job.outdir import (
    FAILED_REPORTS,
    REPORT_FILE,
    OutputLock,
    discard_previous,
    prepare_output,
    refuse_missing_plugins,
    remove_finished,
    remove_partial,
    restore_previous,
)
from pipeline.job.publish import RunFailed, publish
from pipeline.job.steps import preflight
from pipeline.reports import report as reporting
from pipeline.reports.resources import ResourceUsage

DEFAULT_RUNNER = "FnApiRunner"  # in-process; DirectRunner first tries to download Prism

# Short names kept from before the flags were generated (README examples, users' scripts).
SHORT_FLAGS = {"langid.languages": ["--languages"], "langid.threshold": ["--lang-threshold"],
               "langid.model": ["--lid-model"], "extract.timeout_s": ["--extract-timeout"],
               "extract.max_html_bytes": ["--max-html-bytes"], "decontam.benchmarks": ["--decontaminate"],
               # a folder `datasets` wrote (to_parquet / to_json) read as text: its columns by name
               "text.field": ["--text-column"], "text.id_field": ["--id-column"], "text.url_field": ["--url-column"],
               "text.date_field": ["--date-column"]}
# Job settings with hand-made flags (below): several sources, repeated globs.
HAND_FLAGS = ("inputs", "source", "sources", "inject_errors")

__all__ = ["DEFAULT_RUNNER", "RunFailed", "build_parser", "config_from_args", "run"]


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
    return checked(load_config(args.config, overrides))


def checked(config: RunConfig) -> RunConfig:
    """A config a run can start from: it names inputs and an output."""
    if not config.inputs and not config.sources:
        raise ConfigError("no input: pass --input GLOB or --source NAME=GLOB (or `inputs:` in the config file)")
    if not config.output:
        raise ConfigError("no output: pass --output DIR")
    return config


def run(argv: Sequence[str] | None = None, interrupted: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Run the job; returns the report. Raises ConfigError/OutputError on bad settings (nothing
    written), RunFailed when a check after the job fails (report.json written, no manifest).
    `interrupted()` is asked once the job has run: True (a Ctrl-C that Beam swallowed while the job
    went on) ends the run as interrupted, before anything is published."""
    parser = build_parser()
    args, beam_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    check_beam_args(beam_args, parser)
    return run_config(config_from_args(args), beam_args, args.quiet, args.progress_every, interrupted)


def run_config(config: RunConfig, beam_args: Sequence[str] = (), quiet: bool = False,
               progress_every: float | None = None, interrupted: Callable[[], bool] = lambda: False) -> dict[str, Any]:
    """Run the job of a checked config (`checked`) with these Beam options; returns the report (see `run`)."""
    beam_args = list(beam_args)
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = [f"--runner={DEFAULT_RUNNER}", *beam_args]
    options = PipelineOptions(beam_args)
    storage.use_options(options)  # an object store's settings (--s3_endpoint_url, ...), for listing the inputs too
    files = input_files(config)
    preflight(config)
    if config.plan:
        from pipeline.reports.resources import read_plan

        try:
            read_plan(config.plan)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    runner = options.view_as(StandardOptions).runner
    with OutputLock(config.output, take_stale=config.resume):
        prepared = prepare_output(config.output, config.overwrite, config.resume)
        try:
            if config.resume:
                refuse_missing_plugins(config.output)
            report = _run_job(config, quiet, progress_every, options, runner, files, prepared, interrupted)
        except BaseException as exc:  # a complete earlier output set aside comes back, this run's outputs go
            remove_partial(config.output)
            if restore_previous(config.output) and isinstance(exc, RunFailed):
                raise RunFailed(f"{exc}; the previous output in {config.output} was put back (this run's report: "
                                f"{FAILED_REPORTS[REPORT_FILE]})") from None
            raise
        discard_previous(config.output)
    return report


def _run_job(config: RunConfig, quiet: bool, progress_every: float | None, options: PipelineOptions, runner,
             files: list[InputFile], prepared: int, interrupted: Callable[[], bool]) -> dict[str, Any]:
    """Build and run the job in the held output folder, then check and publish (`publish`)."""
    total_bytes = sum(f.size for f in files)
    if not quiet:
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
        result = _run_with_progress(p, options, names, total_bytes, 0 if quiet else progress_every,
                                    config.output)
    if interrupted():
        raise KeyboardInterrupt  # a Ctrl-C that Beam swallowed while the job went on
    elapsed = time.monotonic() - started
    facts["resources"] = usage.measured()
    try:
        return publish(config, result, names, runner, elapsed, quiet=quiet, root=root,
                       interrupted=interrupted, facts=facts, files=files)
    finally:
        remove_finished(config.output)


def _run_with_progress(p: beam.Pipeline, options: PipelineOptions, names: list[str], total_bytes: int,
                       every_s: float | None, output: str = ""):
    """Run the job while showing progress: from this process's own counts when the workers run in it
    (FnApiRunner, one worker or threads), from the phase-1 markers when they are local processes, else from
    the runner's metrics while it runs (the markers while those say nothing)."""
    from apache_beam.options.pipeline_options import DirectOptions

    from pipeline.counters import TALLY
    from pipeline.job.parts import MarkerCounts
    from pipeline.reports.progress import Display, runner_or_markers, workers_logging_aside

    runner = str(options.view_as(StandardOptions).runner or "")
    direct = options.view_as(DirectOptions)
    local = runner.endswith("FnApiRunner")
    in_process = local and (direct.direct_running_mode in (None, "in_memory") and (direct.direct_num_workers or 1) == 1
                            or direct.direct_running_mode == "multi_threading")
    if every_s == 0:
        result = p.run()
        result.wait_until_finish()
        return result
    markers = MarkerCounts(output)
    if in_process or local:
        if in_process:
            TALLY.on, TALLY.counts = True, {}
        try:
            with contextlib.ExitStack() as stack:
                stream = None if in_process else stack.enter_context(workers_logging_aside())
                with Display(TALLY.snapshot if in_process else markers, names, total_bytes, every_s, stream=stream,
                             nothing_yet="starting" if in_process else "no input file is prepared yet"):
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


