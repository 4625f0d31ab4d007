"""`refinery slurm`: a run on a Slurm cluster without glue (pipeline/engines/slurm.py says what runs where).

    refinery slurm submit --input 'crawl/*.warc.gz' --output /shared/out [--files-per-task 4]
                          [--partition P] [--time 4:00:00] [--cpus-per-task 2] [--mem 8G] [any `refinery run` flag]
    refinery slurm status /shared/out
    refinery slurm submit ... --resume      # again, after a failed or cancelled task: only what is missing
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

from common import files
from pipeline.job.config import ConfigError

RESOURCE_FLAGS = ("partition", "time", "cpus_per_task", "mem", "account", "qos")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="refinery slurm", description="Run `refinery run` on a Slurm cluster: phase 1 (reading, extraction and the "
        "per-document filters: most of the CPU) as a job array, N input files per task, each task preparing its files "
        "into OUTPUT/prepared/ as a local run does; phase 2 (dedup, the later stages, shards) as one job that starts "
        "when every task succeeded. OUTPUT must be on a filesystem every node sees.")
    sub = p.add_subparsers(dest="action", required=True, metavar="{submit,status}")
    submit = sub.add_parser("submit", help="submit phase 1 (job array) and phase 2 (dependent job)",
                            description="Every flag not listed here is a `refinery run` flag (--input, --output, "
                            "--config, --set, ...; see `refinery run --help`).")
    submit.add_argument("--files-per-task", type=int, default=1, metavar="N",
                        help="input files per array task (default 1; a file is the unit of resumption)")
    for flag in RESOURCE_FLAGS:
        submit.add_argument(f"--{flag.replace('_', '-')}", metavar="VALUE",
                            help=f"passed to sbatch as --{flag.replace('_', '-')} (both phases)")
    submit.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                        help="any other sbatch option, e.g. --sbatch-arg=--constraint=cpu (repeatable)")
    submit.add_argument("--phase2-dask-workers", type=int, default=0, metavar="N",
                        help="run phase 2 on a Dask cluster of N worker jobs that dask-jobqueue submits (pip install "
                             "'refinery[slurm]'); default 0: phase 2 in one job (~900 B of memory per document)")
    submit.add_argument("--phase2-dask-memory", default="8GB", metavar="SIZE", help="memory of each Dask worker job")
    submit.add_argument("--phase2-dask-cores", type=int, default=1, metavar="N",
                        help="cores of each Dask worker job (one single-threaded worker process each)")
    submit.add_argument("--phase2-dask-wait", type=float, default=1800, metavar="SECONDS",
                        help="how long phase 2 waits for its Dask workers to start")
    submit.add_argument("--python", default=sys.executable,
                        help="the Python with refinery installed, as the nodes see it (default: this one)")
    status = sub.add_parser("status", help="which array tasks are done, running, pending or failed (with log tails)")
    status.add_argument("output")
    task = sub.add_parser("task", help=argparse.SUPPRESS)  # what an array task runs
    task.add_argument("output")
    task.add_argument("submission", type=int)
    task.add_argument("index", type=int)
    phase2 = sub.add_parser("phase2", help=argparse.SUPPRESS)  # what the phase-2 job runs
    phase2.add_argument("output")
    return p


def main(argv: Sequence[str]) -> int:
    from pipeline.engines import slurm

    args, run_args = build_parser().parse_known_args(list(argv))
    try:
        if args.action == "task":
            return slurm.run_task(args.output, args.submission, args.index)
        if args.action == "phase2":
            from pipeline.commands.run import main as run_command

            return slurm.run_phase2(args.output, run_command)
        if args.action == "status":
            print(slurm.format_status(slurm.status(args.output)))
            return 0
        return _submit(args, run_args)
    except ConfigError as exc:
        print(f"refinery slurm: error: {exc}", file=sys.stderr)
        return 2


def _submit(args: argparse.Namespace, run_args: list[str]) -> int:
    from pipeline.engines import slurm
    from pipeline.job.run import build_parser as run_parser
    from pipeline.job.run import config_from_args
    from pipeline.job.steps import preflight

    run_ns, beam_args = run_parser().parse_known_args(run_args)
    config_text = slurm.read_config_text(run_ns.config)  # once: a pipe gives it once, and the tasks read this copy
    with tempfile.TemporaryDirectory(prefix="refinery-slurm-") as tmp:
        if config_text is not None:
            run_ns.config = os.path.join(tmp, "config.yaml")
            files.write_atomically(run_ns.config, config_text)
        config = config_from_args(run_ns)
    if config.limit:
        raise ConfigError("--limit reads the files one after another in one task: run it locally")
    if args.files_per_task < 1:
        raise ConfigError("--files-per-task must be >= 1")
    preflight(config)  # a bad setting fails here, not in every array task
    resources = [f"--{flag.replace('_', '-')}={getattr(args, flag)}" for flag in RESOURCE_FLAGS
                 if getattr(args, flag)] + list(args.sbatch_arg)
    dask = None
    if args.phase2_dask_workers:
        try:
            import dask_jobqueue  # noqa: F401
        except ImportError:
            raise ConfigError("--phase2-dask-workers needs dask-jobqueue: pip install 'refinery[slurm]'") from None
        dask = {"workers": args.phase2_dask_workers, "memory": args.phase2_dask_memory,
                "cores": args.phase2_dask_cores, "wait_s": args.phase2_dask_wait}
    submitted = slurm.submit(run_args, config, args.files_per_task, resources, args.python, dask, config_text)
    tasks = len(submitted["tasks"])
    print(f"phase 1: job {submitted['phase1']}, {tasks} array task(s)" if tasks else
          "phase 1: every input file is prepared already")
    print(f"phase 2: job {submitted['phase2']}" + (f" (after job {submitted['phase1']} succeeds)" if tasks else ""))
    print(f"follow it: refinery slurm status {config.output}")
    return 0
