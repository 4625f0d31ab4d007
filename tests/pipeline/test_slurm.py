"""`refinery slurm` on a real Slurm (Debian's slurm-wlm: slurmctld, slurmd, munged; `make slurm` installs it),
started by the test on this machine as one node with 2 CPUs, inside a network namespace that has only
loopback (the daemons cannot be reached from, nor reach, anything else), and torn down afterwards.

The demo's WARCs as a job array of 2 tasks; one task is cancelled while it runs; `status` says so;
`submit --resume` submits only its missing files and a new phase 2; the outputs then equal a local run's, and
again when phase 2 is rerun on a Dask cluster of Slurm jobs (dask-jobqueue)."""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq
import pytest

from tests.conftest import WARC_DIR
from tests.golden import run_digests

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo")
MISSING = [tool for tool in (*DAEMONS, *CLIENTS, "unshare", "nsenter", "ip") if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(bool(MISSING) or os.geteuid() != 0,
                                reason=f"needs Slurm, munge and root for a private network namespace "
                                       f"(`make slurm`); missing: {MISSING or 'root'}")

# EnableIPv6: Slurm asks getaddrinfo for IPv4 with AI_ADDRCONFIG, which finds no address where loopback is the
# only interface; asking for any family finds 127.0.0.1 (and the daemons' wildcard sockets exist in the namespace only).
SLURM_CONF = """ClusterName=refinery-test
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
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=4000 State=UNKNOWN
PartitionName=main Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """Slurm's daemons in a loopback-only network namespace; `run` executes a command inside it."""

    def __init__(self):
        # munged wants every folder above its socket searchable by all (pytest's tmp folders are 0700)
        folder = self.dir = pathlib.Path(tempfile.mkdtemp(prefix="refinery-slurm-"))
        folder.chmod(0o755)
        for sub in ("state", "spool"):
            (folder / sub).mkdir(parents=True)
        (folder / "slurm.conf").write_text(SLURM_CONF.format(dir=folder))
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"))
        # the namespace lives as long as this process: every daemon and command joins it
        self.holder = subprocess.Popen(["unshare", "--net", "sh", "-c", "ip link set lo up && exec sleep infinity"])
        self.prefix = ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net"]
        self.daemons: list = []
        try:
            self._start(folder, key)
        except BaseException:  # a cluster that did not come up leaves no daemon behind either
            self.close()
            raise

    def _start(self, folder, key):
        time.sleep(0.5)
        log = open(folder / "daemons.log", "w")
        self.daemons += [subprocess.Popen(self.prefix + cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
                        for cmd in (["munged", "-F", f"--key-file={key}", f"--socket={folder}/munge.sock",
                                     f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                                     f"--seed-file={folder}/munge.seed"],)]
        time.sleep(1)
        self.daemons += [subprocess.Popen(self.prefix + [name, "-D"] + (["-c"] if name == "slurmctld" else []),
                                          env=self.env, stdout=log, stderr=subprocess.STDOUT)
                         for name in ("slurmctld", "slurmd")]
        self.wait(lambda: "idle" in self.run("sinfo", "-h", "-o", "%T").stdout, 60, "the node to come up")

    def run(self, *cmd, check=False):
        return subprocess.run(self.prefix + list(cmd), env=self.env, capture_output=True, text=True, check=check,
                              timeout=300)

    def refinery(self, *args):
        return self.run(sys.executable, "-m", "pipeline.cli", *args)

    def wait(self, done, timeout, what, logs=None):
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                tails = {p.name: p.read_text()[-800:] for p in sorted(logs.glob("*"))} if logs and logs.exists() else {}
                raise AssertionError(f"timed out waiting for {what}; queue {self.queued()}; logs {tails}")
            time.sleep(0.2)

    def queued(self):
        return self.run("squeue", "-h", "-r", "-o", "%i %T").stdout.split("\n")

    def close(self):
        self.run("scancel", "--full", "--user=root")
        for proc in reversed(self.daemons):
            proc.send_signal(signal.SIGTERM)
        for proc in self.daemons:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.holder.kill()
        self.holder.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster():
    c = Cluster()
    try:
        yield c
    finally:
        c.close()
    left = [pid for pattern in (str(c.dir), "pipeline.cli slurm", "refinery-dask-worker")
            for pid in subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()]
    assert left == [], f"daemons or jobs of the test cluster still running: {left}"


def test_array_task_cancelled_then_resumed_gives_the_local_run(cluster, demo_run, tmp_path):
    links = cluster.run("ip", "-o", "link").stdout.splitlines()
    assert len(links) == 1 and ": lo:" in links[0], links  # the daemons' sockets are reachable from nowhere else
    out = tmp_path / "out"
    args = ["--input", str(WARC_DIR / "*.warc.gz"), "--output", str(out), "--quiet"]
    done = cluster.refinery("slurm", "submit", "--files-per-task", "4", "--cpus-per-task", "1", *args)
    assert done.returncode == 0, done.stderr
    assert "2 array task(s)" in done.stdout
    array, phase2 = re.findall(r"^phase \d: job (\d+)", done.stdout, re.M)
    # task 0 holds the demo's first four files in name order; cancel it once it has finished the first (a
    # one-page WARC) and is reading the second (the 128 Wayback captures): mid-way, some parts committed
    log = out / "slurm" / "logs" / f"phase1-{array}_0.out"
    cluster.wait(lambda: log.exists() and "cc_whirlwind" in log.read_text(), 180, "task 0 to finish its first file",
                 out / "slurm" / "logs")
    cluster.run("scancel", f"{array}_0", check=True)
    cluster.wait(lambda: not any(line.startswith(f"{array}_") for line in cluster.queued()), 240, "the array to end")

    status = cluster.refinery("slurm", "status", str(out))
    assert status.returncode == 0, status.stderr
    assert "1 done, 1 failed" in status.stdout and "task 0 failed" in status.stdout, status.stdout
    assert "input files prepared: 5 of 8" in status.stdout, status.stdout
    assert f"phase 2 (job {phase2}): pending" in status.stdout  # waits for an array that will never succeed
    assert not (out / "manifest.json").exists()

    again = cluster.refinery("slurm", "submit", "--files-per-task", "4", *args, "--resume")
    assert again.returncode == 0, again.stderr
    assert "1 array task(s)" in again.stdout
    assert not any(line.startswith(phase2) for line in cluster.queued())  # the stale phase 2 was cancelled
    cluster.wait(lambda: (out / "manifest.json").exists() or not cluster.queued()[0], 300, "phase 2 to finish")
    status = cluster.refinery("slurm", "status", str(out))
    assert "input files prepared: 8 of 8" in status.stdout and ": done" in status.stdout.splitlines()[-1], status.stdout

    local, _ = demo_run
    assert_same_outputs(out, local)

    refused = cluster.refinery("slurm", "submit", *args)  # a finished output is replaced only when asked
    assert refused.returncode == 2 and "already holds a finished run" in refused.stderr, refused.stderr

    # phase 2 again, now on a Dask cluster whose worker dask-jobqueue submits as a Slurm job: no array this time
    first_run = json.loads((out / "report.json").read_text())["run_id"]
    dask = cluster.refinery("slurm", "submit", "--files-per-task", "4", *args, "--resume", "--phase2-dask-workers", "1",
                            "--phase2-dask-memory", "2GB")
    assert dask.returncode == 0, dask.stderr
    assert "every input file is prepared already" in dask.stdout
    cluster.wait(lambda: not cluster.queued()[0], 300, "phase 2 on Dask", out / "slurm" / "logs")
    assert json.loads((out / "report.json").read_text())["run_id"] != first_run and (out / "manifest.json").exists()
    assert json.loads((out / "report.json").read_text())["runner"].endswith("RefineryDaskRunner")
    assert_same_outputs(out, local)


def assert_same_outputs(out, local):
    """Shards byte for byte, signatures, funnel and report (timings aside) alike; the ledger's rows alike (a
    cluster runner may split them over more files)."""
    found, want = run_digests(out), run_digests(local)
    ledger = lambda k: k.startswith("ledger/") or k == "report.json:ledger_files"  # noqa: E731
    assert {k for k in {*found, *want} if found.get(k) != want.get(k) and not ledger(k)} == set()
    for shard in sorted((local / "data").glob("*.parquet")):
        assert (out / "data" / shard.name).read_bytes() == shard.read_bytes()
    rows = [sorted(json.dumps(r, sort_keys=True) for r in pq.read_table(d / "ledger").to_pylist()) for d in (out, local)]
    assert rows[0] == rows[1]
