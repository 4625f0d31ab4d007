"""bench/vs_datatrove.py's pooling of saved runs: passes side by side in run order, ratios paired within a pass."""
import json

from bench.vs_datatrove import TYPED, median_ratio, pooled, print_table


def saved(path, walls: dict[str, list[float]]):
    passes = {name: [{"wall_s": w, "cpu_s": w, "read": 10, "kept": 5} for w in ws] for name, ws in walls.items()}
    path.write_text(json.dumps({"warc": "x.warc.gz", "passes": passes}))
    return str(path)


def test_pooled_runs_keep_every_pass_and_pair_ratios_within_a_pass(tmp_path, capsys):
    first = saved(tmp_path / "1.json", {"datatrove": [40, 44], TYPED: [44, 48], "ours": [10, 11], "only here": [1, 1]})
    second = saved(tmp_path / "2.json", {"datatrove": [30, 31], TYPED: [33, 34], "ours": [10, 10]})
    runs = pooled([first, second])
    assert list(runs) == ["datatrove", TYPED, "ours"]  # a side one run lacks is left out
    assert [r["wall_s"] for r in runs["datatrove"]] == [40, 44, 30, 31]
    # a slow spell of the machine moves both sides of a pass: paired ratios 4.0, 4.0, 3.0, 3.1
    assert median_ratio(runs["datatrove"], runs["ours"]) == (3.1 + 4.0) / 2
    print_table(runs)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| ours |"))
    assert "| 4 |" in row and "| 3.55x |" in row


def test_runs_that_took_documents_through_the_stages_differently_are_not_pooled(tmp_path):
    import pytest

    chunked = saved(tmp_path / "1.json", {"datatrove": [40], "ours": [10]})
    data = json.loads(open(chunked).read())
    data["per_document"] = False
    open(chunked, "w").write(json.dumps(data))
    before = saved(tmp_path / "2.json", {"datatrove": [40], "ours": [11]})  # saved before the flag: per document
    with pytest.raises(SystemExit, match="different ways"):
        pooled([chunked, before])
    assert len(pooled([before, before])["ours"]) == 2
