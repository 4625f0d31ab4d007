"""Runs that must not publish: the manifest is the commit point, the output folder belongs to one run,
and every ordinary mistake is one error line (exit 2), never a traceback or a silent empty run."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.job.config import ConfigError
from pipeline.job.outdir import LOCK_FILE, OutputError, compare_outputs
from pipeline.job.run import run
from tests.conftest import CC_EXCERPT, WARC_DIR
from tests.reliability.hostile import (
    REPO,
    alive,
    children_of,
    cmdline,
    no_filters_config,
    one_line_error,
    prose,
    refinery,
    write_jsonl,
)


def test_a_failed_rerun_puts_the_previous_complete_output_back(tmp_path):
    """--overwrite over a complete output sets it aside (manifest first) until the new run publishes: a rerun
    that fails its checks, or is killed mid-way, leaves the previous output as it was, byte for byte."""
    out, before = tmp_path / "out", tmp_path / "before"
    ok = refinery(["run", "--input", CC_EXCERPT, "--output", out, "--quiet"])
    assert ok.returncode == 0 and (out / "manifest.json").exists(), ok.stderr[-2000:]
    shutil.copytree(out, before)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "a").write_text("plain text, no format we read\n")
    failed = refinery(["run", "--input", CC_EXCERPT, "--source", f"books={junk}/*", "--output", out,
                       "--overwrite", "--quiet"])
    assert failed.returncode == 3
    line = one_line_error(failed)
    assert "source 'books' yielded no records" in line and "previous output" in line and "put back" in line
    assert compare_outputs(str(before), str(out)) == []
    assert (out / "manifest.json").read_bytes() == (before / "manifest.json").read_bytes()
    parts = lambda folder: {p.name: p.read_bytes() for p in (folder / "prepared").iterdir()}  # noqa: E731
    assert parts(out) == parts(before)  # its prepared parts too: phase 2 can be rerun with --resume (issue 54)
    report = json.loads((out / "report.failed.json").read_text())  # what the failed rerun found
    assert report["status"] == "failed" and report["problems"]
    assert not (out / ".previous").exists()

    killed = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--input", str(CC_EXCERPT),
                             "--output", str(out), "--overwrite", "--quiet"], cwd=REPO, capture_output=True,
                            text=True, env=dict(os.environ, REFINERY_KILL_AT="shard:1"), timeout=600)
    assert killed.returncode == -9 and not (out / "manifest.json").exists() and (out / ".previous").exists()
    plain = refinery(["run", "--input", CC_EXCERPT, "--output", out, "--quiet"])
    assert plain.returncode == 2 and "stale lock" in one_line_error(plain)
    assert f"the previous complete output waits in {out / '.previous'}/" in one_line_error(plain)
    (out / LOCK_FILE).unlink()  # as that message says; the next run puts the previous output back first
    plain = refinery(["run", "--input", CC_EXCERPT, "--output", out, "--quiet"])
    assert plain.returncode == 2 and "already holds a run's outputs" in one_line_error(plain)
    assert compare_outputs(str(before), str(out)) == [] and not (out / ".previous").exists()


def test_a_run_that_keeps_nothing_warns_and_strict_fails(tmp_path):
    warn = refinery(["run", "--input", CC_EXCERPT, "--output", tmp_path / "a", "--languages", "sw", "--quiet"])
    assert warn.returncode == 0 and "kept 0 documents" in warn.stderr
    strict = refinery(["run", "--input", CC_EXCERPT, "--output", tmp_path / "b", "--languages", "sw", "--strict",
                       "--quiet"])
    assert strict.returncode == 3 and "kept 0 documents" in one_line_error(strict)
    assert not (tmp_path / "b" / "manifest.json").exists()


def test_a_second_run_on_a_held_output_is_refused_and_a_stale_lock_is_named(tmp_path):
    """A live run holds the lock file's flock; a lock file whose flock is free is a dead run's (stale); a lock file
    that is not refinery's says so and how to clear it."""
    out = tmp_path / "out"
    out.mkdir()
    lock = out / LOCK_FILE
    lock.write_text(json.dumps({"host": os.uname().nodename, "pid": os.getpid(), "started": "now"}))
    with open(lock) as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a running run holds it
        with pytest.raises(OutputError, match="in use by another refinery run"):
            run(["--input", str(CC_EXCERPT), "--output", str(out), "--quiet"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(json.dumps({"host": os.uname().nodename, "pid": dead.pid, "started": "then"}))
    with pytest.raises(OutputError, match="stale lock"):
        run(["--input", str(CC_EXCERPT), "--output", str(out), "--quiet"])
    lock.write_bytes(b"\x00garbage\xff" + b"[" * 5000)
    with pytest.raises(OutputError, match=f"lock file refinery cannot read .*delete {lock}"):
        run(["--input", str(CC_EXCERPT), "--output", str(out), "--quiet"])


def test_concurrent_resumes_of_a_dead_run_take_its_lock_over_once(tmp_path):
    """Four `--resume` runs started together on a dead run's lock: exactly one takes it over and publishes; the
    others are refused; the output is complete (every shard in the manifest) and the lock is released."""
    out = tmp_path / "out"
    inputs = [str(CC_EXCERPT), str(WARC_DIR / "warcio_example.warc.gz")]
    killed = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", *sum((["--input", i] for i in inputs), []),
                             "--output", str(out), "--quiet"], cwd=REPO, capture_output=True, text=True,
                            env=dict(os.environ, REFINERY_KILL_AT="prepared:1"), timeout=300)
    assert killed.returncode == -9 and (out / LOCK_FILE).exists()
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", *sum((["--input", i] for i in inputs), []),
                               "--output", str(out), "--resume", "--quiet"], cwd=REPO, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2, 2, 2], results
    assert sum("taken over by --resume" in err for _, err in results) == 1, results
    assert all("in use by another refinery run" in err for code, err in results if code == 2), results
    manifest = json.loads((out / "manifest.json").read_text())
    listed = {shard["path"] for shard in manifest["shards"]}
    assert listed == {f"data/{p.name}" for p in (out / "data").glob("*.parquet")}
    assert not (out / LOCK_FILE).exists()


