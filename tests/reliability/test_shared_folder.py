"""An output folder others can write to (issue 54): a symbolic link, hard link, FIFO or device planted where a run
writes (the lock, markers, manifest, report, temporary names) is refused with one line and the file it points to is
left as it was; a FIFO never makes a run wait."""
import json
import os
import shutil

import pytest

from common import files
from pipeline.job.outdir import LOCK_FILE
from tests.conftest import CC_EXCERPT
from tests.reliability.hostile import one_line_error, refinery

BEFORE = b"a user's own file, not refinery's\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "home-file"
    path.write_bytes(BEFORE)
    return path


def test_a_lock_planted_as_a_link_is_refused_and_its_target_unchanged(tmp_path, victim):
    """The probe: `OUT/.refinery.lock -> ~/file` and `--resume` took the "stale lock" over and wrote JSON into
    the file (exit 0)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(victim)
    resumed = refinery(["run", "--input", CC_EXCERPT, "--output", out, "--resume", "--quiet"], timeout=120)
    assert resumed.returncode == 2
    line = one_line_error(resumed)
    assert f"{out / LOCK_FILE}: a symbolic link" in line and "nothing was written there" in line
    assert victim.read_bytes() == BEFORE and (out / LOCK_FILE).is_symlink()
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]


def test_a_lock_planted_as_a_fifo_is_refused_at_once(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / LOCK_FILE)
    refused = refinery(["run", "--input", CC_EXCERPT, "--output", out, "--quiet"], timeout=120)  # hung before
    assert refused.returncode == 2 and f"{out / LOCK_FILE}: a FIFO" in one_line_error(refused)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "out"
    first = refinery(["run", "--input", CC_EXCERPT, "--output", out, "--quiet"])
    assert first.returncode == 0, first.stderr[-2000:]
    return out


@pytest.mark.parametrize("planted", ["report.json", "manifest.json", ".manifest.json.tmp", "data/x.parquet",
                                     "prepared/k.done.json"])
def test_a_link_anywhere_in_a_finished_output_is_refused_before_anything_is_written(tmp_path, victim, planted,
                                                                                   finished):
    out = tmp_path / "out"
    shutil.copytree(finished, out, symlinks=True)
    manifest = (out / "manifest.json").read_bytes() if planted != "manifest.json" else None
    link = out / planted
    link.parent.mkdir(exist_ok=True)
    if link.exists():
        link.unlink()
    link.symlink_to(victim)
    again = refinery(["run", "--input", CC_EXCERPT, "--output", out, "--overwrite", "--quiet"])
    assert again.returncode == 2
    assert f"holds a symbolic link to {victim} at {link}" in one_line_error(again)
    assert victim.read_bytes() == BEFORE and link.is_symlink()
    if manifest is not None:  # the earlier output is untouched: nothing was set aside or removed
        assert (out / "manifest.json").read_bytes() == manifest and not (out / ".previous").exists()


def test_writes_refuse_links_fifos_and_hard_links_planted_after_the_folder_was_checked(tmp_path, victim):
    """What each write does if a link appears during a run: O_NOFOLLOW, non-blocking open, a regular-file check
    before truncating, fresh temporary names."""
    link, fifo, hard = tmp_path / "link", tmp_path / "fifo", tmp_path / "hard"
    link.symlink_to(victim)
    os.mkfifo(fifo)
    os.link(victim, hard)
    for path, what in ((link, "a symbolic link"), (fifo, "a FIFO"), (hard, r"a file with 1 other hard link\(s\)"),
                       (tmp_path, "a folder")):
        with pytest.raises(files.UnsafeFile, match=what):
            files.open_for_writing(str(path))
        if path != hard:  # a stale temporary file is removed, which never touches another name's data
            with pytest.raises(files.UnsafeFile, match=what):
                files.write_atomically(str(tmp_path / "out.json"), "{}", temp_name=os.path.relpath(path, tmp_path))
    assert victim.read_bytes() == BEFORE and not (tmp_path / "out.json").exists()
    with pytest.raises(files.UnsafeFile, match="a symbolic link"):  # the final name: rename would replace the
        files.write_atomically(str(link), "{}")                    # link, but someone planted it: say so
    assert victim.read_bytes() == BEFORE and not (tmp_path / ".link.tmp").exists()
    files.write_atomically(str(hard), b"new")  # a rename replaces a name, never the other name's data
    assert hard.read_bytes() == b"new" and victim.read_bytes() == BEFORE
    stale = tmp_path / ".ok.json.tmp"
    stale.write_text("an earlier attempt's half")
    files.write_atomically(str(tmp_path / "ok.json"), json.dumps({"ok": 1}))
    assert json.loads((tmp_path / "ok.json").read_text()) == {"ok": 1} and not stale.exists()
