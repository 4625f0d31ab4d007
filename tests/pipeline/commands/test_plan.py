"""`refinery plan` predicts a run from a 100-record sample; the real run's report.json sets what it measured
next to the prediction. On the bench WARC (1,033 real pages; half of them, `--sample-fraction 0.5`, on
both sides, to keep the suite short) CPU, peak memory, prepared and output bytes must be within a factor
of 2 of the prediction, records within 25 %."""
import io
import json
import subprocess
import sys

import pytest

from pipeline.job.run import run
from tests.conftest import REPO, ReproducibleWARCWriter

BENCH_WARC = REPO.parent / "shared" / "data" / "warc" / "bench_trafilatura_pages.warc.gz"
FACTOR = 2.0


@pytest.mark.skipif(not BENCH_WARC.exists(), reason=f"{BENCH_WARC} (shared data) is not here")
def test_plan_predicts_the_bench_run_within_a_factor_of_two(tmp_path):
    plan_file = tmp_path / "plan.json"
    half = ["--set", "sample_fraction=0.5"]
    planned = subprocess.run([sys.executable, "-m", "pipeline.cli", "plan", "--input", str(BENCH_WARC), *half,
                              "--sample", "100", "--save", str(plan_file)], capture_output=True, text=True, timeout=600)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert "one Common Crawl snapshot" in planned.stdout and "assumptions:" in planned.stdout
    plan = json.loads(plan_file.read_text())
    assert 70 <= plan["sample"]["records"] <= 130  # drawn from all through the file: about 100
    assert plan["scale"]["records"] == 3_000_000_000 and plan["scale"]["cpu_hours"] > plan["input"]["cpu_hours"]
    slurm = plan["scale"]["slurm"]  # the snapshot's 90,000 files within Slurm's default array size
    assert slurm["array_tasks"] <= 1000 and slurm["array_tasks"] * slurm["files_per_task"] >= 90_000
    assert slurm["phase1_core_hours"] + slurm["phase2_core_hours"] == pytest.approx(plan["scale"]["cpu_hours"], 1e-3)
    assert "on Slurm (refinery slurm submit --files-per-task 90" in planned.stdout

    report = run(["--input", str(BENCH_WARC), "--output", str(tmp_path / "out"), "--quiet", "--plan", str(plan_file),
                  *half])
    ratios = report["plan"]["measured_over_predicted"]
    for key in ("cpu_hours", "peak_memory_bytes", "prepared_bytes", "output_bytes"):
        assert 1 / FACTOR <= ratios[key] <= FACTOR, (key, report["plan"])
    assert 0.8 <= ratios["records"] <= 1.25
    assert report["plan"]["measured"]["records"] == report["conservation"]["read"]
    assert 400 < report["conservation"]["read"] < 630  # about half of the 1,033 records


def test_plan_of_nothing_is_one_error_line(tmp_path):
    planned = subprocess.run([sys.executable, "-m", "pipeline.cli", "plan", "--input", str(tmp_path / "*.warc.gz")],
                             capture_output=True, text=True, timeout=300)
    assert planned.returncode == 2 and "matches no files" in planned.stderr and "Traceback" not in planned.stderr


def test_plan_counts_paragraph_dedups_hashes_in_shuffle_and_memory(tmp_path):
    """On the bundled WARCs: with paragraph dedup on, the sample's paragraph hashes add their shuffle and their
    phase-2 memory (bench/paragraph_scale.py's bytes per hash), and the assumptions say so."""
    from pipeline.commands.plan import OCCURRENCE_RECORD_BYTES, PARAGRAPH_BYTES_PER_HASH, predict
    from tests.pipeline.conftest import WARC_GLOB

    plan_file = tmp_path / "plan.json"
    planned = subprocess.run([sys.executable, "-m", "pipeline.cli", "plan", "--input", WARC_GLOB, "--sample", "40",
                              "--set", "paragraph_dedup.enabled=true", "--save", str(plan_file)],
                             capture_output=True, text=True, timeout=600, cwd=REPO)
    assert planned.returncode == 0, planned.stderr[-2000:]
    plan = json.loads(plan_file.read_text())
    sample = plan["sample"]
    assert sample["paragraph_hashes"] > 5 * sample["documents"]  # real pages: many paragraphs each
    assert "paragraph hashes per document" in planned.stdout
    scale = plan["input"]["input_bytes"] / sample["bytes_read"]
    on = predict(sample, scale, "input", 1, plan["input"]["input_bytes"])
    off = predict(dict(sample, paragraph_hashes=0), scale, "input", 1, plan["input"]["input_bytes"])
    hashes = sample["paragraph_hashes"] * scale
    assert on["phase2_shuffle_bytes"] - off["phase2_shuffle_bytes"] == pytest.approx(hashes * OCCURRENCE_RECORD_BYTES, abs=1)
    memory = [p["peak_memory_per_worker_bytes"]["phase2_one_local_process"] for p in (on, off)]
    assert memory[0] - memory[1] == pytest.approx(hashes * PARAGRAPH_BYTES_PER_HASH, rel=1e-6, abs=1)


