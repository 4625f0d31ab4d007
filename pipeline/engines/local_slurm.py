"""A one-node Slurm cluster on this machine, to try `refinery slurm` without one (`make slurm-demo`) and to test it.

    python -m pipeline.engines.local_slurm [--timeout S] [--files-per-task N] -- RUN ARGS...

munged, slurmctld and slurmd (Debian's `munge` and `slurm-wlm`; `make slurm` installs them) run as root with a
configuration of their own (one node, this machine's cores) in a temporary folder, inside a network namespace that
holds only loopback (nothing else can reach their ports) and a PID namespace whose init is this module: when it
ends, however it ends, the kernel ends every daemon and job started in it. `refinery slurm submit
--files-per-task N RUN ARGS` submits the input as a job array and phase 2 as a job depending on it; this follows
`refinery slurm status` until phase 2 ends and prints it (tests/pipeline/engines/test_slurm.py shows a Slurm run's shards equal
a local run's, byte for byte).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

from stages.processes import die_with_parent

INSIDE = "REFINERY_LOCAL_SLURM_NS"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo")

# EnableIPv6: Slurm asks getaddrinfo for IPv4 with AI_ADDRCONFIG, which finds no address where loopback is the
# only interface; asking for any family finds 127.0.0.1 (and the daemons' wildcard sockets exist in the namespace
# only).
SLURM_CONF = """ClusterName=refinery-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock
MpiDefault=none
CommunicationParameters=EnableIPv6
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=4000 State=UNKNOWN
PartitionName=main Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def missing_tools() -> list[str]:
    """What this machine lacks for a local Slurm: the daemons, the clients, the namespace tools, root."""
    missing = [tool for tool in (*DAEMONS, *CLIENTS, "unshare", "nsenter", "ip") if shutil.which(tool) is None]
    return missing + ([] if os.geteuid() == 0 else ["root (the daemons run as root)"])


