"""The Python API (`import refinery`): a run from Python is the command's run, errors are one typed RunError with
the command's line and exit code, the stages apply to documents in memory, and a finished run reads back."""
import shutil

import pyarrow.parquet as pq
import pytest

import refinery
from pipeline.job.config import ConfigError
from pipeline.job.run import run as run_command
from tests.conftest import REPO, WARC_DIR

WARC = "dolma_sample-0000.warc.gz"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same job through the API and through the command's flags."""
    tmp = tmp_path_factory.mktemp("api")
    (tmp / "in").mkdir()
    shutil.copy(WARC_DIR / WARC, tmp / "in" / WARC)
    config = refinery.load_config(None, {"quality.threshold": 0.2})
    result = refinery.run(inputs=str(tmp / "in" / "*.warc.gz"), output=str(tmp / "api"), config=config,
                          settings={"dedup.near": False}, beam_args=["--runner=FnApiRunner"])
    run_command(["--input", str(tmp / "in" / "*.warc.gz"), "--output", str(tmp / "cli"), "--quiet",
                 "--set", "quality.threshold=0.2", "--set", "dedup.near=false"])
    return tmp, result


def test_a_run_from_python_writes_what_the_command_writes(runs):
    tmp, result = runs
    assert result.conservation["holds"] and result.rows > 0 and result.output == str(tmp / "api")
    stages = [row["stage"] for row in result.funnel]
    assert "warc" in stages and "exact_dedup" in stages and "near_dedup" not in stages  # the setting reached the run
    assert result.report["config"]["quality"]["threshold"] == 0.2
    cli = refinery.open_run(str(tmp / "cli"))
    assert [s["sha256"] for s in result.open().manifest["shards"]] == [s["sha256"] for s in cli.manifest["shards"]]
    assert sum(pq.read_metadata(path).num_rows for path in result.shards) == result.rows


def test_a_finished_run_reads_back_as_tables_and_a_dataset(runs):
    tmp, result = runs
    run = refinery.open_run(result.output)
    train = run.table("train")
    assert train.num_rows == result.rows == run.manifest["rows"]
    assert run.table("train", columns=["id", "text"]).column_names == ["id", "text"]
    assert run.ledger().num_rows == result.conservation["ledger"]
    assert set(run.ledger(columns=["stage"]).column("stage").to_pylist()) <= {row["stage"] for row in run.funnel}
    assert run.edits() is None  # no stage that cuts text ran
    dataset = run.hf_dataset("train")
    assert len(dataset) == train.num_rows and dataset[0]["id"] == train.column("id")[0].as_py()
    assert run.table("valid").num_rows == run.split_manifest("valid")["rows"] == result.conservation["held_out"]
    with pytest.raises(ValueError, match="no anneal split"):
        run.table("anneal")
    with pytest.raises(refinery.RunError) as missing:
        refinery.open_run(str(tmp / "nothing-here"))
    assert missing.value.exit_code == 2 and "no finished run" in missing.value.line


def test_a_failed_run_is_one_run_error_with_the_commands_line_and_code(tmp_path):
    with pytest.raises(refinery.RunError) as no_input:
        refinery.run(inputs=str(tmp_path / "none-*.warc.gz"), output=str(tmp_path / "o"))
    assert no_input.value.exit_code == 2 and no_input.value.line.startswith("error: --input")
    assert "matches no files" in no_input.value.line and no_input.value.__cause__ is not None
    with pytest.raises(refinery.RunError) as bad_setting:
        refinery.run(inputs=str(WARC_DIR / WARC), output=str(tmp_path / "o"), settings={"langid.treshold": 0.5})
    assert bad_setting.value.exit_code == 2 and "treshold" in bad_setting.value.line
    with pytest.raises(refinery.RunError) as bad_beam_flag:
        refinery.run(inputs=str(WARC_DIR / WARC), output=str(tmp_path / "o"), beam_args=["--runnr=FnApiRunner"])
    assert bad_beam_flag.value.exit_code == 2 and "--runnr" in bad_beam_flag.value.line
    assert not (tmp_path / "o").exists()  # nothing written before the settings were checked


def test_apply_runs_the_stages_over_documents_in_memory_in_order():
    prose = " ".join(["The river rose slowly through the night, and by morning the old bridge was under water."] * 8)
    page = f"<html><head><title>Flood</title></head><body><article><p>{prose}</p></article></body></html>"
    inputs = ["too short", {"html": page, "url": "https://news.example/flood"}, refinery.Document(
        id="mine", url="", source="notes", text=prose)]
    counts = {}
    results = list(refinery.apply(inputs, stages=["extract", "langid", "gopher_quality"],
                                  count=lambda name, n=1: counts.__setitem__(name, counts.get(name, 0) + n)))
    assert len(results) == 3
    (kept0, drop0), (kept1, drop1), (kept2, drop2) = results
    assert kept0 is None and drop0.stage == "gopher_quality"  # in order: one pair per input
    assert drop1 is None and kept1.lang == "en" and "bridge" in kept1.text and kept1.url == "https://news.example/flood"
    assert drop2 is None and kept2.id == "mine" and kept2.source == "notes"
    assert counts["extract.in"] == 1 and counts["langid.in"] == 3  # text skips extraction, as in a run
    with pytest.raises(ConfigError, match="no per-document stage named 'near_dedup'"):
        list(refinery.apply(["x"], stages=["near_dedup"]))
    everything = list(refinery.apply([prose], settings={"pii.enabled": False}))
    assert len(everything) == 1
    with pytest.raises(ConfigError, match="ids must be unique"):
        list(refinery.apply([{"id": "a", "text": prose}, {"id": "a", "text": prose}]))


def test_overwrite_and_resume_come_from_the_config_unless_given(runs):
    tmp, result = runs
    again = refinery.load_config(None, {"overwrite": True, "dedup.near": False, "quality.threshold": 0.2})
    rerun = refinery.run(inputs=str(tmp / "in" / "*.warc.gz"), output=result.output, config=again)
    assert rerun.rows == result.rows  # the config's overwrite: true replaced the earlier output
    with pytest.raises(refinery.RunError) as refused:
        refinery.run(inputs=str(tmp / "in" / "*.warc.gz"), output=result.output, config=again, overwrite=False)
    assert refused.value.exit_code == 2 and "--overwrite" in refused.value.line


def test_the_readme_python_block_runs_as_a_script_without_a_main_guard(tmp_path):
    """The README's Python API block saved as a script, as a user would: no `if __name__ == "__main__":`. The
    extraction worker is a fresh interpreter that does not import the script again (multiprocessing's spawn did,
    and the job ran again inside the worker until it failed with 'extraction worker did not start')."""
    import re
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Python API"):]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "__main__" not in block and "refinery.run(" in block
    script = tmp_path / "my_job.py"
    script.write_text(block, encoding="utf-8")
    (tmp_path / "data").symlink_to(REPO / "data")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].split()[1:3] == ["documents", "kept;"] and int(lines[0].split()[0]) > 0
    assert sum("documents kept" in line for line in lines) == 1  # the job ran once, not again in a child
    assert any(line.startswith("kept (en)") for line in lines) and any("dropped by" in line for line in lines)