def test_plan_counts_the_robots_host_join(tmp_path):
    """With --robots, the captures (their share of the input's bytes) and each document's host and signature
    records add to phase 2's shuffle, and the assumptions say how."""
    from pipeline.commands.plan import ROBOTS_PAGE_RECORD_BYTES, SIGNED_FULL_RECORD_BYTES, predict
    from tests.pipeline.conftest import WARC_GLOB
    from tests.robots_warcs import robots_warc

    robots = robots_warc(tmp_path / "robotstxt.warc.gz", [
        ("https://commoncrawl.org/robots.txt", "2024-05-20T00:00:00Z", "200 OK", "User-agent: GPTBot\nDisallow: /\n", ())])
    plan_file = tmp_path / "plan.json"
    planned = subprocess.run([sys.executable, "-m", "pipeline.cli", "plan", "--input", WARC_GLOB, "--sample", "20",
                              "--robots", str(robots), "--save", str(plan_file)],
                             capture_output=True, text=True, timeout=600, cwd=REPO)
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert "--robots: the captures" in planned.stdout
    plan = json.loads(plan_file.read_text())
    sample = plan["sample"]
    assert 0 < sample["robots_bytes_per_input_byte"] < 0.01
    scale = plan["input"]["input_bytes"] / sample["bytes_read"]
    on = predict(sample, scale, "input", 1, plan["input"]["input_bytes"])
    off = predict({k: v for k, v in sample.items() if k != "robots_bytes_per_input_byte"}, scale, "input", 1,
                  plan["input"]["input_bytes"])
    docs = sample["documents"] * scale
    assert on["phase2_shuffle_bytes"] - off["phase2_shuffle_bytes"] >= docs * (ROBOTS_PAGE_RECORD_BYTES + SIGNED_FULL_RECORD_BYTES)


def test_a_spread_sample_sees_the_whole_file_and_the_first_records_do_not(tmp_path):
    """A file whose first 150 captures are 404s and whose rest are real pages: the first records predict no
    documents; records drawn from all through the file predict the documents phase 1 keeps (within 2x)."""
    from warcio.statusandheaders import StatusAndHeaders

    from pipeline.commands.plan import measure_sample
    from pipeline.job.config import load_config
    from pipeline.job.inputs import input_files, input_root
    from pipeline.job.steps import phase1_task

    path = tmp_path / "crawl.warc.gz"
    with open(path, "wb") as fh:
        writer = ReproducibleWARCWriter(fh)  # the same ids every run, so the same records drawn (with random record
        for n in range(150):                 # ids a suite run drew a sample holding one of the 39 real pages)
            body = b"<html><body><h1>Not Found</h1></body></html>"
            http = StatusAndHeaders("404 Not Found", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(f"https://gone.example/{n}", "response",
                                                          payload=io.BytesIO(body), http_headers=http))
        for name in ("dolma_sample-0000", "dolma_sample-0001", "resiliparse_CC-MAIN-2020-34_warcfile"):
            fh.write((REPO / "data" / "warc" / f"{name}.warc.gz").read_bytes())  # gzip members: one WARC after another
    config = load_config(None, {"inputs": [str(path)], "source": "web", "output": str(tmp_path / "whole")})
    files = input_files(config)
    whole, _ = phase1_task(config, input_root([f.path for f in files]))
    whole.setup()
    documents = whole.run(files[0]).documents
    whole.teardown()
    assert documents > 30

    head = measure_sample(config, files, 40, spread=False)
    assert head["drawn"] == "head" and head["records"] == 40 and head["documents"] == 0
    spread = measure_sample(config, files, 40, spread=True)
    assert spread["drawn"] == "spread" and 20 <= spread["records"] <= 80
    predicted = spread["documents"] * path.stat().st_size / spread["bytes_read"]
    assert documents / 2 <= predicted <= documents * 2, (predicted, documents, spread)
