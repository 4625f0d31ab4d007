"""The same job on other local runner settings gives the same output."""
import pyarrow.parquet as pq

from pipeline.job.outdir import compare_outputs
from pipeline.job.run import run
from tests.conftest import CC_EXCERPT, WAYBACK


def rows(out):
    table = pq.read_table(str(out / "data"), columns=["id", "lang", "text"])
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "lang", "text"))))


def test_two_worker_processes_match_in_process_run(tmp_path, capfd):
    inputs = [f"--input={CC_EXCERPT}", f"--input={WAYBACK}", "--paragraph-dedup"]
    single = run([*inputs, "--output", str(tmp_path / "one"), "--quiet"])
    capfd.readouterr()
    multi = run([*inputs, "--output", str(tmp_path / "two"), "--progress-every", "1",
                 "--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    err = capfd.readouterr().err.splitlines()
    # the worker processes' ~50 lines of Beam INFO logging stay out of the terminal; progress comes from the
    # phase-1 markers (the workers report no metrics while they run)
    assert not [line for line in err if not line.startswith("[refinery]")], err
    assert any(line.startswith(("[refinery] read ", "[refinery] job running")) for line in err), err
    assert rows(tmp_path / "one") == rows(tmp_path / "two")
    assert compare_outputs(str(tmp_path / "one"), str(tmp_path / "two")) == []  # shards' bytes, ledger, edit book
    assert single["edits"]["paragraph_dedup"]["documents"] >= 10
    assert single["funnel"] == multi["funnel"]
    assert multi["conservation"]["holds"] and multi["documents_read"] == 16 + 128
