"""Inputs and output in an object store: a run reads its WARC files from a real S3-compatible server (moto's,
started on 127.0.0.1 by the test) and writes its output there. Killed in phase 1 and again in phase 2, `--resume`
finishes it to the shards, ledger and funnel a local run writes, byte for byte, with no file left over; the
Python API, `refinery inspect` and `datasets` read it back from the server. On a Dask cluster, whose worker
processes have no pipeline options of their own, the same."""
import logging
import os
import shutil
import subprocess
import sys

import pytest

from pipeline.job.faults import KILL_ENV
from pipeline.job.outdir import OutputError, OutputLock, compare_outputs
from pipeline.job.run import run
from tests.conftest import WARC_DIR

moto_server = pytest.importorskip("moto.server", reason="the local S3 server is moto's (pip install -e '.[test]')")
boto3 = pytest.importorskip("boto3", reason="Beam's s3:// filesystem needs boto3 (pip install 'refinery[s3]')")

FILES = ["dolma_sample-0000.warc.gz", "dolma_sample-0001.warc.gz"]  # two real WARC files: two prepared parts
BUCKET = "crawl"
INPUTS = f"s3://{BUCKET}/in/*.warc.gz"
OUTPUT = f"s3://{BUCKET}/out"


@pytest.fixture(scope="module")
def s3():
    """A boto3 client of a fresh S3 server on loopback holding the inputs; the run finds the server as every
    AWS client does, through AWS_ENDPOINT_URL (Beam's --s3_endpoint_url would do for the run alone)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        with pytest.MonkeyPatch.context() as env:
            for name, value in {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "test",
                                "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}.items():
                env.setenv(name, value)
            client = boto3.client("s3")
            client.create_bucket(Bucket=BUCKET)
            for name in FILES:
                client.upload_file(str(WARC_DIR / name), BUCKET, f"in/{name}")
            yield client
    finally:
        server.stop()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The same job on local copies of the files."""
    folder = tmp_path_factory.mktemp("in")
    for name in FILES:
        shutil.copy2(WARC_DIR / name, folder / name)
    out = tmp_path_factory.mktemp("local") / "out"
    report = run(["--input", str(folder / "*.warc.gz"), "--output", str(out), "--quiet"])
    return out, report


def _keys(client, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
    return sorted(obj["Key"][len(prefix) + 1:] for page in pages for obj in page.get("Contents", []))


def _download(client, prefix: str, folder):
    for key in _keys(client, prefix):
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        client.download_file(BUCKET, f"{prefix}/{key}", str(folder / key))
    return folder


def _killed(kill_at: str, *flags: str) -> str:
    env = {**os.environ, KILL_ENV: kill_at}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--input", INPUTS, "--output", OUTPUT,
                           "--quiet", *flags], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == -9, done.stderr[-2000:]
    return done.stderr


@pytest.fixture(scope="module")
def resumed(s3, local):
    """Killed after the first file's part (phase 1), resumed and killed after the first shard (phase 2), resumed
    to the end."""
    _killed("prepared:1")
    left = _keys(s3, "out")
    assert [k for k in left if k.endswith(".done.json")] and "manifest.json" not in left and ".refinery.lock" in left
    with pytest.raises(OutputError, match=r"in use by another refinery run \(pid .*pass --resume to take its lock over"):
        run(["--input", INPUTS, "--output", OUTPUT, "--quiet"])  # nothing drops a dead run's lock in S3
    assert "takes over the lock of" in _killed("shard:1", "--resume")
    assert any(k.startswith("data/part-") for k in _keys(s3, "out")) and "manifest.json" not in _keys(s3, "out")
    return run(["--input", INPUTS, "--output", OUTPUT, "--resume", "--quiet"])


def test_a_killed_run_in_an_object_store_resumes_to_what_a_local_run_writes(s3, local, resumed, tmp_path):
    out, whole = local
    assert resumed["status"] == "ok" and resumed["conservation"]["holds"]
    assert resumed["prepared"]["files_reused"] == len(FILES) and resumed["prepared"]["files_prepared"] == 0
    assert resumed["funnel"] == whole["funnel"] and resumed["input_root"] == f"s3://{BUCKET}/in/"
    assert resumed.get("lock") is None  # S3 was locked (a conditional write), and the lock is gone (listing below)
    assert compare_outputs(str(out), str(_download(s3, "out", tmp_path / "s3"))) == []
    # the same files as the local run, nothing left over (temp files, Beam's temp folders, phase 2's copies)
    local_files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != ".refinery.lock")
    assert _keys(s3, "out") == local_files


