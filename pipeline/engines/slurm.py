"""Phase 1 as a Slurm job array, phase 2 as a job that depends on it (`refinery slurm`).

Phase 1 (most of a run's CPU: reading and extraction) is one prepared part per input file, committed by
its marker: array task i prepares its share of the files into OUT/prepared/ exactly as a local run does
(same markers, same digest), so a task that failed or was cancelled is just submitted again, and files
already done are skipped. Phase 2 is `refinery run --resume` with the same flags on one node, after every
array task succeeded (`--dependency=afterok`): it finds every part prepared and runs dedup, the later
stages and the shards.

    OUT/slurm/run.json          the run's flags, the files of each task, the jobs submitted
    OUT/slurm/phase1.sh, phase2.sh   the batch scripts (sbatch them by hand if you like)
    OUT/slurm/logs/             phase1-<job>_<task>.out, phase2-<job>.out
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from common import files as safe_files
from pipeline import storage
from pipeline.job.config import ConfigError, RunConfig
from pipeline.job.inputs import InputFile, input_files, input_root
from pipeline.job.outdir import OutputError, OutputLock, prepare_output
from pipeline.job.parts import file_name, file_part_key, marker_identity, part_paths
from pipeline.job.prepare import phase1_digest
from pipeline.storage import read_json

SLURM_DIR = "slurm"
STATE = "run.json"


def slurm_dir(output: str) -> str:
    return os.path.join(output, SLURM_DIR)


def tasks_of(files: Sequence[InputFile], files_per_task: int) -> list[list[str]]:
    """Input files in name order, `files_per_task` to a task."""
    paths = [f.path for f in files]
    return [paths[i:i + files_per_task] for i in range(0, len(paths), files_per_task)]


def missing_files(config: RunConfig, files: Sequence[InputFile]) -> list[InputFile]:
    """The files whose prepared part is not committed for these settings: no marker, or one written for another
    input or other phase-1 settings (`marker_identity`, as phase 1 checks it). The edges' hash and the parts'
    SHA-256 are left to the task and to phase 2, which redo a part that fails them: checking them here would
    read every part of a crawl on the login node."""
    root, digest = input_root([f.path for f in files]), phase1_digest(config)
    out = []
    for f in files:
        marker = read_json(part_paths(config.output, file_part_key(f, root))["done.json"]) or {}
        want = marker_identity(f, file_name(f, root), digest, None)
        if any(marker.get(k) != v for k, v in want.items()):
            out.append(f)
    return out


def batch_script(lines: Sequence[str], options: Sequence[str]) -> str:
    head = ["#!/bin/bash", *(f"#SBATCH {o}" for o in options), "set -euo pipefail"]
    return "\n".join(head + list(lines)) + "\n"


def _needs(tool: str) -> None:
    if shutil.which(tool) is None:
        raise ConfigError(f"`{tool}` not found: run this on a Slurm login node (or put Slurm's commands on PATH)")


def check_controller() -> None:
    """Slurm's commands are here and its controller answers; else one error line, before anything is written."""
    for tool in ("sbatch", "squeue", "sinfo", "scancel"):
        _needs(tool)
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=60)
        answer = done.stderr.strip().splitlines()[-1] if done.returncode != 0 and done.stderr.strip() else ""
        ok = done.returncode == 0
    except subprocess.TimeoutExpired:
        ok, answer = False, "no answer within 60 s"
    if not ok:
        raise ConfigError(f"no Slurm controller answers (sinfo: {answer or 'failed'}); nothing was submitted or "
                          "written. Run this where a cluster's controller is reachable (a login node), or try "
                          "`make slurm-demo`, which starts a one-node cluster on this machine")


