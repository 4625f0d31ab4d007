"""Submit `refinery run` to a real Beam job service through the portable Job API, on this machine.

    python -m pipeline.local_cluster [--environment external|loopback] [--timeout S] -- RUN ARGS...

This is the path Flink, Spark and other portable runners take: the job is translated to a runner
API proto, staged as artifacts and sent to a job service, which hands bundles to SDK workers over
gRPC. Here the job service is Beam's own (`local_job_service_main`) and the workers come from an
external worker pool (`worker_pool_main`, EXTERNAL) or from the submitting process (LOOPBACK).

Both servers listen on all interfaces, so they only start inside a fresh network namespace holding
nothing but loopback (`unshare -n`, needs root or user namespaces): the process re-executes itself
there. Every wait has a timeout (a crashed worker makes a portable job hang), and both servers are
killed by PID on the way out.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

INSIDE = "REFINERY_LOCAL_CLUSTER_NETNS"
JOB_PORT, WORKER_PORT = 8099, 50000  # a private namespace: fixed ports cannot collide


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
    logs = args.log_dir
    os.makedirs(logs, exist_ok=True)
    job = pool = submit = None
    try:
        job = _start([sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
                      "--port", str(JOB_PORT)], env, os.path.join(logs, "job_service.log"))
        _wait_for_port(JOB_PORT, job, 60, "job service")
        beam_args = ["--runner=PortableRunner", f"--job_endpoint=localhost:{JOB_PORT}"]
        if args.environment == "external":
            pool = _start([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                           "--service_port", str(WORKER_PORT)], env, os.path.join(logs, "worker_pool.log"))
            _wait_for_port(WORKER_PORT, pool, 60, "worker pool")
            beam_args += ["--environment_type=EXTERNAL", f"--environment_config=localhost:{WORKER_PORT}"]
        else:
            beam_args += ["--environment_type=LOOPBACK"]
        cmd = [sys.executable, "-m", "pipeline.cli", "run", *run_args, *beam_args]
        print(f"[local-cluster] {' '.join(cmd)}", file=sys.stderr, flush=True)
        submit = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            return submit.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"[local-cluster] the job did not finish within {args.timeout} s (a dead SDK worker makes "
                  f"portable jobs hang); logs in {logs}", file=sys.stderr)
            return 124
    except (_Terminated, KeyboardInterrupt) as exc:
        print(f"[local-cluster] stopped ({exc or 'interrupted'}): job, worker pool and submission killed", file=sys.stderr)
        return 143
    finally:  # every exit path: the submission (and its extraction child), worker pool, job service
        _kill(submit)
        _kill(pool)
        _kill(job)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    run_args: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, run_args = argv[:split], argv[split + 1:]
    p = argparse.ArgumentParser(prog="python -m pipeline.local_cluster", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--environment", choices=("external", "loopback"), default="external")
    p.add_argument("--timeout", type=float, default=900, help="seconds before the submission is abandoned")
    p.add_argument("--log-dir", default=os.path.join("out", "local-cluster-logs"))
    args = p.parse_args(argv)
    if not run_args:
        p.error("give the `refinery run` arguments after --")
    if os.environ.get(INSIDE) == "1":
        return _inside(args, run_args)
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        print("local_cluster: needs `unshare` and `ip` (util-linux, iproute2) to isolate the servers' ports",
              file=sys.stderr)
        return 2
    env = dict(os.environ, **{INSIDE: "1"})
    cmd = ["unshare", "-n", sys.executable, "-m", "pipeline.local_cluster", *argv, "--", *run_args]
    if os.geteuid() != 0:
        cmd = ["unshare", "-r", "-n", *cmd[2:]]  # an unprivileged user namespace, where the kernel allows it
    child = subprocess.Popen(cmd, env=env)

    def forward(signum, frame):  # the namespace's own process tidies up on SIGTERM (see _inside)
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, forward)
    while True:
        try:
            return child.wait()
        except InterruptedError:
            continue


if __name__ == "__main__":
    sys.exit(main())
