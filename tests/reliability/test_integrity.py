"""What the markers and the manifest protect: a prepared part altered after its marker, an input rewritten
at the same size with its mtime put back, an earlier run's damaged signatures/, shard stats that vanish.
Each accident is made on real files; the promise is byte-identical output, a clear refusal naming the file,
or no output."""
import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from pipeline.job.config import ConfigError
from pipeline.job.outdir import compare_outputs
from pipeline.job.output import MissingShardStats, collect_shards
from pipeline.job.parts import part_key
from pipeline.job.run import run
from stages.record import StageEnvironmentError
from tests.conftest import WARC_DIR

FILES = ["resiliparse_CC-MAIN-2020-34_warcfile.warc.gz", "dolma_sample-0000.warc.gz"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """Two real WARC files, run once: (inputs folder, output folder)."""
    root = tmp_path_factory.mktemp("integrity")
    inputs = root / "in"
    inputs.mkdir()
    for name in FILES:
        shutil.copy2(WARC_DIR / name, inputs / name)
    out = root / "out"
    run(["--input", str(inputs / "*.warc.gz"), "--output", str(out), "--quiet"])
    return inputs, out


def _part(out, name, kind):
    return out / "prepared" / f"{part_key('web', name)}.{kind}"


def _flip_byte(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_part_altered_or_damaged_after_its_marker_is_prepared_again(finished, tmp_path):
    inputs, expected = finished
    out = tmp_path / "out"
    shutil.copytree(expected, out)
    # another part's (valid) documents in place of this one's: the manifest would vouch for them otherwise
    shutil.copy(_part(out, FILES[1], "docs.parquet"), _part(out, FILES[0], "docs.parquet"))
    damaged = _part(out, FILES[1], "docs.parquet")
    _flip_byte(damaged, damaged.stat().st_size // 2)  # flipped bytes: would fail deep in phase 2
    report = run(["--input", str(inputs / "*.warc.gz"), "--output", str(out), "--resume", "--quiet"])
    assert report["prepared"] == {"folder": "prepared", "files_prepared": 0, "files_reused": 0, "files_redone": 2}
    assert compare_outputs(str(expected), str(out)) == []


def test_a_same_size_rewrite_with_its_mtime_put_back_is_noticed(finished, tmp_path):
    inputs, expected = finished
    folder, out = tmp_path / "in", tmp_path / "out"
    shutil.copytree(inputs, folder)
    shutil.copytree(expected, out)
    changed = folder / FILES[1]
    stat = changed.stat()
    _flip_byte(changed, stat.st_size - 100)  # inside the last gzip member: its page can no longer be read
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert changed.stat().st_size == stat.st_size and changed.stat().st_mtime_ns == stat.st_mtime_ns
    report = run(["--input", str(folder / "*.warc.gz"), "--output", str(out), "--resume", "--quiet"])
    assert report["prepared"]["files_redone"] == 1 and report["prepared"]["files_reused"] == 1
    ledger = pq.read_table(out / "ledger").to_pylist()
    assert any(row["reason"] == "read_error" and FILES[1] in row["detail"] for row in ledger)


def test_a_phase2_part_that_cannot_be_read_is_named_with_its_input(finished, tmp_path):
    """A part damaged while the run goes on (after it was checked) fails the run with one error naming the
    part and the input file it came from."""
    from pipeline.job.parts import PartUnreadable, read_rows

    _, expected = finished
    part = tmp_path / "out" / "prepared" / _part(expected, FILES[0], "docs.parquet").name
    shutil.copytree(expected / "prepared", part.parent)
    part.write_bytes(part.read_bytes()[:200])
    with pytest.raises(PartUnreadable, match=f"{part.name} \\(input web:{FILES[0]}\\) cannot be read"):
        list(read_rows(str(part)))


def test_dedup_against_refuses_a_damaged_earlier_run_naming_the_file(finished, tmp_path):
    inputs, old = finished
    manifest = json.loads((old / "manifest.json").read_text())
    listed = manifest["signature_files"]
    assert [f["path"] for f in listed] == [f"signatures/part-{i:05d}.parquet" for i in range(len(FILES))]
    assert sum(f["rows"] for f in listed) == manifest["rows"] + json.loads((old / "valid" / "manifest.json")
                                                                             .read_text())["rows"]
    base = ["--input", str(inputs / "*.warc.gz"), "--output", str(tmp_path / "new"), "--quiet"]

    damaged = tmp_path / "old"
    shutil.copytree(old, damaged)
    shutil.rmtree(damaged / "signatures")  # the whole folder lost
    with pytest.raises(ConfigError, match="signatures/part-00000.parquet is missing"):
        run([*base, "--dedup-against", str(damaged)])

    shutil.copytree(old / "signatures", damaged / "signatures")
    (damaged / "signatures" / "part-00001.parquet").unlink()  # one file lost
    with pytest.raises(ConfigError, match="signatures/part-00001.parquet is missing"):
        run([*base, "--dedup-against", str(damaged)])

    shutil.copy(old / "signatures" / "part-00000.parquet", damaged / "signatures" / "part-00001.parquet")
    with pytest.raises(ConfigError, match="signatures/part-00001.parquet (has|holds)"):  # another file in its place
        run([*base, "--dedup-against", str(damaged)])

    shutil.copy(old / "signatures" / "part-00001.parquet", damaged / "signatures" / "part-00001.parquet")
    _flip_byte(damaged / "signatures" / "part-00001.parquet", 100)  # same size and rows, other bytes
    with pytest.raises(StageEnvironmentError, match="part-00001.parquet changed since its run's manifest"):
        run([*base, "--dedup-against", str(damaged)])
    assert not (tmp_path / "new" / "manifest.json").exists()


def test_shard_stats_that_vanish_publish_nothing(finished, tmp_path):
    """The shard writers' stats are the only proof of what the shards hold: gone (another process removed
    them), nothing is published and no placeholder shard is written; present but empty, the run kept nothing
    and an empty shard is written so readers still find a dataset."""
    with pytest.raises(MissingShardStats, match="holds none of the shard writers' stats"):
        collect_shards(str(tmp_path), "data")
    assert not (tmp_path / "data").exists()
    (tmp_path / "_shard_stats").mkdir()
    (tmp_path / "_shard_stats" / "stats-00000").write_text("")
    shards = collect_shards(str(tmp_path), "data")
    assert [s["rows"] for s in shards] == [0] and pq.read_table(tmp_path / shards[0]["path"]).num_rows == 0