def sbatch(script: str, options: Sequence[str]) -> str:
    """Submit `script`; the job id."""
    _needs("sbatch")
    done = subprocess.run(["sbatch", "--parsable", *options, script], capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"sbatch failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]


def read_config_text(path: str | None) -> str | None:
    """The text of the run's --config file, read once (None without one)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read --config {path}: {exc.strerror or exc}") from None


def frozen_config(run_args: Sequence[str], path: str) -> list[str]:
    """`run_args` with their --config pointing at `path` (the copy the submission keeps)."""
    out, skip = [], False
    for arg in run_args:
        if skip:
            skip = False
            continue
        if arg == "--config":
            skip = True
            continue
        if not arg.startswith("--config="):
            out.append(arg)
    return [*out, "--config", path]


def submit(run_args: list[str], config: RunConfig, files_per_task: int, resources: list[str],
           python: str, dask: dict[str, Any] | None = None, config_text: str | None = None) -> dict[str, Any]:
    """Write the batch scripts and submit phase 1 for the files not yet prepared (all of them, the first time)
    and phase 2. With --overwrite the output folder is emptied first (as a local run would), its Slurm folder
    aside; a phase 2 still waiting from an earlier submission is cancelled (its array will never succeed).
    `dask`: phase 2 on a Dask cluster of Slurm jobs (workers, cores, memory per worker), else in its own job.
    `config_text`: the --config file as read at submission; the tasks and phase 2 read a copy of it in OUT/slurm, so
    that the file edited (or a pipe gone) after the submission changes nothing."""
    if "://" in config.output:  # sbatch writes the logs, and the tasks the state, as files on a shared filesystem
        raise ConfigError(f"--output {config.output}: `refinery slurm` keeps its scripts, state and logs in OUT/slurm "
                          "on the cluster's shared filesystem; give a path there (the inputs may be in an object "
                          "store), or run `refinery run` with an object-store --output")
    check_controller()
    if config.overwrite:
        with OutputLock(config.output):
            prepare_output(config.output, overwrite=True)
    elif not config.resume and os.path.exists(os.path.join(config.output, "manifest.json")):
        raise OutputError(f"{config.output} already holds a finished run; pass --resume to run phase 2 again on its "
                          "prepared parts, --overwrite to start over, or choose another --output")
    files = input_files(config)
    todo = missing_files(config, files)
    folder = slurm_dir(config.output)
    os.makedirs(os.path.join(folder, "logs"), exist_ok=True)
    tasks = tasks_of(todo, files_per_task)
    state_path = os.path.join(folder, STATE)
    state = read_json(state_path) or {"submissions": []}
    waiting = [s["phase2"] for s in state["submissions"] if s["phase2"] in queue([s["phase2"]])]
    if waiting:
        subprocess.run(["scancel", *waiting], capture_output=True)
    if config_text is not None:
        kept = os.path.join(os.path.abspath(folder), f"config-{len(state['submissions'])}.yaml")
        safe_files.write_atomically(kept, config_text)
        run_args = frozen_config(run_args, kept)
    state.update(run_args=run_args, files=len(files))
    refinery = [python, "-m", "pipeline.cli"]
    submission: dict[str, Any] = {"tasks": tasks, "phase1": None, "dask": dask, "python": python,
                                  "resources": list(resources)}
    if tasks:
        n = len(state["submissions"])
        phase1 = os.path.join(folder, f"phase1-{n}.sh")
        safe_files.write_atomically(phase1, batch_script(
            [shlex.join([*refinery, "slurm", "task", config.output, str(n)]) + ' "$SLURM_ARRAY_TASK_ID"'],
            ["--job-name=refinery-phase1", f"--output={folder}/logs/phase1-%A_%a.out", *resources]))
        submission["phase1"] = sbatch(phase1, [f"--array=0-{len(tasks) - 1}"])
    phase2 = os.path.join(folder, "phase2.sh")
    safe_files.write_atomically(phase2, batch_script(
        [shlex.join([*refinery, "slurm", "phase2", config.output])],
        ["--job-name=refinery-phase2", f"--output={folder}/logs/phase2-%j.out", *resources]))
    submission["phase2"] = sbatch(phase2, [f"--dependency=afterok:{submission['phase1']}"] if tasks else [])
    state["submissions"].append(submission)
    safe_files.write_atomically(state_path, json.dumps(state, indent=1))
    return submission


def phase2_args(run_args: Sequence[str]) -> list[str]:
    """The run's flags for phase 2: --resume (the parts are this run's), never --overwrite (it would delete them)."""
    return [a for a in run_args if a not in ("--overwrite", "--resume")] + ["--resume"]


def run_task(output: str, submission: int, index: int) -> int:
    """Array task `index` of submission `submission`: prepare its files (a file already prepared is reused)."""
    from pipeline.job.steps import phase1_task

    state = read_state(output)
    config = _run_config(state)
    storage.use_options(_beam_options(state))  # inputs in an object store: its endpoint and keys
    files = input_files(config)
    mine = set(state["submissions"][submission]["tasks"][index])
    prepare, _ = phase1_task(config, input_root([f.path for f in files]))
    prepare.setup()
    try:
        for f in files:
            if f.path in mine:
                prepared = prepare.run(f)
                print(f"[refinery slurm] {'reused' if prepared.reused else 'prepared'} {f.path}: {prepared.records} "
                      f"record(s), part {prepared.key}", flush=True)
    finally:
        prepare.teardown()
    return 0


def run_phase2(output: str, run_command: Callable[[list[str]], int]) -> int:
    """Phase 2's job: `refinery run --resume` with the run's flags (`run_command`, the command's main), in this
    job or, when the submission asked for Dask workers, on a Dask cluster whose workers dask-jobqueue starts as
    Slurm jobs (the scheduler runs here)."""
    state = read_state(output)
    submission = state["submissions"][-1]
    args = phase2_args(state["run_args"])
    dask = submission.get("dask")
    if not dask:
        return run_command(args)
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    options = dict(cores=dask["cores"], processes=1, memory=dask["memory"], python=submission["python"],
                   log_directory=os.path.join(slurm_dir(output), "logs"), job_name="refinery-dask-worker",
                   worker_extra_args=["--nthreads", "1"],  # one thread per process keeps each model copy busy
                   # the extraction stage starts a child process, which a daemonic worker may not
                   job_script_prologue=["export DASK_DISTRIBUTED__WORKER__DAEMON=False"],
                   job_extra_directives=[r for r in submission["resources"] if not r.startswith(("--cpus", "--mem"))],
                   scheduler_options={"dashboard": False})
    with SLURMCluster(**options) as cluster, Client(cluster) as client:
        cluster.scale(jobs=dask["workers"])
        print(f"[refinery slurm] phase 2 on Dask: waiting for {dask['workers']} worker job(s)", flush=True)
        client.wait_for_workers(dask["workers"], timeout=dask["wait_s"])
        return run_command([*args, "--runner=pipeline.engines.dask_runner.RefineryDaskRunner",
                     f"--dask_client_address={cluster.scheduler_address}"])


def read_state(output: str) -> dict[str, Any]:
    """OUT/slurm/run.json as `submit` wrote it; a missing, unreadable or incomplete one is one error line."""
    path = os.path.join(slurm_dir(output), STATE)
    if not os.path.exists(path):
        raise ConfigError(f"{path} not found: no `refinery slurm submit` wrote to {output}")
    state = read_json(path)
    if state is None:
        raise ConfigError(f"{path} is not readable JSON (damaged or cut short): `refinery slurm submit ... --resume` "
                          "with the run's flags writes it again")
    good = (isinstance(state, dict) and isinstance(state.get("run_args"), list) and state.get("submissions")
            and all(isinstance(s, dict) and {"tasks", "phase1", "phase2"} <= s.keys() for s in state["submissions"]))
    if not good:
        raise ConfigError(f"{path} lacks what `refinery slurm submit` writes (run_args, submissions with tasks and "
                          "jobs): `refinery slurm submit ... --resume` with the run's flags writes it again")
    return state


def _beam_options(state: dict[str, Any]):
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipeline.job.run import build_parser

    return PipelineOptions(build_parser().parse_known_args(state["run_args"])[1])


def _run_config(state: dict[str, Any]) -> RunConfig:
    """The run's config from the flags `submit` saved: tasks, phase 2 and status read the same settings."""
    from pipeline.job.run import build_parser, config_from_args

    return config_from_args(build_parser().parse_known_args(state["run_args"])[0])


def queue(job_ids: Sequence[str]) -> dict[str, str]:
    """{job or array task id: state} of those still in Slurm's queue (PENDING, RUNNING, ...)."""
    if not job_ids:
        return {}
    _needs("squeue")
    done = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(job_ids)], capture_output=True,
                          text=True)
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())


