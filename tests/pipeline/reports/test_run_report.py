"""What a run tells about itself: ledger provenance, kept copies that exist, report.html in a real browser."""
import html.parser
import json
import re

import apache_beam as beam
import duckdb
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to
from PIL import Image, ImageStat

from pipeline.commands.inspect_cli import main as inspect_main
from pipeline.job.config import load_config
from pipeline.job.ledger import ResolveKeptCopies
from pipeline.job.schema import ledger_row
from pipeline.reports import browser
from stages.record import Document


def ledger(out):
    return pq.read_table(str(out / "ledger")).to_pylist()


def test_ledger_rows_say_where_the_page_came_from_and_what_was_measured(demo_run):
    out, _ = demo_run
    rows = ledger(out)
    assert rows
    for r in rows:
        assert r["file"] and r["file"].endswith(".warc.gz") and r["offset"] is not None and r["offset"] >= 0, r
        assert r["snippet"] is None or len(r["snippet"]) <= 300
    by_reason = {}
    for r in rows:
        by_reason.setdefault(r["reason"], []).append(r)
    for r in by_reason["lang_below_threshold"]:
        assert r["lang"] and r["value"] < r["threshold"] and f"{r['value']:.3f}" in r["detail"]
    for r in by_reason["gopher_too_few_words"]:
        assert r["value"] < r["threshold"] and r["detail"].startswith(f"{int(r['value'])} < {int(r['threshold'])}")
        assert r["snippet"] and r["lang"]
    for r in rows:  # after language ID every row knows its language; after extraction, its text
        if r["stage"] not in ("warc", "url_filter", "extract", "text_repair", "langid"):
            assert r["lang"] and r["snippet"], r


def test_a_kept_id_always_names_a_document_in_the_output(demo_run):
    out, _ = demo_run
    duplicates = [r for r in ledger(out) if r["reason"] in ("exact_duplicate", "near_duplicate")]
    assert duplicates and all(r["kept_id"] for r in duplicates)
    missing = duckdb.sql(f"select count(*) from '{out}/ledger/*.parquet' where kept_id is not null and kept_id "
                         f"not in (select id from '{out}/data/*.parquet')").fetchall()[0][0]
    assert missing == 0
    # the demo has copies whose exact-dedup survivor was itself a near duplicate: followed to the end
    assert any(" was a near_duplicate of " in r["detail"] for r in duplicates)


def test_chains_of_kept_copies_are_followed_to_the_output():
    def doc(i):
        return Document(id=i, url=f"http://x/{i}", source="web", text=f"text {i}")
    drops = [
        doc("a").drop("exact_dedup", "exact_duplicate", "kept b", kept_id="b"),
        doc("b").drop("near_dedup", "near_duplicate", "kept c", kept_id="c"),  # c is in the output
        doc("d").drop("exact_dedup", "exact_duplicate", "kept e", kept_id="e"),
        doc("e").drop("bad_words", "bad_words", "density"),                     # e left later
        doc("f").drop("exact_dedup", "exact_duplicate", "kept g", kept_id="g"),  # g is in the output
    ]
    with beam.Pipeline("FnApiRunner") as p:
        resolved = (p | beam.Create(drops) | ResolveKeptCopies(rounds=2)
                    | beam.Map(lambda d: (d.id, d.kept_id, d.detail)))
        assert_that(resolved, equal_to([
            ("a", "c", "kept b; b was a near_duplicate of c"), ("b", "c", "kept c"),
            ("d", None, "kept e; that copy was dropped later by bad_words (bad_words)"),
            ("e", None, "density"), ("f", "g", "kept g")]))