def test_a_run_in_an_object_store_reads_back_there(s3, local, resumed, tmp_path):
    import datasets

    import refinery

    finished = refinery.open_run(OUTPUT)
    rows = finished.manifest["rows"]
    assert finished.table().num_rows == rows == local[1]["output"]["rows"]
    assert finished.table("valid").num_rows == resumed["held_out"]
    assert finished.ledger().num_rows == resumed["ledger"] > 0 and finished.edits() is None
    loaded = datasets.load_dataset("parquet", data_files=f"{OUTPUT}/data/*.parquet", split="train",
                                   cache_dir=str(tmp_path / "hf"))  # its own cache: the URL is the same every time
    assert len(loaded) == rows

    fresh = subprocess.run([sys.executable, "-c", f"import refinery; print(refinery.open_run({OUTPUT!r}).table().num_rows)"],
                           capture_output=True, text=True, timeout=300)  # a notebook's process: no run set Beam up
    assert fresh.returncode == 0 and fresh.stdout.split() == [str(rows)], fresh.stderr[-2000:]

    shown = subprocess.run([sys.executable, "-m", "pipeline.cli", "inspect", OUTPUT], capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"{OUTPUT}: {rows} documents kept" in shown.stdout

    with pytest.raises(OutputError, match="already holds a run's outputs"):  # a second run is refused there too
        run(["--input", INPUTS, "--output", OUTPUT, "--quiet"])
    tokenize = subprocess.run([sys.executable, "-m", "pipeline.cli", "tokenize", "--data", OUTPUT, "--out",
                               str(tmp_path / "tok")], capture_output=True, text=True, timeout=300)
    assert tokenize.returncode == 2 and "copy the run's output first" in tokenize.stderr  # not "manifest not found"


def test_one_run_at_a_time_holds_an_output_in_s3(s3):
    """Of two runs that lock the same output, the second is refused (S3's conditional write decides), and the lock
    goes with the first."""
    with OutputLock(f"s3://{BUCKET}/locked"):
        assert _keys(s3, "locked") == [".refinery.lock"]
        with pytest.raises(OutputError, match=r"s3://crawl/locked is in use by another refinery run \(pid "):
            with OutputLock(f"s3://{BUCKET}/locked"):
                pass
    assert _keys(s3, "locked") == []


def test_a_run_on_dask_workers_reads_and_writes_the_object_store(s3, local):
    """Worker processes started before the run: each gets the job's options with its steps (Beam's S3 filesystem
    refuses to work without them)."""
    import dask
    from distributed import LocalCluster

    out, _ = local
    with dask.config.set({"distributed.worker.daemon": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0") as cluster:  # extraction starts a child process
        report = run(["--input", INPUTS, "--output", f"s3://{BUCKET}/dask", "--quiet",
                      "--runner=pipeline.engines.dask_runner.RefineryDaskRunner",
                      f"--dask_client_address={cluster.scheduler_address}"])
    assert report["status"] == "ok" and report["conservation"]["holds"] and report["funnel"] == local[1]["funnel"]
    assert compare_outputs(str(out), str(_download(s3, "dask", out.parent / "dask"))) == []


def test_overwrite_replaces_a_complete_output_in_an_object_store(s3, local, resumed, tmp_path):
    """--overwrite over a complete run in S3 (no folder to set the old output aside in: its manifest goes first, so
    the prefix never claims to be complete while the new run goes on) ends with what a local run writes, and nothing
    of the old run is left."""
    out, whole = local
    report = run(["--input", INPUTS, "--output", OUTPUT, "--overwrite", "--quiet"])
    assert report["status"] == "ok" and report["funnel"] == whole["funnel"]
    assert report["prepared"]["files_prepared"] == len(FILES)  # the old prepared parts went too
    assert compare_outputs(str(out), str(_download(s3, "out", tmp_path / "s3"))) == []
    local_files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != ".refinery.lock")
    assert _keys(s3, "out") == local_files