def status(output: str) -> dict[str, Any]:
    """Each array task of the last submission (done, running, pending, failed) and phase 2's state, with the
    log tails of what failed."""
    folder = slurm_dir(output)
    state = read_state(output)
    config = _run_config(state)
    files = input_files(config)
    missing = {f.path for f in missing_files(config, files)}
    last = state["submissions"][-1]
    queued = queue([j for j in (last["phase1"], last["phase2"]) if j])
    tasks = []
    for i, paths in enumerate(last["tasks"]):
        task_id = f"{last['phase1']}_{i}"
        if not missing & set(paths):
            where = "done"
        else:
            where = queued.get(task_id, "").lower() or ("pending" if last["phase1"] in queued else "failed")
        tasks.append({"task": i, "files": len(paths), "state": where,
                      "log": _tail(os.path.join(folder, "logs", f"phase1-{task_id}.out")) if where == "failed" else ""})
    manifest = os.path.exists(os.path.join(output, "manifest.json"))
    phase2 = "done" if manifest else queued.get(last["phase2"], "").lower() or "failed"
    return {"files": len(files), "prepared": len(files) - len(missing), "tasks": tasks, "phase2": phase2,
            "phase2_job": last["phase2"], "phase1_job": last["phase1"],
            "phase2_log": _tail(os.path.join(folder, "logs", f"phase2-{last['phase2']}.out")) if phase2 == "failed" else ""}


def _tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError:
        return "(no log)"


def format_status(s: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for t in s["tasks"]:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    lines = [f"input files prepared: {s['prepared']} of {s['files']}",
             f"phase 1 (job {s['phase1_job'] or '-'}): " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                                                             or "nothing to do")]
    for t in s["tasks"]:
        if t["state"] == "failed":
            lines.append(f"  task {t['task']} failed ({t['files']} file(s)); its log ends:")
            lines += ["    " + line for line in t["log"].rstrip().splitlines()]
    lines.append(f"phase 2 (job {s['phase2_job']}): {s['phase2']}")
    if s["phase2"] == "failed":
        lines += ["    " + line for line in s["phase2_log"].rstrip().splitlines()]
    if any(t["state"] == "failed" for t in s["tasks"]) or s["phase2"] == "failed":
        lines.append("resubmit what is missing: refinery slurm submit <the same flags> --resume")
    return "\n".join(lines)
