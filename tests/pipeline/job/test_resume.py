"""Resumable runs: a run killed (SIGKILL, as an OOM kill or a lost machine) in phase 1 or inside phase 2,
then `refinery run --resume`, gives the uninterrupted run's shards byte for byte, its ledger and its
funnel; changed inputs or phase-1 settings are detected and redone; a plain rerun says how to resume."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from pipeline.job.faults import KILL_ENV
from pipeline.job.outdir import compare_outputs
from pipeline.job.run import run
from tests.conftest import WARC_DIR

# Four real WARC files (Common Crawl, Dolma samples): four prepared parts.
FILES = ["cc_whirlwind_CC-MAIN-2024-22.warc.gz", "dolma_sample-0000.warc.gz", "dolma_sample-0001.warc.gz",
         "resiliparse_CC-MAIN-2020-34_warcfile.warc.gz"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("in")
    for name in FILES:
        shutil.copy2(WARC_DIR / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def uninterrupted(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "out"
    report = run(["--input", str(inputs / "*.warc.gz"), "--output", str(out), "--quiet"])
    return out, report


def _refinery(*args, kill_at=None):
    env = dict(os.environ)
    env.pop(KILL_ENV, None)
    if kill_at:
        env[KILL_ENV] = kill_at
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "run", *args, "--quiet"],
                          capture_output=True, text=True, env=env, timeout=600)


def _markers(out):
    return sorted(p for p in os.listdir(out / "prepared") if p.endswith(".done.json"))


@pytest.mark.parametrize("kill_at, parts_left", [("prepared:2", 2), ("shard:1", 4)])
def test_killed_run_resumes_to_the_same_output(inputs, uninterrupted, tmp_path, kill_at, parts_left):
    expected, whole = uninterrupted
    out = tmp_path / "out"
    killed = _refinery("--input", str(inputs / "*.warc.gz"), "--output", str(out), kill_at=kill_at)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert len(_markers(out)) == parts_left
    assert not (out / "manifest.json").exists()
    if kill_at.startswith("shard"):
        assert list((out / "data").glob("part-*.parquet"))  # it died inside phase 2, a shard already written

    if kill_at.startswith("prepared"):
        from pipeline.job.outdir import OutputError

        plain = ["--input", str(inputs / "*.warc.gz"), "--output", str(out), "--quiet"]
        with pytest.raises(OutputError, match="stale lock .*pass --resume"):
            run(plain)
        (out / ".refinery.lock").unlink()  # as if the run had failed cleanly: its parts still say how to go on
        with pytest.raises(OutputError, match=r"prepared parts of an unfinished run \(2 input file\(s\) done\): "
                                              "pass --resume"):
            run(plain)

    resumed = run(["--input", str(inputs / "*.warc.gz"), "--output", str(out), "--resume", "--quiet"])
    assert resumed["status"] == "ok" and resumed["conservation"]["holds"]
    assert resumed["prepared"]["files_reused"] == parts_left
    assert resumed["prepared"]["files_prepared"] == len(FILES) - parts_left
    assert compare_outputs(str(expected), str(out)) == []
    assert resumed["funnel"] == whole["funnel"]
    assert (out / "manifest.json").exists()


def test_changed_input_or_phase1_setting_is_redone(inputs, uninterrupted, tmp_path):
    expected, _ = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(expected, out)
    folder = tmp_path / "in"
    shutil.copytree(inputs, folder)  # copies keep their mtimes: the same files

    from pipeline.job.parts import part_key

    part = {name: out / "prepared" / part_key("web", name) for name in FILES}
    os.utime(folder / FILES[1], (1e9, 1e9))  # a changed input file: its part is redone
    part[FILES[2]].with_suffix(".docs.parquet").unlink()  # a part file lost: its marker commits nothing
    part[FILES[3]].with_suffix(".done.json").write_text('{"cut short')  # a marker cut short: not a commit
    changed_file = run(["--input", str(folder / "*.warc.gz"), "--output", str(out), "--resume", "--quiet"])
    assert changed_file["prepared"] == {"folder": "prepared", "files_prepared": 1, "files_reused": 1,
                                        "files_redone": 2}
    assert compare_outputs(str(expected), str(out)) == []  # the copies moved: parts name files below the root

    # phase-1 settings (another extraction engine, a stricter rule): every part is redone, as a fresh run
    stricter = ["--extract-engine", "resiliparse", "--set", "gopher_quality.min_words=200"]
    redone = run(["--input", str(folder / "*.warc.gz"), "--output", str(out), "--resume", "--quiet", *stricter])
    assert redone["prepared"]["files_redone"] == 4
    fresh = tmp_path / "fresh"
    run(["--input", str(folder / "*.warc.gz"), "--output", str(fresh), "--quiet", *stricter])
    assert compare_outputs(str(fresh), str(out)) == []
    assert redone["kept"] < changed_file["kept"]


def test_resume_and_overwrite_exclude_each_other(inputs, tmp_path):
    both = _refinery("--input", str(inputs / "*.warc.gz"), "--output", str(tmp_path / "o"), "--resume", "--overwrite")
    assert both.returncode == 2 and "exclude each other" in both.stderr and "Traceback" not in both.stderr


def test_limit_and_sample_fraction(inputs, uninterrupted, tmp_path):
    from pipeline.job.readers import in_sample
    from stages.record import stable_id

    limited = run(["--input", str(inputs / "*.warc.gz"), "--output", str(tmp_path / "l"), "--quiet", "--limit", "40"])
    assert limited["conservation"]["read"] == 40 and limited["conservation"]["holds"]
    marker_records = [json.loads((tmp_path / "l" / "prepared" / m).read_text())["records"]
                      for m in _markers(tmp_path / "l")]
    assert sum(marker_records) == 40  # files in name order until 40 records; later files not read

    sampled = run(["--input", str(inputs / "*.warc.gz"), "--output", str(tmp_path / "s"), "--quiet",
                   "--sample-fraction", "0.3"])
    _, whole = uninterrupted
    assert sampled["conservation"]["holds"]
    assert 0.2 < sampled["conservation"]["read"] / whole["conservation"]["read"] < 0.4
    ids = [stable_id("web", "f.warc.gz", str(i)) for i in range(10_000)]  # chosen by the id alone: nested samples
    small, large = ({i for i in ids if in_sample(i, f)} for f in (0.1, 0.3))
    assert small < large and 0.09 < len(small) / len(ids) < 0.11 and 0.28 < len(large) / len(ids) < 0.32


def _copy_records(source, target, first: int) -> int:
    """The first `first` records of a WARC file, copied byte for byte (one gzip member each) into `target`."""
    from stages.extraction.warc import record_spans

    spans = record_spans(str(source))[:first]
    data = (WARC_DIR / source).read_bytes()
    with open(target, "wb") as out:
        for offset, length in spans:
            out.write(data[offset:offset + length])
    return len(spans)


def test_dedup_against_an_earlier_crawl_removes_exactly_the_overlap(tmp_path):
    """Crawl A, then crawl B = other pages + 60 records copied from A: B loses exactly the copies of pages
    that are in A's output (any other copy was dropped by A's own stages, and B drops it the same way)."""
    import pyarrow.parquet as pq

    a_in, b_in = tmp_path / "a_in", tmp_path / "b_in"
    a_in.mkdir()
    b_in.mkdir()
    for name in ("dolma_sample-0000.warc.gz", "resiliparse_CC-MAIN-2020-34_warcfile.warc.gz"):
        shutil.copy2(WARC_DIR / name, a_in / name)
    shutil.copy2(WARC_DIR / "dolma_sample-0001.warc.gz", b_in / "dolma_sample-0001.warc.gz")
    _copy_records(WARC_DIR / "dolma_sample-0000.warc.gz", b_in / "overlap.warc.gz", 60)

    a_out, b_out = tmp_path / "a", tmp_path / "b"
    run(["--input", str(a_in / "*.warc.gz"), "--output", str(a_out), "--quiet"])
    in_a = {row["url"]: row["id"] for split in ("data", "valid/data")
            for row in pq.read_table(a_out / split, columns=["url", "id"]).to_pylist()}
    assert pq.read_table(a_out / "signatures").num_rows == len(in_a)

    report = run(["--input", str(b_in / "*.warc.gz"), "--output", str(b_out), "--quiet", "--dedup-against", str(a_out)])
    assert report["status"] == "ok" and report["conservation"]["holds"]
    ledger = pq.read_table(b_out / "ledger").to_pylist()
    removed = [row for row in ledger if row["stage"] == "dedup_against"]
    read_b = {row["url"] for row in ledger} | {row["url"] for split in ("data", "valid/data")
                                               for row in pq.read_table(b_out / split, columns=["url"]).to_pylist()}
    overlap = {url for url in read_b if url in in_a}
    assert overlap and {row["url"] for row in removed} == overlap
    assert all(row["file"] == "overlap.warc.gz" for row in removed)
    for row in removed:  # the ledger names the earlier run and the document there
        assert in_a[row["url"]] in row["detail"] and str(a_out) in row["detail"]
    assert report["funnel"][[f["stage"] for f in report["funnel"]].index("dedup_against")]["dropped"] == len(overlap)


def test_dedup_against_refuses_what_it_cannot_compare(inputs, uninterrupted, tmp_path):
    from pipeline.job.config import ConfigError

    old, _ = uninterrupted
    base = ["--input", str(inputs / "*.warc.gz"), "--output", str(tmp_path / "new"), "--quiet"]
    with pytest.raises(ConfigError, match="no manifest.json"):
        run([*base, "--dedup-against", str(tmp_path)])
    with pytest.raises(ConfigError, match="signatures were made with"):
        run([*base, "--dedup-against", str(old), "--set", "dedup.bands=10"])
    with pytest.raises(ConfigError, match="own --output"):
        run([*base[:3], str(old), "--dedup-against", str(old)])
    assert not (tmp_path / "new").exists()  # refused before anything was written


def test_a_document_survives_its_prepared_part_exactly():
    """Phase 2 must see what phase 1 produced: lone surrogates, float64 scores, metadata types, PII counts."""
    import pyarrow as pa

    from pipeline.job.schema import PART_SCHEMA, Signature, document_from_part, part_row
    from stages.record import Document

    doc = Document(id="a1", url="http://example.org/\udc80", source="web", text="caf\udce9 text", lang="fr",
                   lang_score=0.123456789012, quality_score=0.987654321, toxicity_score=None,
                   pii_counts={"EMAIL": 2}, record_id="<urn:uuid:1>",
                   metadata={"warc_offset": 12345, "warc_filename": "a.warc.gz", "http_status": 200})
    row = pa.Table.from_pylist([part_row(doc, Signature("key", [b"\x00" * 12]))], schema=PART_SCHEMA).to_pylist()[0]
    assert document_from_part(row) == doc
