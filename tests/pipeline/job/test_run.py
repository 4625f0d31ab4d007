"""The whole job under Beam's FnApiRunner on the bundled real WARC files."""
import collections
import json
import shutil

import duckdb
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from pipeline.job.config import ConfigError
from pipeline.job.run import run
from pipeline.job.schema import DOCUMENT_SCHEMA, LEDGER_SCHEMA
from stages.extraction.warc import read_warc
from stages.langid import LangIdConfig
from stages.record import StageEnvironmentError
from stages.thresholds import LanguageSettings, load_thresholds
from tests.conftest import CC_EXCERPT, WARC_DIR, pathological_warc
from tests.golden import check_against_golden
from tests.pipeline.conftest import WARC_GLOB


def read_dir(path):
    return pq.read_table(str(path))


def test_shards_have_the_declared_schema_and_text(demo_run):
    out, _ = demo_run
    for shard in sorted((out / "data").glob("part-*.parquet")):
        assert pq.read_schema(shard).equals(DOCUMENT_SCHEMA, check_metadata=True)
    table = read_dir(out / "data")
    assert table.num_rows > 100
    assert all(t.strip() for t in table.column("text").to_pylist())
    assert len(set(table.column("id").to_pylist())) == table.num_rows
    thresholds = LanguageSettings(LangIdConfig(), "langid", load_thresholds("bundled"))  # the run's default
    for lang, score in zip(table.column("lang").to_pylist(), table.column("lang_score").to_pylist()):
        assert score >= thresholds.get(lang)[0].threshold, lang  # e.g. Aragonese (an) at 0.26: Latin's threshold
    scores = table.column("quality_score").to_pylist()
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores) and len(set(scores)) > 10
    ledger_files = sorted((out / "ledger").glob("part-*.parquet"))
    assert ledger_files and all(pq.read_schema(f).equals(LEDGER_SCHEMA, check_metadata=True) for f in ledger_files)


def test_common_crawl_languages_are_found(tmp_path):
    # quality filters off: this checks what language ID assigns (several zh/de pages are spam the filters drop)
    cfg = tmp_path / "no-filters.yaml"
    cfg.write_text("gopher_quality: {enabled: false}\ngopher_repetition: {enabled: false}\npii: {enabled: false}\n")
    run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--quiet", "--config", str(cfg)])
    rows = read_dir(tmp_path / "o" / "data").to_pylist()
    cc = collections.Counter(r["lang"] for r in rows)
    assert {"zh", "de", "ru", "en", "nl"} <= set(cc), cc
    assert cc["zh"] >= 8
    assert all(r["pii_counts"] is None for r in rows)  # stage off: null, not zero


def test_every_document_read_is_in_the_output_or_the_ledger_exactly_once(demo_run):
    out, report = demo_run
    kept_ids = read_dir(out / "data").column("id").to_pylist()
    ledger = read_dir(out / "ledger").to_pylist()
    read_ids = []
    for path in sorted(WARC_DIR.glob("*.warc.gz")):
        with open(path, "rb") as fh:  # the job names each file by its path below the inputs' folder
            read_ids += [r.id for r in read_warc(fh, source="web", filename=path.name)]
    assert collections.Counter(kept_ids + [r["id"] for r in ledger]) == collections.Counter(read_ids)
    c = report["conservation"]
    assert c["holds"] and c["read"] == len(read_ids) == c["kept"] + c["ledger"]
    assert all(r["stage"] and r["reason"] for r in ledger)


def test_funnel_adds_up_stage_by_stage(demo_run):
    out, report = demo_run
    assert json.loads((out / "report.json").read_text()) == json.loads(json.dumps(report, default=str))
    funnel = report["funnel"]
    assert [f["stage"] for f in funnel] == ["warc", "url_filter", "optout_signals", "extract", "text_repair", "langid",
                                            "gopher_repetition", "gopher_quality", "bad_words", "toxicity", "quality",
                                            "optout", "exact_dedup", "near_dedup", "pii", "write"]
    for f in funnel:
        assert f["in"] == f["kept"] + f["dropped"], f
        assert f["counters_agree_with_ledger"], f
    for before, after in zip(funnel, funnel[1:]):
        assert after["in"] == before["kept"]
    assert funnel[-1]["kept"] == report["kept"]
    assert report["warc_records_by_type"]["response"] == 185
    assert report["warc_records_by_type"]["revisit"] == 1


