"""The same job on real multi-process engines writes what the in-process FnApiRunner writes, including
the ledger entries of documents on which a stage raised: submitted through Beam's portable Job API (a
real job service, and a real external SDK worker pool or LOOPBACK workers), and run on a Dask scheduler
with worker processes under a memory limit, one of them killed mid-run (pipeline.engines.dask_runner)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from pipeline.job.outdir import compare_outputs
from pipeline.job.run import run
from tests.conftest import REPO, WARC_DIR

# Two kept documents of the bundled WARCs: one fails in a per-document stage, one in a batched stage.
FAULTS = ["--inject-error", "gopher_quality=http://commoncrawl.org/", "--inject-error", "quality=pete_dye.asp"]
# Paragraph dedup on: its counting (a CombinePerKey, a Top, side inputs) must give the same cuts on every engine.
RUN_ARGS = ["--input", str(WARC_DIR / "*.warc.gz"), "--quiet", "--paragraph-dedup", *FAULTS]


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = ["unshare", "-n", "true"] if os.geteuid() == 0 else ["unshare", "-r", "-n", "true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_work(), reason="needs `unshare -n` (root or user namespaces) "
                                "to keep the job service and worker pool off every network but loopback")


def contents(out):
    docs = pq.read_table(str(out / "data"), columns=["id", "text", "url", "epoch"]).to_pylist()
    ledger = pq.read_table(str(out / "ledger"), columns=["id", "stage", "reason"]).to_pylist()
    return (sorted((d["id"], d["text"], d["epoch"]) for d in docs),
            sorted((r["id"], r["stage"], r["reason"]) for r in ledger))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("fnapi")
    report = run([*RUN_ARGS, "--output", str(out)])
    return out, report


def submit(out, environment, *cluster_args):
    cmd = [sys.executable, "-m", "pipeline.engines.local_cluster", "--environment", environment, "--timeout", "600",
           "--log-dir", str(out.parent / f"logs-{environment}"), *cluster_args, "--", *RUN_ARGS, "--output", str(out)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)


def test_stage_errors_go_to_the_ledger_with_their_type_and_the_job_finishes(reference):
    out, report = reference
    _, ledger = contents(out)
    errors = [(stage, reason) for _, stage, reason in ledger if reason.startswith("error")]
    assert sorted(errors) == [("gopher_quality", "error:ValueError"), ("quality", "error:ValueError")]
    assert report["conservation"]["holds"] and report["kept"] > 100
    funnel = {f["stage"]: f["dropped_by_reason"] for f in report["funnel"]}
    assert funnel["gopher_quality"]["error:ValueError"] == 1 and funnel["quality"]["error:ValueError"] == 1


@pytest.mark.parametrize("environment", ["external", "loopback"])
def test_portable_runner_output_equals_fnapi_output(reference, tmp_path, environment):
    expected_dir, expected_report = reference
    out = tmp_path / "portable"
    proc = submit(out, environment)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "--runner=PortableRunner" in proc.stderr
    assert contents(out) == contents(expected_dir)  # same rows, same ledger (errors included)
    report = json.loads((out / "report.json").read_text())
    assert report["runner"] == "PortableRunner"
    assert report["conservation"]["holds"]  # the job service returned Beam metrics that match the files
    assert {f["stage"]: (f["in"], f["kept"]) for f in report["funnel"]} == \
        {f["stage"]: (f["in"], f["kept"]) for f in expected_report["funnel"]}


def test_dask_cluster_output_is_byte_identical_to_fnapi_output(reference, tmp_path):
    """On 3 workers capped at 1.5 GB each, one of them SIGKILLed twice while the job runs (a node lost: its nanny
    starts a new worker and the scheduler recomputes what the dead one held)."""
    import hashlib

    expected_dir, expected_report = reference
    out = tmp_path / "dask"
    proc = submit(out, "external", "--engine", "dask", "--same-as", str(expected_dir), "--workers", "3",
                  "--memory-limit", "1.5GB", "--kill-worker-after", "12", "--kill-worker-after", "24")
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "byte-identical to the local runner" in proc.stdout
    workers = json.loads((tmp_path / "logs-external" / "dask_workers.json").read_text())
    assert [len(k["pids"]) for k in workers["kills"]] == [1, 1], workers  # each kill found a live worker process
    assert workers["workers"]["worker-0"]["processes"] == 3  # the first one and two restarts
    assert not workers["over_limit"] and 100 < workers["peak_rss_mb"] < workers["memory_limit_mb"], workers
    assert all(w["memory_kills"] == 0 for w in workers["workers"].values())
    log = (tmp_path / "logs-external" / "dask_worker_0.log").read_text()
    assert log.count("was killed by signal 9") == 2

    def digests(folder):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("part-*.parquet"))}

    assert digests(out / "data") == digests(expected_dir / "data") != {}
    assert contents(out) == contents(expected_dir)  # the ledger too, stage errors included
    assert compare_outputs(str(expected_dir), str(out)) == []  # the edit book and the report's edits too
    report = json.loads((out / "report.json").read_text())
    assert report["runner"] == "pipeline.engines.dask_runner.RefineryDaskRunner"
    assert report["conservation"]["holds"] is True  # checked from the metrics the Dask workers collected
    assert report["funnel"] == expected_report["funnel"]
    tasks = json.loads((tmp_path / "logs-external" / "dask_tasks.json").read_text())
    # the workers not killed both did work (the killed one's count is its last process's)
    assert len(tasks) == 3 and min(tasks["worker-1"], tasks["worker-2"]) >= 0.1 * sum(tasks.values()), tasks


def test_dask_scheduler_lost_mid_run_is_one_line_and_resume_gives_the_same_output(reference, tmp_path):
    """The scheduler holds a Dask job's state: killed once phase 1 has committed a part, the run fails with one
    line and no manifest; `--resume` (here on the local runner) reuses the parts and writes the reference's output."""
    expected_dir, _ = reference
    out = tmp_path / "dask"
    proc = submit(out, "external", "--engine", "dask", "--kill-scheduler-on", str(out / "prepared" / "*.done.json"))
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("[local-cluster]")]
    assert len(lines) == 1 and lines[0].startswith("refinery run: error: lost the Dask scheduler"), proc.stderr[-3000:]
    assert "--resume" in lines[0] and not (out / "manifest.json").exists()
    killed = json.loads((tmp_path / "logs-external" / "dask_workers.json").read_text())["kills"]
    assert [k["worker"] for k in killed] == ["scheduler"] and killed[0]["pids"]

    report = run([*RUN_ARGS, "--output", str(out), "--resume"])
    assert report["prepared"]["files_reused"] >= 1  # what phase 1 committed before the scheduler went
    assert compare_outputs(str(expected_dir), str(out)) == []
