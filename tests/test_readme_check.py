"""The README check's reading of README.md (the check itself runs every example: `make docs-test`, in CI)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("readme_check", ROOT / "scripts" / "readme_check.py")
readme_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_check)
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_a_front_door_and_every_docs_page_is_checked():
    """README.md stays short (what it is, the two commands, a tour, where to go next); the reference lives in
    docs/, and every page of docs/ is linked from it, so the check runs every page's commands (issue 54)."""
    assert len(README.splitlines()) <= 300
    checked = [name for name, _ in readme_check.pages()]
    assert checked[0] == "README.md" and sorted(checked[1:]) == sorted(
        f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))


def test_every_example_is_run_or_named_with_the_reason_it_cannot_be():
    found = [found for _, text in readme_check.pages() for found in readme_check.commands(text)]
    assert found[0][1].startswith("make demo")
    reasons = {why for _, why in readme_check.SKIP} | {readme_check.NO_NAMESPACES}
    ran = 0
    for line, command in found:
        run, note = readme_check.prepared(command, small=True, demo_id="abc")
        if run is None:
            assert note in reasons, (line, command)
        else:
            ran += 1
            assert "crawl/" not in run and "[--" not in run and "ID" not in run.split(), (line, run)
    assert readme_check.prepared("make dask-demo # on this machine", True, None, namespaces=False) == (
        None, readme_check.NO_NAMESPACES)
    assert ran >= 30   # the demo, inspect, runs, plan/resume, dask, training, tokens, ablation, reports, readers


def test_placeholders_options_and_sizes():
    run, note = readme_check.prepared(
        ".venv/bin/refinery run --input 'crawl/*.warc.gz' --output x/ [--languages en,de] [--extract-fast]", True, None)
    assert run == ".venv/bin/refinery run --input 'data/warc/*.warc.gz' --output x/" and note == "as run"
    glob = ".venv/bin/refinery run --input 'data/warc/[!c]*.warc.gz' --output out/pool"
    assert readme_check.prepared(glob, True, None) == (glob, "")
    run, _ = readme_check.prepared("refinery train --tokenizer bytes|tokenizer.json --out o # why", True, None)
    assert run == "refinery train --tokenizer bytes --out o --steps 8 # why"
    assert readme_check.prepared("refinery train --steps 200", False, None)[0] == "refinery train --steps 200"
    assert readme_check.prepared("refinery inspect out/demo --id ID", True, None) == (None, "no ledger id in out/demo")


def test_the_sample_funnel_is_compared_with_the_demo_output():
    sample = readme_check.sample_outputs(README)["make demo"]
    assert sample[0].startswith("stage") and any(row.startswith("conservation holds") for row in sample)
    output = "\n".join(sample)
    assert readme_check.differences(sample, output) == []
    assert readme_check.differences(sample, output.replace("conservation holds", "conservation FAILED")) == [
        next(row for row in sample if row.startswith("conservation holds"))]


def test_the_check_runs_in_a_folder_of_its_own_whatever_the_checkout_holds(tmp_path, monkeypatch):
    """A clone where the README's commands were run by hand holds refined/, out/, plan.json: the check links only
    the project's own entries, so its commands find a fresh folder (issue 54)."""
    import subprocess

    repo = tmp_path / "clone"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in ("README.md", "setup.py"):
        (repo / name).write_text("x")
    (repo / "data").mkdir()
    (repo / "data" / "a.warc.gz").write_text("x")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    for leftover in ("refined", "out", "crawl-out"):
        (repo / leftover).mkdir()
    (repo / "plan.json").write_text("{}")
    (repo / ".venv").mkdir()
    assert readme_check.checkout_entries(str(repo)) == [".venv", "README.md", "data", "setup.py"]
    monkeypatch.setattr(readme_check, "ROOT", str(repo))
    work = readme_check.workspace(str(tmp_path / "work"))
    assert sorted(p.name for p in Path(work).iterdir()) == [".venv", "README.md", "data", "setup.py"]