def test_quirky_records_are_handled(demo_run):
    out, _ = demo_run
    ledger = {r["url"]: r for r in read_dir(out / "ledger").to_pylist()}
    clipped = ledger["http://www.houstonpress.com/music/a-humble-chance-the-rapper-leads-a-spiritual-awakening-at-revention-8866723"]
    assert (clipped["stage"], clipped["reason"]) == ("warc", "truncated_record")
    rows = read_dir(out / "data").to_pylist()
    wayback = [r for r in rows if r["metadata"]["warc_filename"].endswith("copycat_wayback-topic-02.warc.gz")]
    assert len(wayback) > 80  # of 128; the rest are ledgered by language ID and the Gopher rules
    assert all(r["metadata"]["http_status"] is None and r["metadata"]["warc_date"] is None for r in wayback)
    assert {"cp1252", "cp1250", "utf-8"} <= {r["metadata"]["charset"] for r in wayback}


def test_readers_of_the_field_open_the_shards(demo_run):
    out, report = demo_run
    glob = str(out / "data" / "*.parquet")
    assert pads.dataset(str(out / "data"), format="parquet").count_rows() == report["kept"]
    langs = dict(duckdb.sql(f"SELECT lang, count(*) FROM '{glob}' GROUP BY lang").fetchall())
    assert langs == report["languages"]
    assert duckdb.sql(f"SELECT count(*) FROM '{glob}' WHERE metadata.charset IS NULL").fetchall() == [(0,)]
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("parquet", data_files=glob, split="train", cache_dir=str(out.parent / "hf-cache"))
    assert ds.num_rows == report["kept"] and set(ds.column_names) == set(DOCUMENT_SCHEMA.names)


def test_rerun_refuses_to_mix_outputs_and_overwrite_is_deterministic(demo_run, tmp_path):
    out = tmp_path / "demo"  # a copy: the session's demo run is read by other tests
    shutil.copytree(demo_run[0], out)
    report = demo_run[1]
    with pytest.raises(ConfigError, match="already holds a run's outputs"):
        run(["--input", WARC_GLOB, "--output", str(out), "--quiet"])
    before = sorted(read_dir(out / "data").column("id").to_pylist())
    again = run(["--input", WARC_GLOB, "--output", str(out), "--quiet", "--overwrite"])
    assert sorted(read_dir(out / "data").column("id").to_pylist()) == before
    assert again["funnel"] == report["funnel"]


def test_hostile_input_ends_in_the_ledger_and_the_job_finishes(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    expected = pathological_warc(inputs / "hostile.warc.gz")
    (inputs / "not-a-warc.warc.gz").write_bytes(b"\x00\x01\x02 definitely not a WARC file" * 100)
    out = tmp_path / "out"
    report = run(["--input", str(inputs / "*.warc.gz"), "--output", str(out), "--quiet"])
    ledger = read_dir(out / "ledger").to_pylist()
    by_url = {r["url"]: (r["stage"], r["reason"]) for r in ledger if r["url"]}
    for url, expect in expected.items():
        if expect is not None:
            assert by_url.get(url) == expect, url
    kept_urls = set(read_dir(out / "data").column("url").to_pylist())
    # the chunked+gzip copy decodes to the same page: one survives, the other is an exact duplicate
    pair = {"http://t.example/good", "http://t.example/wget-chunked-gzip"}
    assert len(pair & kept_urls) == 1
    (dropped,) = pair - kept_urls
    assert by_url[dropped] == ("exact_dedup", "exact_duplicate")
    read_errors = [r for r in ledger if r["reason"] == "read_error"]
    assert len(read_errors) == 1 and "not-a-warc.warc.gz" in read_errors[0]["detail"]
    assert report["conservation"]["holds"]


def test_no_matching_input_or_missing_model_fails_before_the_job(tmp_path):
    with pytest.raises(ConfigError, match="matches no files"):
        run(["--input", str(tmp_path / "nothing-*.warc.gz"), "--output", str(tmp_path / "o"), "--quiet"])
    with pytest.raises(FileNotFoundError, match="language-ID model not found"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--quiet",
             "--lid-model", str(tmp_path / "missing.bin")])
    with pytest.raises(FileNotFoundError, match="quality model not found"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--quiet",
             "--quality-model", str(tmp_path / "missing.bin")])
    (tmp_path / "corrupt.bin").write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="cannot load fastText model"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--quiet",
             "--quality-model", str(tmp_path / "corrupt.bin")])
    assert not (tmp_path / "o" / "data").exists()


