"""The same job on other local runner settings gives the same output."""
import pyarrow.parquet as pq

from pipeline.run import run
from tests.conftest import CC_EXCERPT, WAYBACK


def rows(out):
    table = pq.read_table(str(out / "data"), columns=["id", "lang", "text"])
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "lang", "text"))))


def test_two_worker_processes_match_in_process_run(tmp_path):
    inputs = [f"--input={CC_EXCERPT}", f"--input={WAYBACK}"]
    single = run([*inputs, "--output", str(tmp_path / "one"), "--quiet"])
    multi = run([*inputs, "--output", str(tmp_path / "two"), "--quiet",
                 "--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    assert rows(tmp_path / "one") == rows(tmp_path / "two")
    assert single["funnel"] == multi["funnel"]
    assert multi["conservation"]["holds"] and multi["documents_read"] == 16 + 128