class LocalSlurm:
    """Slurm's daemons in a network namespace with only loopback; `run` executes a command there. `prefix` enters
    the namespace (the test's: nsenter into one a holder process keeps); empty when this process is inside it."""

    def __init__(self, prefix: Sequence[str] = (), on_close: Callable[[], None] | None = None):
        # munged wants every folder above its socket searchable by all (pytest's tmp folders are 0700)
        folder = self.dir = pathlib.Path(tempfile.mkdtemp(prefix="refinery-slurm-"))
        folder.chmod(0o755)
        for sub in ("state", "spool"):
            (folder / sub).mkdir(parents=True)
        (folder / "slurm.conf").write_text(SLURM_CONF.format(dir=folder, cpus=os.cpu_count() or 1))
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"))
        self.prefix, self._on_close = list(prefix), on_close
        self.daemons: list[subprocess.Popen] = []
        try:
            self._start(folder, key)
        except BaseException:  # a cluster that did not come up leaves no daemon behind either
            self.close()
            raise

    @classmethod
    def in_new_namespace(cls) -> LocalSlurm:
        """For a test: a holder process keeps a loopback-only network namespace that every daemon joins."""
        holder = subprocess.Popen(["unshare", "--net", "sh", "-c", "ip link set lo up && exec sleep infinity"],
                                  preexec_fn=die_with_parent)
        time.sleep(0.5)

        def end_holder() -> None:
            holder.kill()
            holder.wait()

        return cls(["nsenter", f"--net=/proc/{holder.pid}/ns/net"], on_close=end_holder)

    def _start(self, folder: pathlib.Path, key: pathlib.Path) -> None:
        log = open(folder / "daemons.log", "w")
        self.daemons.append(subprocess.Popen(
            [*self.prefix, "munged", "-F", f"--key-file={key}", f"--socket={folder}/munge.sock",
             f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log", f"--seed-file={folder}/munge.seed"],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent))
        time.sleep(1)
        self.daemons += [subprocess.Popen([*self.prefix, name, "-D"] + (["-c"] if name == "slurmctld" else []),
                                          env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                          preexec_fn=die_with_parent)
                         for name in ("slurmctld", "slurmd")]
        self.wait(lambda: "idle" in self.run("sinfo", "-h", "-o", "%T").stdout, 60, "the node to come up")

    def run(self, *cmd: str, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([*self.prefix, *cmd], env=self.env, capture_output=True, text=True, check=check,
                              timeout=timeout)

    def refinery(self, *args: str) -> subprocess.CompletedProcess:
        return self.run(sys.executable, "-m", "pipeline.cli", *args)

    def wait(self, done: Callable[[], bool], timeout: float, what: str, logs: pathlib.Path | None = None) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                tails = {p.name: p.read_text()[-800:] for p in sorted(logs.glob("*"))} if logs and logs.exists() else {}
                raise TimeoutError(f"timed out waiting for {what}; queue {self.queued()}; logs {tails}")
            time.sleep(0.2)

    def queued(self) -> list[str]:
        return [line for line in self.run("squeue", "-h", "-r", "-o", "%i %T").stdout.split("\n") if line.strip()]

    def close(self) -> None:
        try:
            if self.daemons:
                self.run("scancel", "--full", "--user=root", timeout=60)
        finally:
            for proc in reversed(self.daemons):
                proc.send_signal(signal.SIGTERM)
            for proc in self.daemons:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
            if self._on_close:
                self._on_close()
            shutil.rmtree(self.dir, ignore_errors=True)


def _inside(args: argparse.Namespace, run_args: list[str]) -> int:
    from pipeline.job.config import flag_value

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    output = flag_value(run_args, "--output")
    if output is None:
        print("local_slurm: give the run's --output", file=sys.stderr)
        return 2
    cluster = LocalSlurm()
    try:
        print(f"[local-slurm] slurmctld and slurmd up (1 node, {os.cpu_count()} CPUs, loopback only)", flush=True)
        submitted = cluster.refinery("slurm", "submit", "--files-per-task", str(args.files_per_task), *run_args)
        print(submitted.stdout, end="", flush=True)
        if submitted.returncode != 0:
            print(submitted.stderr, end="", file=sys.stderr)
            return submitted.returncode
        deadline = time.monotonic() + args.timeout
        while cluster.queued():
            if time.monotonic() > deadline:
                print(f"[local-slurm] jobs still queued after {args.timeout:.0f} s: {cluster.queued()}",
                      file=sys.stderr)
                return 1
            time.sleep(1)
        status = cluster.refinery("slurm", "status", output)
        print(status.stdout, end="", flush=True)
        if not os.path.exists(os.path.join(output, "manifest.json")):
            print(f"[local-slurm] phase 2 published nothing: see {output}/slurm/logs/", file=sys.stderr)
            return 1
        print(f"[local-slurm] shards in {output}/data (report: {output}/report.html)")
        return 0
    finally:
        cluster.close()
        print("[local-slurm] daemons stopped", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    from pipeline.engines.local_cluster import split_run_args

    argv, run_args = split_run_args(argv)
    p = argparse.ArgumentParser(prog="python -m pipeline.engines.local_slurm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files-per-task", type=int, default=1, help="input files per array task")
    p.add_argument("--timeout", type=float, default=900, help="seconds before the jobs are abandoned")
    args = p.parse_args(argv)
    if not run_args:
        p.error("give the `refinery run` arguments after --")
    if os.environ.get(INSIDE) == "1":
        return _inside(args, run_args)
    missing = missing_tools()
    if missing:
        print(f"local_slurm: needs {', '.join(missing)}: `make slurm` installs Slurm and munge (Debian's slurm-wlm "
              "and munge, as root)", file=sys.stderr)
        return 2
    # A network namespace (loopback only) and a PID namespace whose init is the inner process: when it dies, the
    # kernel ends every daemon and job in it; --kill-child ends it when `unshare` dies, which dies with us.
    cmd = ["unshare", "--net", "--pid", "--mount-proc", "--kill-child", sys.executable, "-m",
           "pipeline.engines.local_slurm", *argv, "--", *run_args]
    child = subprocess.Popen(cmd, env=dict(os.environ, **{INSIDE: "1"}), preexec_fn=die_with_parent)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: child.send_signal(signal.SIGKILL))  # the kernel ends the rest
    code = child.wait()
    left = subprocess.run(["pgrep", "-f", "refinery-slurm-"], capture_output=True, text=True).stdout.split()
    if left:
        print(f"local_slurm: daemons still running after the end: {left}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