def test_broken_extractor_fails_the_job_instead_of_ledgering_everything(tmp_path, monkeypatch):
    broken = tmp_path / "site" / "trafilatura"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('a broken trafilatura installation')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))  # what the pre-flight check and the child import
    with pytest.raises(StageEnvironmentError, match="trafilatura cannot run here|extraction worker did not start"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o"), "--quiet"])
    cfg = tmp_path / "c.yaml"
    cfg.write_text("extract:\n  worker_memory_mb: 1\n")  # too little to start: refused before any work
    with pytest.raises(ConfigError, match="extract: worker_memory_mb must be at least 256"):
        run(["--input", str(CC_EXCERPT), "--output", str(tmp_path / "o2"), "--quiet", "--config", str(cfg)])
    assert not (tmp_path / "o2").exists()


def test_natural_duplicates_in_real_warcs_are_found(demo_run):
    out, report = demo_run
    ledger = read_dir(out / "ledger").to_pylist()
    dups = [r for r in ledger if r["stage"] in ("exact_dedup", "near_dedup")]
    # allenai.org captured three times in one dolma sample: two copies go, one stays
    assert sum(r["url"] == "https://allenai.org/" for r in dups) == 2
    kept_urls = read_dir(out / "data").column("url").to_pylist()
    assert kept_urls.count("https://allenai.org/") == 1
    # Wikipedia pages captured twice (and under redirecting titles) in the Wayback file
    assert sum("en.wikipedia.org" in r["url"] for r in dups) >= 4
    assert all(r["detail"].startswith("kept ") for r in dups)
    d = report["dedup"]
    assert d["converged"] and (d["bands"], d["rows"]) == (14, 8) and d["s_curve"]["0.8"] == 0.924
    assert sum(d["cluster_sizes"].values()) >= 1
    # settled components leave the loop: no edge is carried past the round after convergence
    assert d["edges_per_round"] and len(d["edges_per_round"]) <= d["rounds"] + 1 < d["max_rounds"]


def test_outputs_do_not_depend_on_where_the_inputs_lie(demo_run, tmp_path):
    """Files are named below the inputs' common folder: a copy elsewhere (another clone, a bucket) gives
    the same ids and byte-identical shards."""
    import hashlib
    import shutil

    out, report = demo_run
    copy = tmp_path / "elsewhere" / "deeper" / "warc"
    shutil.copytree(WARC_DIR, copy)
    moved = run(["--input", str(copy / "*.warc.gz"), "--output", str(tmp_path / "o"), "--quiet"])
    assert moved["input_root"] == str(copy) + "/" and report["input_root"] == str(WARC_DIR) + "/"

    def digests(folder):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((folder / "data").glob("*.parquet"))}

    assert digests(tmp_path / "o") == digests(out)


def test_compare_outputs_finds_a_changed_shard_a_lost_ledger_row_and_a_changed_funnel(demo_run, tmp_path):
    """What `local_cluster --same-as` checks a cluster run against."""
    import json
    import shutil

    import pyarrow.parquet as pq

    from pipeline.job.outdir import compare_outputs

    out, _ = demo_run
    assert compare_outputs(str(out), str(out)) == []
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shard = next((copy / "data").glob("part-*.parquet"))
    table = pq.read_table(shard)
    pq.write_table(table.slice(1), shard)  # one document fewer
    ledger = next((copy / "ledger").glob("part-*.parquet"))
    pq.write_table(pq.read_table(ledger).slice(1), ledger)
    report = json.loads((copy / "report.json").read_text())
    report["funnel"][0]["kept"] += 1
    (copy / "report.json").write_text(json.dumps(report))
    found = compare_outputs(str(out), str(copy))
    assert [d.split(":")[0] for d in found] == ["data/", "ledger rows differ", "report.json funnel differs"], found


def test_demo_run_writes_what_it_wrote_before(demo_run):
    """Held to the digests recorded before the last refactor (tests/golden.py)."""
    check_against_golden("demo_run", demo_run[0])
