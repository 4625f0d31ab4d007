"""Several sources in one run, token-share mixing, shards per input file and the manifest."""
import hashlib
import json
import shutil

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from pipeline.job.run import run
from stages.mix import approx_tokens, copies, mix_rates, parse_weights
from tests.conftest import CC_EXCERPT
from tests.golden import check_against_golden
from tests.pipeline.conftest import prose_jsonl


def test_mix_arithmetic():
    assert parse_weights("web=7,code=2,books=1") == {"web": 0.7, "code": 0.2, "books": 0.1}
    rates = mix_rates({"web": 0.5, "books": 0.5}, {"web": 900, "books": 100})
    assert rates == {"web": 500 / 900, "books": 5.0}
    draws = [copies(f"d{i}", 0.25, seed=3) for i in range(4000)]
    assert 0.22 < sum(draws) / 4000 < 0.28 and set(draws) == {0, 1}
    assert [copies("x", 2.5, 3) for _ in range(3)] == [copies("x", 2.5, 3)] * 3  # deterministic
    assert approx_tokens("abcd" * 10) == 10
    with pytest.raises(ValueError):
        parse_weights("web")


def test_two_sources_mixed_to_the_requested_shares(mixed_run):
    tmp, report, _ = mixed_run
    achieved, requested = report["mix"]["achieved"], report["mix"]["requested"]
    assert set(achieved) == {"web", "books"}
    for source in requested:
        assert abs(achieved[source] - requested[source]) <= 0.1, report["mix"]  # stated tolerance: 10 points
    table = pq.read_table(str(tmp / "a" / "data"))
    assert set(table.column("source").to_pylist()) == {"web", "books"}
    epochs = table.column("epoch").to_pylist()
    assert max(epochs) >= 1  # the smaller source was repeated, each repeat with its own id
    assert len(set(table.column("id").to_pylist())) == table.num_rows
    assert report["conservation"]["holds"]
    funnel = {f["stage"]: f for f in report["funnel"]}
    assert "read_text" in funnel and "mix" in funnel
    page = (tmp / "a" / "report.html").read_text(encoding="utf-8")
    assert "<title>Mix: token shares</title>" in page and "requested" in page and "achieved" in page


def test_shards_follow_input_files_repeats_apart_and_reruns_are_identical(mixed_run):
    """Each input file is written as its own shards by the task that streams it (no step gathers
    documents); the mix's repeats go to shards of their own, so a reader does not meet a document's
    copies in one row group."""
    tmp, first, second = mixed_run
    manifest_a = json.loads((tmp / "a" / "manifest.json").read_text())
    manifest_b = json.loads((tmp / "b" / "manifest.json").read_text())
    assert len(manifest_a["shards"]) >= 3
    assert [s["sha256"] for s in manifest_a["shards"]] == [s["sha256"] for s in manifest_b["shards"]]
    repeats = 0
    for shard in manifest_a["shards"]:
        assert len(shard["rows_by_source"]) == 1, shard  # one input file, one source
        epochs = set(pq.read_table(tmp / "a" / shard["path"], columns=["epoch"]).column("epoch").to_pylist())
        if "-repeats-" in shard["path"]:
            repeats += shard["rows"]
            assert 0 not in epochs
        else:
            assert epochs == {0}
    assert repeats == first["output"]["repeats"] > 0
    # --shard-size-mb 0.1: a part with more text rolls over to a next shard once one holds 0.1 MB of it
    rolled = [s for s in manifest_a["shards"] if s["path"].endswith("-001.parquet")]
    assert rolled
    for shard in rolled:
        first_shard = next(s for s in manifest_a["shards"] if s["path"] == shard["path"].replace("-001.", "-000."))
        assert first_shard["tokens"] * 4 >= 100_000


