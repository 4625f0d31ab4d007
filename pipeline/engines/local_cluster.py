"""Run `refinery run` on a real multi-process engine on this machine, its servers on loopback only.

    python -m pipeline.engines.local_cluster [--engine beam|dask] [--environment external|loopback] [--timeout S]
                                     [--same-as DIR] [--workers N] [--memory-limit 1.5GB]
                                     [--kill-worker-after S ...] [--kill-scheduler-on GLOB] -- RUN ARGS...

--engine beam (default): Beam's portable Job API, the path Flink, Spark and other portable runners take:
the job is translated to a runner API proto, staged as artifacts and sent to a job service
(`local_job_service_main`), which hands bundles to SDK workers over gRPC: an external worker pool
(`worker_pool_main`, EXTERNAL) or the submitting process (LOOPBACK).

--engine dask: a Dask scheduler and --workers worker processes (`dask scheduler`, `dask worker`, 2 by
default, one thread each, each under --memory-limit: Dask spills to disk at 60 % of it, pauses at 80 % and
its nanny kills the worker at 95 %), the job run on them by pipeline.engines.dask_runner; afterwards the tasks
each worker ran are printed and written to LOG_DIR/dask_tasks.json, and each worker's peak memory (across
restarts) to LOG_DIR/dask_workers.json (pipeline/engines/worker_watch.py). --kill-worker-after S SIGKILLs the
first worker's process S seconds after the job is submitted (repeatable): a node lost mid-run;
--kill-scheduler-on GLOB SIGKILLs the scheduler once a file matches GLOB (the run fails with one line; `--resume`
reuses the committed parts). Workers run with daemon off (the extraction stage starts a child process).

The servers would listen on every interface, so they only start inside a fresh network namespace
holding nothing but loopback (`unshare --net`, needs root or user namespaces): the process re-executes
itself there, and binds 127.0.0.1 besides. It is also the init of a fresh PID namespace, so when it
dies, SIGKILL included, the kernel ends every process started in it; and it dies with this process.
Every wait has a timeout (a crashed worker makes a job hang), and every process started is killed by
process group on every way out, SIGTERM included.
--same-as DIR compares the output with an earlier run's (e.g. the local runner's) and fails if the
shards are not byte-identical or the ledger or funnel differ.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from common.files import write_atomically
from pipeline.engines.worker_watch import WorkerWatch
from stages.processes import die_with_parent

INSIDE = "REFINERY_LOCAL_CLUSTER_NETNS"
JOB_PORT, WORKER_PORT = 8099, 50000  # a private namespace: fixed ports cannot collide
DASK_PORT, DASK_DASHBOARD = 8786, 8787
DASK_WORKERS = 2


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float, name: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with code {proc.returncode} before listening on port {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not listen on port {port} within {timeout:.0f} s")


def _start(cmd: list[str], env: dict, log: str) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def _kill(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # the worker pool forks SDK workers: end the whole group
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class _Terminated(BaseException):
    """SIGTERM/SIGHUP arrived: unwind through every `finally`, which kills what we started."""


def _raise_on_signals() -> None:
    def handler(signum, frame):
        raise _Terminated(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def non_loopback_interfaces() -> list[str]:
    """Network interfaces of this process's namespace other than loopback (/proc/self/net/dev is per
    namespace; /sys/class/net shows the namespace sysfs was mounted in)."""
    try:
        with open("/proc/self/net/dev", encoding="ascii") as fh:
            names = [line.split(":", 1)[0].strip() for line in fh if ":" in line]
    except OSError:
        return ["(cannot read /proc/self/net/dev)"]
    return sorted(name for name in names if name != "lo")


def _inside(args: argparse.Namespace, run_args: Sequence[str]) -> int:
    others = non_loopback_interfaces()
    if others:  # the servers bind every interface: only a loopback-only namespace keeps them private
        print(f"local_cluster: {INSIDE}=1 but this network namespace has interfaces besides loopback "
              f"({', '.join(others)}); refusing to start unauthenticated servers here", file=sys.stderr)
        return 2
    _raise_on_signals()
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    env = dict(os.environ)
    # the worker pool starts SDK workers with the first `python` on PATH: make it this interpreter's
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    os.makedirs(args.log_dir, exist_ok=True)
    started: list[subprocess.Popen] = []
    try:
        nannies: dict[str, int] = {}
        beam_args = (_start_dask(args, env, started, nannies) if args.engine == "dask"
                     else _start_job_service(args, env, started))
        cmd = [sys.executable, "-m", "pipeline.cli", "run", *run_args, *beam_args]
        print(f"[local-cluster] {' '.join(cmd)}", file=sys.stderr, flush=True)
        scheduler = started[0].pid if nannies else None  # _start_dask starts the scheduler first
        watch = WorkerWatch(nannies, args.kill_worker_after, scheduler=scheduler,
                            kill_scheduler_on=args.kill_scheduler_on)
        submit = subprocess.Popen(cmd, env=env, start_new_session=True)
        started.insert(0, submit)
        watch.start()
        try:
            code = submit.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"[local-cluster] the job did not finish within {args.timeout} s (a dead worker makes "
                  f"jobs hang); logs in {args.log_dir}", file=sys.stderr)
            return 124
        finally:
            watch.stop()
            if nannies:
                _report_dask_workers(args, watch)
        try:
            if code == 0 and args.engine == "dask":
                _report_dask_tasks(args.log_dir)
            if code == 0 and args.same_as:
                code = _compare(args.same_as, _output_of(run_args))
        except (OSError, ValueError, KeyError) as exc:  # a missing or unreadable earlier run, a gone scheduler
            from common.settings import error_text

            print(f"[local-cluster] the job finished, but checking it failed: {error_text(exc)}", file=sys.stderr)
            return 1
        return code
    except (_Terminated, KeyboardInterrupt) as exc:
        print(f"[local-cluster] stopped ({exc or 'interrupted'}): servers, workers and submission killed",
              file=sys.stderr)
        return 143
    finally:  # every exit path: the submission (and its extraction child), then the servers and workers
        for proc in started:
            _kill(proc)


def _start_job_service(args: argparse.Namespace, env: dict, started: list) -> list[str]:
    logs = args.log_dir
    job = _start([sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
                  "--port", str(JOB_PORT)], env, os.path.join(logs, "job_service.log"))
    started.append(job)
    _wait_for_port(JOB_PORT, job, 60, "job service")
    beam_args = ["--runner=PortableRunner", f"--job_endpoint=localhost:{JOB_PORT}"]
    if args.environment == "external":
        pool = _start([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                       "--service_port", str(WORKER_PORT)], env, os.path.join(logs, "worker_pool.log"))
        started.append(pool)
        _wait_for_port(WORKER_PORT, pool, 60, "worker pool")
        return [*beam_args, "--environment_type=EXTERNAL", f"--environment_config=localhost:{WORKER_PORT}"]
    return [*beam_args, "--environment_type=LOOPBACK"]


def _start_dask(args: argparse.Namespace, env: dict, started: list, nannies: dict[str, int]) -> list[str]:
    dask = [sys.executable, "-m", "dask"]
    address = f"tcp://127.0.0.1:{DASK_PORT}"
    scheduler = _start([*dask, "scheduler", "--host", "127.0.0.1", "--port", str(DASK_PORT),
                        "--dashboard-address", f"127.0.0.1:{DASK_DASHBOARD}"],
                       env, os.path.join(args.log_dir, "dask_scheduler.log"))
    started.append(scheduler)
    _wait_for_port(DASK_PORT, scheduler, 60, "dask scheduler")
    # daemon off: a daemonic worker process may not start children (the extraction stage does);
    # one thread per worker process, dashboards on explicit loopback ports (or they bind every interface)
    worker_env = dict(env, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    limit = ["--memory-limit", args.memory_limit] if args.memory_limit else []
    for i in range(args.workers):
        nanny = _start([args.worker_python or sys.executable, "-m", "dask", "worker", address, "--host", "127.0.0.1", "--name", f"worker-{i}",
                        "--nthreads", "1", "--nworkers", "1", *limit,
                        "--dashboard-address", f"127.0.0.1:{DASK_DASHBOARD + 1 + i}"],
                       worker_env, os.path.join(args.log_dir, f"dask_worker_{i}.log"))
        started.append(nanny)
        nannies[f"worker-{i}"] = nanny.pid
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(args.workers, timeout=120)
    return ["--runner=pipeline.engines.dask_runner.RefineryDaskRunner", f"--dask_client_address={address}"]


def _report_dask_workers(args: argparse.Namespace, watch: WorkerWatch) -> None:
    from dask.utils import parse_bytes

    logs = {f"worker-{i}": os.path.join(args.log_dir, f"dask_worker_{i}.log") for i in range(args.workers)}
    found = watch.summary(args.memory_limit and parse_bytes(args.memory_limit), logs)
    write_atomically(os.path.join(args.log_dir, "dask_workers.json"), json.dumps(found, indent=1))
    peaks = ", ".join(f"{name} {w['peak_rss_mb']:,} MB ({w['processes']} process(es))"
                      for name, w in found["workers"].items())
    print(f"[local-cluster] peak memory per worker (limit {found['memory_limit_mb'] or 'none'} MB): {peaks}; "
          f"killed by this run: {len(found['kills'])}", file=sys.stderr)


def _report_dask_tasks(log_dir: str) -> None:
    """Tasks each worker ran, asked of the workers through the scheduler (shows the job was spread)."""
    from distributed import Client

    with Client(f"tcp://127.0.0.1:{DASK_PORT}", timeout=60) as client:
        executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
        names = {address: str(info.get("name", address)) for address, info in client.scheduler_info()["workers"].items()}
    tasks = {names.get(address, address): count for address, count in sorted(executed.items())}
    write_atomically(os.path.join(log_dir, "dask_tasks.json"), json.dumps(tasks, indent=1))
    print("[local-cluster] tasks per worker: " + ", ".join(f"{name} {n:,}" for name, n in tasks.items()),
          file=sys.stderr)


def _output_of(run_args: Sequence[str]) -> str:
    from pipeline.job.config import flag_value

    output = flag_value(run_args, "--output")
    if output is None:
        raise ValueError("--same-as needs the run's --output")
    return output


def _compare(expected: str, found: str) -> int:
    from pipeline.job.outdir import compare_outputs

    differences = compare_outputs(expected, found)
    if differences:
        print(f"[local-cluster] output differs from {expected}:\n  " + "\n  ".join(differences), file=sys.stderr)
        return 3  # a failed check, as `refinery run`'s
    print(f"[local-cluster] {found}: shards byte-identical to the local runner's ({expected}); same ledger and funnel")
    return 0


def split_run_args(argv: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(this module's own arguments, the `refinery run` arguments after `--`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        return argv, []
    split = argv.index("--")
    return argv[:split], argv[split + 1:]


def main(argv: Sequence[str] | None = None) -> int:
    argv, run_args = split_run_args(argv)
    p = argparse.ArgumentParser(prog="python -m pipeline.engines.local_cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", choices=("beam", "dask"), default="beam",
                   help="beam: Beam's job service and SDK workers (the portable Job API); dask: a Dask scheduler and "
                        f"{DASK_WORKERS} workers")
    p.add_argument("--environment", choices=("external", "loopback"), default="external",
                   help="with --engine beam: an external worker pool, or workers in the submitting process")
    p.add_argument("--same-as", metavar="DIR", help="an earlier run's output the shards must equal byte for byte")
    p.add_argument("--timeout", type=float, default=900, help="seconds before the submission is abandoned")
    p.add_argument("--workers", type=int, default=DASK_WORKERS, help="with --engine dask: worker processes")
    p.add_argument("--memory-limit", help="with --engine dask: each worker's memory limit (e.g. 1.5GB)")
    p.add_argument("--kill-worker-after", type=float, action="append", default=[], metavar="S",
                   help="with --engine dask: SIGKILL the first worker's process S seconds after submitting (repeatable)")
    p.add_argument("--kill-scheduler-on", metavar="GLOB",
                   help="with --engine dask: SIGKILL the scheduler once a file matches GLOB, e.g. "
                        "'OUT/prepared/*.done.json' (phase 1 under way): the run fails in one line, --resume goes on")
    p.add_argument("--worker-python", metavar="PYTHON",
                   help="with --engine dask: the interpreter the workers run (a node's own environment; the run "
                        "refuses workers whose stage packages differ from the driver's)")
    p.add_argument("--log-dir", default=os.path.join("out", "local-cluster-logs"))
    args = p.parse_args(argv)
    if not run_args:
        p.error("give the `refinery run` arguments after --")
    if args.engine != "dask" and (args.memory_limit or args.kill_worker_after or args.kill_scheduler_on
                                  or args.workers != DASK_WORKERS or args.worker_python):
        p.error("--workers, --memory-limit, --kill-worker-after, --kill-scheduler-on and --worker-python need "
                "--engine dask")
    if args.workers < 1:
        p.error("--workers must be at least 1")
    if os.environ.get(INSIDE) == "1":
        return _inside(args, run_args)
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        print("local_cluster: needs `unshare` and `ip` (util-linux, iproute2) to isolate the servers' ports",
              file=sys.stderr)
        return 2
    env = dict(os.environ, **{INSIDE: "1"})
    # A network namespace (loopback only) and a PID namespace whose init is the inner process: when it dies,
    # however it dies, the kernel kills every process in the namespace (servers, workers, the submission);
    # --kill-child ends it when `unshare` dies, and `unshare` dies with this process (PR_SET_PDEATHSIG), so
    # even a kill -9 of this process leaves nothing running. Its own /proc (a mount namespace of its own):
    # Dask's nanny looks its worker up by PID there.
    cmd = ["unshare", "--net", "--pid", "--mount-proc", "--kill-child", sys.executable, "-m", "pipeline.engines.local_cluster", *argv, "--",
           *run_args]
    if os.geteuid() != 0:
        cmd.insert(1, "--map-root-user")  # an unprivileged user namespace, where the kernel allows it
    child = subprocess.Popen(cmd, env=env, preexec_fn=die_with_parent)
    stopping: list[float] = []

    def forward(signum, frame):  # `unshare` ignores SIGTERM while it waits: tell the namespace's init, which tidies up
        stopping.append(time.monotonic())
        for pid in _children(child.pid):
            os.kill(pid, signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, forward)
    while True:
        try:
            return child.wait(timeout=1)
        except subprocess.TimeoutExpired:
            if stopping and time.monotonic() - stopping[0] > STOP_GRACE_S:  # it did not tidy up: end the namespace
                for pid in _children(child.pid):
                    os.kill(pid, signal.SIGKILL)
        except InterruptedError:
            continue


STOP_GRACE_S = 30


def _children(pid: int) -> list[int]:
    """PIDs whose parent is `pid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


if __name__ == "__main__":
    sys.exit(main())
