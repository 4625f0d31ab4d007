"""Cluster sizes and FineWeb-2's rehydration on the bundled WARCs: each kept document's `cluster_size` is
itself plus the duplicates the ledger says it was kept for, and `--rehydrate` writes it as many times as its
size's weight says (at most --mix-max-epochs), as repeats beside the mix's."""
from __future__ import annotations

import collections

import pyarrow.parquet as pq
import pytest

from common.settings import ConfigError
from pipeline.job.run import run
from stages.mix import original_id, parse_rehydration, rehydration_weight
from tests.pipeline.conftest import WARC_GLOB

WEIGHTS = "1:1,2:2,3-4:3,5-100:5,101-1000:8,1001-:1"


def rows(out):
    return [row for split in ("data", "valid/data")
            for row in pq.read_table(out / split, columns=["id", "epoch", "cluster_size"]).to_pylist()]


def test_cluster_size_is_the_document_and_the_duplicates_kept_for_it(demo_run):
    out, _ = demo_run
    ledger = pq.read_table(out / "ledger", columns=["stage", "kept_id"]).to_pylist()
    folded = collections.Counter(r["kept_id"] for r in ledger if r["stage"] in ("exact_dedup", "near_dedup"))
    docs = rows(out)
    assert all(r["epoch"] == 0 for r in docs)  # no repeats without --rehydrate
    assert {r["id"]: r["cluster_size"] for r in docs} == {r["id"]: 1 + folded.get(r["id"], 0) for r in docs}
    assert max(r["cluster_size"] for r in docs) >= 3


def test_rehydrate_repeats_each_survivor_by_its_cluster_size(demo_run, tmp_path):
    report = run(["--input", WARC_GLOB, "--output", str(tmp_path / "out"), "--quiet", "--rehydrate",
                  "--mix-max-epochs", "4"])
    assert report["status"] == "ok" and report["conservation"]["holds"]
    docs = rows(tmp_path / "out")
    originals = {r["id"]: r["cluster_size"] for r in docs if r["epoch"] == 0}
    assert originals == {r["id"]: r["cluster_size"] for r in rows(demo_run[0])}  # the same documents kept
    copies = collections.Counter(original_id(r["id"]) for r in docs)
    table = parse_rehydration(WEIGHTS)
    assert copies == {i: min(rehydration_weight(table, size), 4) for i, size in originals.items()}
    assert report["rehydration"]["repeats"] == report["output"]["repeats"] == sum(copies.values()) - len(copies) > 0


@pytest.mark.parametrize("weights", ["1:1,3-:2", "1:1,2:0,3-:1", "1:1,2:2", "2-:1", "x"])
def test_a_weight_table_that_leaves_a_size_out_or_twice_is_refused(weights, tmp_path):
    with pytest.raises(ConfigError, match="rehydrate_weights"):
        run(["--input", WARC_GLOB, "--output", str(tmp_path / "out"), "--quiet", "--rehydrate",
             "--rehydrate-weights", weights])
    assert rehydration_weight(parse_rehydration("1:1,2-9:2,10-:3"), None) == 1
