"""The installed console script, as a user runs it."""
import pathlib
import shutil
import subprocess
import sys

from tests.conftest import CC_EXCERPT, DAVIDSON_SAMPLE

# The script next to this interpreter (the venv's), else whatever is on PATH: it must exist after install.
_beside = pathlib.Path(sys.executable).parent / "refinery"
REFINERY = str(_beside) if _beside.exists() else shutil.which("refinery")


def test_console_script_is_installed():
    assert REFINERY, "the `refinery` console script is missing: pip install -e ."


def test_run_help_explains_every_option():
    out = subprocess.run([REFINERY, "run", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for flag in ("--input", "--output", "--config", "--languages", "--lang-threshold", "--lid-model",
                 "--extract-timeout", "--max-html-bytes", "--num-shards", "--overwrite", "--runner"):
        assert flag in out.stdout, flag


def test_every_option_of_every_command_has_help_and_shows_its_default():
    import argparse

    from pipeline.commands.calibrate import build_parser as calibrate
    from pipeline.commands.inspect_cli import build_parser as inspect
    from pipeline.commands.train_quality_cli import build_parser as train_quality
    from pipeline.job.run import build_parser as run
    from training import report
    from training.ablate import parser as ablate
    from training.config import parser as train
    from training.sample import parser as sample
    from training.tokenizer import parser as train_tokenizer
    from training.tokens import parser as tokenize

    parsers = [run(), inspect(), calibrate(), train_quality(), train_quality("train-toxicity"), train(),
               tokenize(), train_tokenizer(), sample(), ablate(),
               report.memory_parser(), report.parallel_parser(), report.numerics_parser(), report.training_parser()]
    for parser in parsers:
        shows_defaults = parser.formatter_class is argparse.ArgumentDefaultsHelpFormatter
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            where = f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"
            assert action.help and action.help != argparse.SUPPRESS, f"{where}: no help text"
            if action.default not in (None, False, "", [], ()) and not shows_defaults:
                assert "default" in action.help.lower(), f"{where}: help does not show the default {action.default!r}"


def test_version_and_the_help_of_train_and_report():
    for args in (["--version"], ["run", "--version"]):
        out = subprocess.run([REFINERY, *args], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == "refinery 0.1.0", out
    out = subprocess.run([REFINERY, "train", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--nproc-per-node N" in out.stdout
    out = subprocess.run([REFINERY, "--help"], capture_output=True, text=True, timeout=120)
    assert "inspect" in out.stdout and "--version" in out.stdout


def test_bad_input_is_a_one_line_error_not_a_traceback(tmp_path):
    out = subprocess.run([REFINERY, "run", "--input", str(tmp_path / "none*.warc.gz"), "--output", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "matches no files" in out.stderr and "Traceback" not in out.stderr


def test_small_mistakes_are_one_line_naming_the_flag_and_what_is_valid(tmp_path):
    """Issue 54's edges: a --mix weight that is no number names --mix; a --plan file nested too deeply is one line
    before the run, not an internal error after it; an unknown inspect --reason lists the valid ones; inspect into a
    closed pipe (`| head`) ends quietly."""
    def one_line(*args):
        done = subprocess.run([REFINERY, *map(str, args)], capture_output=True, text=True, timeout=300)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
        return done.returncode, lines[0]

    out = tmp_path / "o"
    code, line = one_line("run", "--input", CC_EXCERPT, "--output", out, "--mix", "web=abc")
    assert code == 2 and line.startswith("refinery run: error: --mix: the weight of 'web' must be a number")
    nested = tmp_path / "plan.json"
    nested.write_text("[" * 5000)
    code, line = one_line("run", "--input", CC_EXCERPT, "--output", out, "--plan", nested)
    assert code == 2 and "is not a `refinery plan --save` file" in line and not out.exists()
    done = subprocess.run([REFINERY, "run", "--input", str(CC_EXCERPT), "--output", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    code, line = one_line("inspect", out, "--reason", "gopher_too_few_word")
    assert code == 2 and "--reason 'gopher_too_few_word' is no reason of refinery; one of: " in line
    assert "gopher_too_few_words" in line
    piped = subprocess.run(f"{REFINERY} inspect {out} --kept --sample 20 --chars 5000 | head -1; "
                           "echo status ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True,
                           text=True, timeout=300)
    assert "Traceback" not in piped.stderr and "BrokenPipe" not in piped.stderr, piped.stderr
    assert piped.stdout.splitlines()[-1] in ("status 141", "status 0")  # 0: all of it fitted the pipe's buffer


def test_run_prints_the_funnel_and_progress(tmp_path):
    out = subprocess.run([REFINERY, "run", "--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"),
                          "--progress-every", "0.2"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "conservation holds: read 16 = kept" in out.stdout
    assert "languages kept:" in out.stdout and (tmp_path / "o" / "report.json").exists()
    assert (tmp_path / "o" / "report.html").exists()
    progress = [line for line in out.stderr.splitlines() if line.startswith("[refinery] read ")]
    assert progress, out.stderr  # a log (not a terminal): plain lines while the job runs
    size_mb = CC_EXCERPT.stat().st_size / 1e6
    assert f"/{size_mb:.1f} MB (" in progress[-1] and "extract " in "".join(progress)


def test_progress_line_says_what_is_done_of_what_and_when_it_ends():
    """The estimate comes from the input bytes read since the start (not a recent rate: bytes come in bursts), says
    when it has none, and a stage is shown against the documents read only once all of the input is read."""
    from pipeline.counters import BYTES_READ
    from pipeline.reports.progress import progress_line

    now = {BYTES_READ: 100_000_000, "warc.in": 800, "extract.in": 300, "langid.in": 250}
    line = progress_line(now, 20.0, ["warc", "extract", "langid"], total_bytes=200_000_000)
    assert line == ("[refinery] read 100.0/200.0 MB (50%, 5.00 MB/s) · warc 800 · extract 300 · langid 250 · "
                    "reading ETA 0:20")  # 100 MB left at the 5 MB/s read since the start
    assert progress_line(now, 5.0, ["warc"], 200_000_000).endswith("· no estimate yet")  # too early to tell
    assert progress_line({BYTES_READ: 1_000_000}, 60.0, [], 200_000_000).endswith("· no estimate yet")  # too little
    done = {**now, BYTES_READ: 200_000_000}
    assert progress_line(done, 40.0, ["warc", "extract"], 200_000_000).endswith(
        "warc 800 · extract 300/800 · input read; no estimate for the rest")
    assert progress_line(now, 20.0, [], 0).endswith("no estimate (the input's size is unknown)")


def test_train_quality_command(tmp_path):
    import json

    from tests.conftest import SENTENCES_DIR

    negatives = tmp_path / "neg.jsonl"
    negatives.write_text("".join(json.dumps({"body": line}) + "\n"
                                 for line in (SENTENCES_DIR / "de.txt").read_text(encoding="utf-8").splitlines()))
    model = tmp_path / "model.ftz"
    out = subprocess.run([REFINERY, "train-quality", "--positive", str(SENTENCES_DIR / "en.txt"),
                          "--negative", str(negatives), "--text-field", "body", "--output", str(model),
                          "--epochs", "5", "--dim", "8", "--bucket", "20000"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "held-out: precision" in out.stdout and model.exists()
    card = json.loads((tmp_path / "model.ftz.card.json").read_text())
    assert card["sizes"]["positive_train"] + card["sizes"]["positive_test"] == 100
    held = card["held_out_metrics"]["f1"]  # a floor above what the data reaches: nothing written without --force
    common = [REFINERY, "train-quality", "--positive", str(SENTENCES_DIR / "en.txt"), "--negative", str(negatives),
              "--text-field", "body", "--output", str(tmp_path / "weak.ftz"), "--epochs", "5", "--dim", "8", "--bucket", "20000",
              "--min-f1", str(round(held + 0.01, 3))]
    refused = subprocess.run(common, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "under min_f1" in refused.stderr and "--force" in refused.stderr
    assert not (tmp_path / "weak.ftz").exists() and "Traceback" not in refused.stderr
    assert subprocess.run(common + ["--force"], capture_output=True, text=True, timeout=300).returncode == 0
    assert (tmp_path / "weak.ftz").exists()
    bad = subprocess.run([REFINERY, "train-quality", "--positive", str(tmp_path / "missing.txt"),
                          "--negative", str(negatives), "--output", str(model)], capture_output=True, text=True)
    assert bad.returncode == 2 and "error" in bad.stderr and "Traceback" not in bad.stderr


def test_train_help_and_a_missing_manifest_is_a_one_line_error(tmp_path):
    out = subprocess.run([REFINERY, "train", "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    for flag in ("--data", "--strategy", "--grad-accum", "--precision", "--grad-checkpoint", "--resume",
                 "--tokenizer", "--mode", "--spike-factor"):
        assert flag in out.stdout, flag
    out = subprocess.run([REFINERY, "train", "--data", str(tmp_path), "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "manifest.json" in out.stderr and "Traceback" not in out.stderr


def test_run_and_train_share_one_error_style_for_settings(tmp_path):
    """Both commands load settings the same way: a bad value is one line naming the setting, exit 2."""
    run = subprocess.run([REFINERY, "run", "--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"),
                          "--set", "langid.threshold=2"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stderr.strip() == \
        "refinery run: error: langid: threshold must be in [0, 1], got 2.0"
    train = subprocess.run([REFINERY, "train", "--data", str(tmp_path), "--out", str(tmp_path / "r"),
                            "--set", "spike.factor=high"], capture_output=True, text=True, timeout=120)
    assert train.returncode == 2 and train.stderr.strip() == \
        "refinery train: error: spike.factor: expected a number, got 'high'"
    ranks = subprocess.run([REFINERY, "train", "--nproc-per-node", "two", "--data", str(tmp_path), "--out",
                            str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert ranks.returncode == 2 and ranks.stderr.strip() == \
        "refinery train: error: --nproc-per-node: expected a positive integer, got 'two'"
    assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()


def test_train_toxicity_command_makes_a_model_the_stage_loads(tmp_path):
    import csv
    import json

    from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer

    with open(DAVIDSON_SAMPLE, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for name, classes in (("toxic", ("0", "1")), ("clean", ("2",))):
        texts = [" ".join(r["tweet"].split()) for r in rows if r["class"] in classes][:800]
        (tmp_path / f"{name}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    model = tmp_path / "tox.ftz"
    out = subprocess.run([REFINERY, "train-toxicity", "--toxic", str(tmp_path / "toxic.txt"), "--clean",
                          str(tmp_path / "clean.txt"), "--output", str(model), "--epochs", "5", "--ngrams", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    card = json.loads((tmp_path / "tox.ftz.card.json").read_text())
    assert set(card["labels"]) == {"__label__toxic", "__label__clean"} and card["held_out_metrics"]["f1"] > 0.8
    stage = ToxicityScorer(ToxicityConfig(model=str(model)))
    stage.check()
    assert stage.score("you stupid bitch, shut your mouth")[0] > stage.score("We met for lunch at noon today.")[0]
    usage = subprocess.run([REFINERY, "train-toxicity", "--help"], capture_output=True, text=True, timeout=120)
    assert "--toxic" in usage.stdout and "--clean" in usage.stdout and "toxicity_score" in usage.stdout


def test_progress_counts_text_sources_among_the_documents_read():
    from pipeline.counters import BYTES_READ
    from pipeline.reports.progress import progress_line

    # 185 WARC records and 122 text records: langid's 307 documents are of 307 read, not of 185
    now = {BYTES_READ: 1_000_000, "warc.in": 185, "read_text.in": 122, "extract.in": 185, "langid.in": 307}
    line = progress_line(now, 1.0, ["warc", "read_text", "extract", "langid"], total_bytes=1_000_000)
    assert "warc 185 · read_text 122 · extract 185/307 · langid 307/307 ·" in line


def test_every_command_keeps_to_one_exit_code_and_names_the_file_and_the_flag(tmp_path, capsys):
    """2 for a mistake in what was asked, with one line that names the path and what happened (not Python's
    "[Errno 2] ..."), and the flag a missing input came from."""
    from common.settings import error_text
    from pipeline.job.config import ConfigError, load_config
    from pipeline.job.inputs import as_written, check_inputs
    from training import report

    missing = tmp_path / "nothing.jsonl"
    try:
        open(missing)
    except OSError as exc:
        assert error_text(exc) == f"{missing}: no such file or directory"
    assert error_text(ValueError("bad\n  value")) == "bad value"

    assert report.main(["memory", "--run", str(tmp_path)]) == 2
    assert report.main(["memory"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"refinery report memory: error: --run {tmp_path}: cannot read summary.json ({tmp_path}/summary.json: "
                   "no such file or directory); is it the --out of a finished `refinery train`?",
                   "refinery report memory: error: give --params (and optionally the shape) or --run"]

    config = load_config(None, {"sources": [f"en={missing}"], "inputs": []})
    try:
        check_inputs([str(missing)], as_written(config))
        raise AssertionError("a missing input must be refused")
    except ConfigError as exc:
        assert str(exc) == f"--source en={str(missing)!r} matches no files"