def test_manifest_agrees_with_the_shards(mixed_run):
    tmp, report, _ = mixed_run
    manifest = json.loads((tmp / "a" / "manifest.json").read_text())
    for shard in manifest["shards"]:
        path = tmp / "a" / shard["path"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == shard["sha256"]
        meta = pq.ParquetFile(path).metadata
        assert meta.num_rows == shard["rows"] and meta.num_row_groups == shard["row_groups"]
        texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
        assert sum(approx_tokens(t) for t in texts) == shard["tokens"]
    assert manifest["rows"] == sum(s["rows"] for s in manifest["shards"]) == report["output"]["rows"]
    # each part's signature file as listed (a part that wrote to the anneal split once listed its last language's
    # name instead of its own: signatures/en.parquet)
    for entry in manifest["signature_files"]:
        path = tmp / "a" / entry["path"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"], entry
    assert manifest["config"]["mix"] == "web=0.5,books=0.5" and manifest["refinery_version"]
    assert pads.dataset(str(tmp / "a" / "data"), format="parquet").count_rows() == manifest["rows"]
    assert not list((tmp / "a").glob("_shard_stats*")) and not list((tmp / "a" / "data").glob(".*tmp"))


def test_broken_text_source_lines_are_ledgered(tmp_path):
    src = tmp_path / "notes.jsonl"
    good = prose_jsonl(tmp_path / "g.jsonl", ["en"], docs=2).read_text()
    src.write_text(good + "{not json\n" + json.dumps({"text": ""}) + "\n", encoding="utf-8")
    report = run(["--input", str(CC_EXCERPT), "--source", f"notes={src}", "--output", str(tmp_path / "o"), "--quiet",
                  "--no-dedup"])
    ledger = pq.read_table(str(tmp_path / "o" / "ledger")).to_pylist()
    reasons = sorted(r["reason"] for r in ledger if r["stage"] == "read_text")
    assert reasons == ["no_text", "read_error"]
    for row in ledger:  # a text record's ledger row names its file and line
        if row["stage"] == "read_text":
            assert row["file"] == "notes.jsonl" or row["file"].endswith("/notes.jsonl"), row
            assert row["line"] == (3 if row["reason"] == "read_error" else 4) and row["offset"] is None
    assert report["conservation"]["holds"] and report["documents_read"] == 16 + 4


def test_anneal_split_holds_high_quality_documents(mixed_run):
    tmp, report, _ = mixed_run
    anneal = pq.read_table(str(tmp / "a" / "anneal" / "data"))
    main = pq.read_table(str(tmp / "a" / "data"))
    assert anneal.num_rows > 0 and min(anneal.column("quality_score").to_pylist()) >= 0.9
    def share(t):
        return sum(q >= 0.9 for q in t.column("quality_score").to_pylist()) / t.num_rows

    assert share(anneal) == 1.0 > share(main)
    assert 0 < report["anneal"]["fraction_of_tokens"] <= 0.3 + 0.1
    assert json.loads((tmp / "a" / "anneal" / "manifest.json").read_text())["rows"] == anneal.num_rows
    largest = report["anneal"]["largest"]  # no page or site over its cap; the shares are of the split's tokens
    assert 0 < largest["page"][0]["share"] <= 0.25 and 0 < largest["site"][0]["share"] <= 0.5
    assert largest["page"][0]["tokens"] == max(approx_tokens(t) for t in anneal.column("text").to_pylist())


def test_text_sources_alone_skip_extraction(tmp_path):
    books = prose_jsonl(tmp_path / "books.jsonl", ["en", "de"])
    report = run(["--source", f"books={books}", "--output", str(tmp_path / "o"), "--quiet", "--no-dedup"])
    stages = [f["stage"] for f in report["funnel"]]
    assert stages[0] == "read_text" and "extract" not in stages and "warc" not in stages
    assert report["conservation"]["holds"] and report["documents_read"] == 16
    assert set(pq.read_table(str(tmp_path / "o" / "data")).column("lang").to_pylist()) == {"en", "de"}


def test_mixed_run_writes_what_it_wrote_before(mixed_run):
    """Held to the digests recorded before the last refactor (tests/golden.py)."""
    check_against_golden("mixed_run", mixed_run[0] / "a")


def test_the_output_is_a_dataset_card_that_datasets_loads(mixed_run):
    """OUT/README.md's header names every split with rows, the languages and the size; `datasets` loads the folder
    by it, and the shards alone with their declared features."""
    import datasets
    import yaml

    tmp, report, _ = mixed_run
    out = tmp / "a"
    card = (out / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(card.split("---\n")[1])
    files = {entry["split"]: entry["path"] for entry in header["configs"][0]["data_files"]}
    assert files == {"train": "data/*.parquet", "validation": "valid/data/*.parquet", "anneal": "anneal/data/*.parquet"}
    assert set(header["language"]) == {lang for lang in report["languages"] if lang}
    assert f"{report['output']['rows']:,} documents" in card and "| mix |" in card
    cache = str(tmp / "hf-cache")  # not ~/.cache: what another session left there must not answer for this one
    loaded = datasets.load_dataset(str(out), cache_dir=cache)
    manifest = json.loads((out / "manifest.json").read_text())
    assert loaded["train"].num_rows == manifest["rows"]
    assert loaded["validation"].num_rows == manifest["valid"]["rows"] > 0
    assert loaded["anneal"].num_rows == manifest["anneal"]["rows"] > 0
    assert header["dataset_info"]["splits"][0] == {"name": "train", "num_examples": manifest["rows"],
                                                   "num_bytes": sum(s["bytes"] for s in manifest["shards"])}
    shards = datasets.load_dataset("parquet", data_dir=str(out / "data"), cache_dir=cache)["train"]
    assert shards.num_rows == manifest["rows"]
    assert shards.features["metadata"]["warc_offset"] == datasets.Value("int64")
    assert shards.features.arrow_schema.field("pii_counts").type == pq.read_schema(
        next((out / "data").glob("*.parquet"))).field("pii_counts").type


def test_a_lost_shard_fails_the_load_by_the_card(mixed_run, tmp_path):
    """The card's rows per split are checked by `datasets` when it builds the folder (and key its cache: the card,
    not the files' times, names a folder's build there)."""
    import datasets

    out = tmp_path / "copy"
    shutil.copytree(mixed_run[0] / "a", out)
    next((out / "data").glob("*.parquet")).unlink()
    with pytest.raises(datasets.exceptions.NonMatchingSplitsSizesError):
        datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf-cache"))