def test_snippets_are_bounded_and_can_be_turned_off():
    drop = Document(id="x", url="u", source="web", text="word " * 2000, lang="en",
                    metadata={"warc_filename": "f.warc.gz", "warc_offset": 7}).drop("c4", "c4_too_long", "long",
                                                                                     value=10000, threshold=100)
    row = ledger_row(drop, 300)
    assert len(row["snippet"]) == 300 and (row["value"], row["threshold"]) == (10000.0, 100.0)
    assert (row["file"], row["offset"], row["lang"]) == ("f.warc.gz", 7, "en")
    assert ledger_row(drop, 0)["snippet"] is None
    assert load_config(None, {"ledger_snippet_chars": 0}).ledger_snippet_chars == 0


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.reasons, self.external, self.svgs = [], [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        self.svgs += tag == "svg"
        if tag == "section" and "data-reason" in a:
            self.reasons.append((a["data-stage"], a["data-reason"]))
        for key in ("src", "href"):
            if a.get(key) and re.match(r"^(https?:)?//", a[key]):
                self.external.append(a[key])


def test_report_html_has_every_reason_and_loads_nothing_from_the_network(demo_run):
    out, report = demo_run
    page = _Page()
    text = (out / "report.html").read_text(encoding="utf-8")
    page.feed(text)
    assert not page.external and "<link" not in text
    in_ledger = {(r["stage"], r["reason"]) for r in ledger(out)}
    assert set(page.reasons) == in_ledger
    assert page.svgs >= len(in_ledger) + 5  # funnel, tokens, reasons, languages, record types, ...
    for heading in ("Funnel", "Why pages were dropped", "The output", "Near-duplicates", "Time per stage"):
        assert f"<h2>{heading}</h2>" in text
    assert "Kept, closest to the threshold" in text
    assert "Extraction engine <b>trafilatura</b></p>" in text  # no cascade: no fallback count
    assert "toxicity_score of kept documents" in text and "no threshold: scored only" in text  # what 0.5/0.7/0.9 drop
    near = text.split("<h2>Near-duplicates</h2>", 1)[1].split("<h2>", 1)[0]
    assert near.count("<div class='card'>") == 3 and "Edges carried per component round" in near  # S-curve, sizes, rounds
    saved = json.loads((out / "report.json").read_text())
    assert {t["stage"] for t in saved["stage_times"]} >= {"extract", "langid", "gopher_quality"}
    assert all(t["mean_ms"] > 0 for t in saved["stage_times"])


def test_report_html_in_headless_chromium(demo_run, tmp_path):
    if browser.find_chromium() is None:
        pytest.skip("Chromium is not installed and could not be (make test installs the Debian package `chromium`)")
    out, _ = demo_run
    loaded = browser.load(str(out / "report.html"))
    assert loaded.console == []  # no console messages, no uncaught errors
    assert 'data-ready="1"' in loaded.dom  # the page's script ran to the end
    shot = browser.screenshot(str(out / "report.html"), str(tmp_path / "report.png"))
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 2400)
    assert ImageStat.Stat(image).stddev[0] > 10  # not a blank page: text and charts


def test_inspect_shows_sampled_drops_with_their_text_and_numbers(demo_run, capsys):
    out, _ = demo_run
    assert inspect_main([str(out), "--reason", "gopher_too_few_words", "--sample", "3"]) == 0
    shown = capsys.readouterr().out
    matched = sum(1 for r in ledger(out) if r["reason"] == "gopher_too_few_words")
    assert shown.startswith(f"{matched} dropped documents match; showing 3")
    blocks = shown.split("─── ")[1:]
    assert len(blocks) == 3
    for block in blocks:
        assert "dropped:  gopher_quality · gopher_too_few_words" in block
        assert re.search(r"measured: \d+  \(threshold \d+\)", block) and "  │ " in block and ".warc.gz @ byte" in block
    assert inspect_main([str(out), "--reason", "gopher_too_few_words", "--sample", "3"]) == 0
    assert capsys.readouterr().out == shown  # a seeded sample: the same pages again


def test_inspect_follows_a_duplicate_to_its_kept_copy(demo_run, capsys):
    out, _ = demo_run
    duplicate = next(r for r in ledger(out) if r["reason"] == "exact_duplicate")
    assert inspect_main([str(out), "--id", duplicate["id"]]) == 0
    shown = capsys.readouterr().out
    assert "dropped:  exact_dedup · exact_duplicate" in shown
    assert f"── the copy that was kept ──\nid:       {duplicate['kept_id']}" in shown
    assert inspect_main([str(out), "--kept", "--lang", "zh", "--sample", "1"]) == 0
    assert "kept:     in the output\nlanguage: zh" in capsys.readouterr().out
    assert inspect_main([str(out), "--id", "no-such-id"]) == 1
    assert "no document 'no-such-id'" in capsys.readouterr().err
