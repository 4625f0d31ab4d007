"""`refinery slurm` on a real Slurm (Debian's slurm-wlm: slurmctld, slurmd, munged; `make slurm` installs it),
started by the test on this machine as one node with 2 CPUs, inside a network namespace that has only
loopback (the daemons cannot be reached from, nor reach, anything else), and torn down afterwards.

The demo's WARCs as a job array of 2 tasks; one task is cancelled while it runs; `status` says so;
`submit --resume` submits only its missing files and a new phase 2; the outputs then equal a local run's, and
again when phase 2 is rerun on a Dask cluster of Slurm jobs (dask-jobqueue)."""
import json
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from pipeline.engines.local_slurm import LocalSlurm, missing_tools
from pipeline.job.prepare import phase1_digest
from pipeline.job.run import build_parser, config_from_args
from tests.conftest import REPO, WARC_DIR
from tests.golden import run_digests

MISSING = missing_tools()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs Slurm, munge and root for a private network namespace "
                                                    f"(`make slurm`); missing: {MISSING}")


def no_daemon_left(pattern: str) -> list[str]:
    return [pid for p in (pattern, "pipeline.cli slurm", "refinery-dask-worker", "slurmctld -D", "slurmd -D")
            for pid in subprocess.run(["pgrep", "-f", p], capture_output=True, text=True).stdout.split()]


@pytest.fixture
def cluster():
    c = LocalSlurm.in_new_namespace()
    try:
        yield c
    finally:
        c.close()
    left = no_daemon_left(str(c.dir))
    assert left == [], f"daemons or jobs of the test cluster still running: {left}"


def test_the_slurm_demo_runs_an_array_and_phase_2_and_leaves_no_daemon(tmp_path):
    """`make slurm-demo`: the module starts a one-node cluster in namespaces of its own, submits, follows the jobs
    to the end, and stops every daemon (the PID namespace ends with it). That a Slurm run's shards equal a local
    run's is the test above; here one small file keeps it short."""
    demo = subprocess.run([sys.executable, "-m", "pipeline.engines.local_slurm", "--timeout", "400", "--",
                           "--input", str(WARC_DIR / "warcio_example.warc.gz"), "--output", str(tmp_path / "slurm"),
                           "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "1 array task(s)" in demo.stdout and "input files prepared: 1 of 1" in demo.stdout
    assert (tmp_path / "slurm" / "manifest.json").exists() and "daemons stopped" in demo.stdout
    assert no_daemon_left("refinery-slurm-") == []


def test_submit_without_a_controller_fails_before_writing_anything(tmp_path):
    """`make slurm` installs Slurm's commands but starts nothing: `submit` says so in one line and writes nothing
    (it had printed sbatch's raw errors and left a slurm/ folder that `status` then disowned)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=6817\nAuthType=auth/none\n"
                    "MessageTimeout=2\nNodeName=localhost CPUs=1 State=UNKNOWN\nPartitionName=main Nodes=localhost\n")
    out = tmp_path / "out"
    done = subprocess.run(["unshare", "--net", sys.executable, "-m", "pipeline.cli", "slurm", "submit", "--input",
                           str(WARC_DIR / "warcio_example.warc.gz"), "--output", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, SLURM_CONF=str(conf)))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("refinery slurm: error: no Slurm controller answers") and "make slurm-demo" in lines[0]
    assert not out.exists()


def test_submit_to_an_object_store_output_is_one_line(tmp_path):
    """Slurm writes the logs and the tasks the state as files: an s3:// --output is refused before anything else
    (it made a local folder named `s3:`)."""
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "slurm", "submit", "--input",
                           str(WARC_DIR / "warcio_example.warc.gz"), "--output", "s3://bucket/out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "shared filesystem" in lines[0] and not (tmp_path / "s3:").exists()


def test_array_task_cancelled_then_resumed_gives_the_local_run(cluster, demo_run, tmp_path):
    links = cluster.run("ip", "-o", "link").stdout.splitlines()
    assert len(links) == 1 and ": lo:" in links[0], links  # the daemons' sockets are reachable from nowhere else
    out = tmp_path / "out"
    settings = tmp_path / "run.yaml"  # the defaults' language threshold, as the local run has it
    settings.write_text("langid:\n  threshold: 0.65\n")
    args = ["--input", str(WARC_DIR / "*.warc.gz"), "--output", str(out), "--config", str(settings), "--quiet"]
    done = cluster.refinery("slurm", "submit", "--files-per-task", "4", "--cpus-per-task", "1", *args)
    assert done.returncode == 0, done.stderr
    assert "2 array task(s)" in done.stdout
    settings.write_text("langid:\n  threshold: 0.99\n")  # edited after the submission: its tasks keep what it read
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
    settings.write_text("langid:\n  threshold: 0.65\n")  # as submitted: the digest of what its tasks must have read
    submitted = phase1_digest(config_from_args(build_parser().parse_known_args(args)[0]))
    markers = [json.loads(p.read_text()) for p in (out / "prepared").glob("*.done.json")]
    assert len(markers) == 5 and {m["digest"] for m in markers} == {submitted}

    again = cluster.refinery("slurm", "submit", "--files-per-task", "4", *args, "--resume")
    assert again.returncode == 0, again.stderr
    assert "1 array task(s)" in again.stdout
    assert not any(line.startswith(phase2) for line in cluster.queued())  # the stale phase 2 was cancelled
    cluster.wait(lambda: (out / "manifest.json").exists() or not cluster.queued(), 300, "phase 2 to finish")
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
    cluster.wait(lambda: not cluster.queued(), 300, "phase 2 on Dask", out / "slurm" / "logs")
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
