"""`refinery plan` predicts a run from a 100-record sample; the real run's report.json sets what it measured
next to the prediction. On the bench WARC (1,033 real pages; half of them, `--sample-fraction 0.5`, on
both sides, to keep the suite short) CPU, peak memory, prepared and output bytes must be within a factor
of 2 of the prediction, records within 25 %."""
import json
import subprocess
import sys

import pytest

from pipeline.job.run import run
from tests.conftest import REPO

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
    assert plan["sample"]["records"] == 100
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