def test_two_concurrent_runs_one_wins(tmp_path):
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--input", str(CC_EXCERPT), "--output",
                               str(out), "--quiet"], cwd=REPO, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    assert any("in use by another refinery run" in err or "already holds a run's outputs" in err for _, err in results)
    assert (out / "manifest.json").exists() and not (out / LOCK_FILE).exists()


def test_foreign_files_in_the_output_are_refused(tmp_path):
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    pq.write_table(pa.table({"text": ["not ours"]}), out / "data" / "mine.parquet")
    with pytest.raises(OutputError, match="did not write.*data/mine.parquet"):
        run(["--input", str(CC_EXCERPT), "--output", str(out), "--overwrite", "--quiet"])
    assert (out / "data" / "mine.parquet").exists()


def test_a_file_put_beside_a_runs_outputs_stays_and_one_inside_its_folders_is_refused(tmp_path, capsys):
    """`make report-screenshot` writes report.png next to the outputs: the next `--overwrite` (make demo) must not
    refuse the folder as foreign, nor remove the picture; a file inside data/ would pass for a shard."""
    out = tmp_path / "out"
    run(["--input", str(CC_EXCERPT), "--output", str(out), "--quiet"])
    (out / "report.png").write_bytes(b"a picture of report.html")
    run(["--input", str(CC_EXCERPT), "--output", str(out), "--overwrite", "--quiet"])
    assert (out / "report.png").read_bytes() == b"a picture of report.html" and (out / "manifest.json").exists()
    assert "also holds report.png, which refinery did not write: left in place" in capsys.readouterr().err
    pq.write_table(pa.table({"text": ["not ours"]}), out / "data" / "mine.parquet")
    with pytest.raises(OutputError, match="did not write in the folders it writes .data/mine.parquet"):
        run(["--input", str(CC_EXCERPT), "--output", str(out), "--overwrite", "--quiet"])


def test_a_readme_of_the_users_is_never_replaced_by_the_dataset_card(tmp_path):
    """The run writes its dataset card to OUT/README.md: a README.md it did not write (in an empty folder, or put in
    place of a run's card) is refused in one line and left as it was, even with --overwrite."""
    mine = "# My corpus\n\nNotes I keep with the data.\n"
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "README.md").write_text(mine)
    with pytest.raises(OutputError, match="holds a README.md refinery did not write"):
        run(["--input", str(CC_EXCERPT), "--output", str(alone), "--overwrite", "--quiet"])
    assert (alone / "README.md").read_text() == mine and sorted(os.listdir(alone)) == ["README.md"]
    out = tmp_path / "out"
    run(["--input", str(CC_EXCERPT), "--output", str(out), "--quiet"])
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "\n- refinery\n" in card
    (out / "README.md").write_text(mine)
    with pytest.raises(OutputError, match="holds a README.md refinery did not write"):
        run(["--input", str(CC_EXCERPT), "--output", str(out), "--overwrite", "--quiet"])
    assert (out / "README.md").read_text() == mine and (out / "manifest.json").exists()


def test_unknown_options_and_language_codes_are_refused_with_a_hint(tmp_path):
    with pytest.raises(ConfigError, match="--langauges.*did you mean --languages"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--langauges", "en"])
    with pytest.raises(ConfigError, match="'english'"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--languages", "english"])
    with pytest.raises(ConfigError, match="did you mean en"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--config",
             str(no_filters_config(tmp_path / "c.yaml", "langid: {languages: [eng]}\n"))])
    assert not (tmp_path / "o").exists()  # nothing was written before the refusal


@pytest.mark.parametrize("case", ["folder-input", "file-output", "yaml-syntax", "inf-shard-size", "beam-typo"])
def test_ordinary_mistakes_are_one_error_line(tmp_path, case):
    args = {"folder-input": ["--input", WARC_DIR, "--output", tmp_path / "o"],
            "file-output": ["--input", CC_EXCERPT, "--output", tmp_path / "f"],
            "yaml-syntax": ["--input", CC_EXCERPT, "--output", tmp_path / "o", "--config", tmp_path / "bad.yaml"],
            "inf-shard-size": ["--input", CC_EXCERPT, "--output", tmp_path / "o", "--config", tmp_path / "inf.yaml"],
            "beam-typo": ["--input", CC_EXCERPT, "--output", tmp_path / "o", "--runer=FnApiRunner"]}[case]
    (tmp_path / "f").write_text("a file")
    (tmp_path / "bad.yaml").write_text("langid:\n  threshold: [0.5\n")
    (tmp_path / "inf.yaml").write_text("shard_size_mb: .inf\n")
    proc = refinery(["run", *args])
    assert proc.returncode == 2
    line = one_line_error(proc)
    expected = {"folder-input": "is a folder", "file-output": "is a file", "yaml-syntax": "not valid YAML at line",
                "inf-shard-size": "shard_size_mb", "beam-typo": "did you mean --runner"}[case]
    assert expected in line, line


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupt_prints_how_to_continue_and_releases_the_output(tmp_path, how):
    """Ctrl-C reaches the whole process group (the extraction child too), as in a terminal; SIGTERM the
    main process, as `timeout` or a scheduler sends it."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", "--input", str(WARC_DIR / "*.warc.gz"),
                             "--output", str(out)], cwd=REPO, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not (out / LOCK_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(4)  # inside the job
    children = [pid for pid in children_of(proc.pid) if "spawn_main" in cmdline(pid)]  # the extraction child
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    err = proc.stderr.read()
    assert code == (130 if how == "ctrl-c" else 143), err[-3000:]  # 128 + the signal, as a shell reports it
    assert f"interrupted by {'SIGINT' if how == 'ctrl-c' else 'SIGTERM'}" in err
    assert "Traceback" not in err and "ERROR" not in err and "--overwrite" in err, err[-3000:]
    assert not (out / LOCK_FILE).exists() and not (out / "manifest.json").exists()
    assert not list(out.glob("ledger/beam-temp-*")) and not (out / "_shard_stats").exists()
    deadline = time.monotonic() + 10
    while [pid for pid in children if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in children if alive(pid)]


def test_text_records_are_capped_and_read_per_record(tmp_path):
    """The library path (no subprocess): a JSONL file whose only problem is one line."""
    rows = [{"id": i, "text": prose(i)} for i in range(6)]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    lines = path.read_bytes().split(b"\n")
    lines[2] = b'{"id": 2, "text": "' + b"y" * 5000 + b'"}'
    path.write_bytes(b"\n".join(lines))
    from stages.formats import JSONL
    from stages.textsource import TextSourceConfig, read_text_records
    with open(path, "rb") as fh:
        results = list(read_text_records(fh, source="s", filename=str(path), fmt=JSONL,
                                         config=TextSourceConfig(max_record_bytes=1000)))
    assert len(results) == 6
    assert [getattr(r, "reason", None) for r in results].count("too_large") == 1
    assert len({r.id for r in results}) == 6


def test_mix_repeats_are_capped_and_the_unreachable_share_is_reported(tmp_path):
    web = write_jsonl(tmp_path / "web.jsonl", [{"id": i, "text": prose(i)} for i in range(40)])
    tiny = write_jsonl(tmp_path / "tiny.jsonl", [{"id": 0, "text": prose(60)}])
    out = tmp_path / "out"
    config = no_filters_config(tmp_path / "c.yaml", "dedup: {exact: false, near: false}\npii: {enabled: false}\n")
    proc = refinery(["run", "--input", web, "--source", f"tiny={tiny}", "--mix", "web=0.5,tiny=0.5",
                     "--output", out, "--config", config])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cannot be reached with at most 4 copies" in proc.stderr
    rows = [r for f in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert sorted(r["epoch"] for r in rows if r["source"] == "tiny") == [0, 1, 2, 3]
    report = json.loads((out / "report.json").read_text())
    assert report["mix"]["capped_sources"] == ["tiny"] and report["mix"]["achieved"]["tiny"] < 0.5


@pytest.mark.parametrize("case", ["train-size", "tokenizer-folder", "quality-column", "ranks-out-held"])
def test_training_side_mistakes_are_one_error_line(tmp_path, case):
    pq.write_table(pa.table({"content": ["some words here"] * 4}), tmp_path / "no-text.parquet")
    (tmp_path / "held" / "checkpoints").mkdir(parents=True)
    (tmp_path / "held" / "checkpoints" / "step-00000002.pt").write_bytes(b"an earlier run's weights")
    args = {"train-size": ["train", "--data", tmp_path, "--out", tmp_path / "run", "--size", "huge"],
            "ranks-out-held": ["train", "--nproc-per-node", "2", "--data", tmp_path, "--out", tmp_path / "held"],
            "tokenizer-folder": ["train-tokenizer", "--data", tmp_path / "shards", "--out", tmp_path / "missing" / "t.json"],
            "quality-column": ["train-quality", "--positive", tmp_path / "no-text.parquet", "--negative",
                               tmp_path / "no-text.parquet", "--output", tmp_path / "q.ftz"]}[case]
    if case == "tokenizer-folder":
        ok = refinery(["run", "--input", CC_EXCERPT, "--output", tmp_path / "shards", "--quiet"])
        assert ok.returncode == 0
    proc = refinery(args, memory_limit=False)  # torch reserves more address space than the pipeline
    assert proc.returncode == 2, proc.stderr[-3000:]
    expected = {"train-size": "--size must be one of", "tokenizer-folder": "does not exist",
                "ranks-out-held": "already holds checkpoints",
                "quality-column": "no 'text' column"}[case]
    assert expected in one_line_error(proc)


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare and mount as root")
def test_a_full_disk_is_one_error_line_and_resume_finishes(tmp_path):
    """The output folder on a 300 KB filesystem (a tmpfs in a mount namespace of the test's own): the run says
    the disk is full in one line and publishes nothing; with room again, --resume finishes the run."""
    script = tmp_path / "full.sh"
    mount = tmp_path / "mnt"
    mount.mkdir()
    run_args = f"run --input '{WARC_DIR}/*.warc.gz' --output {mount}/out --quiet"
    script.write_text(f"mount -t tmpfs -o size=300k tmpfs {mount}\n"
                      f"{sys.executable} -m pipeline.cli {run_args}\necho rc=$?\n"
                      f"cp -r {mount}/out {tmp_path}/kept\n")
    proc = subprocess.run(["unshare", "--mount", "bash", str(script)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert "rc=1" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    line = one_line_error(proc)
    assert "no space left on the device" in line and "--resume" in line, line
    kept = tmp_path / "kept"
    assert not (kept / "manifest.json").exists()
    resumed = refinery(["run", "--input", f"{WARC_DIR}/*.warc.gz", "--output", kept, "--resume", "--quiet"])
    assert resumed.returncode == 0 and (kept / "manifest.json").exists(), resumed.stderr[-3000:]
