"""Paragraph dedup in the job, on the bundled real pages: the Wayback captures of casinocity.com share their
network banner, gambling warning and footer; those paragraphs stay in one page and leave the others, whose
own text stays. Every cut is in the edit book, the shards' `edits` column, the report and `refinery
inspect`; a resumed run writes the same bytes (the other runners: tests/pipeline/engines/test_portable.py and
test_runners.py run with --paragraph-dedup)."""
from __future__ import annotations

import collections
import json
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from pipeline.job.outdir import compare_outputs
from pipeline.job.run import run
from stages.extraction.warc import record_spans
from stages.paragraphs import normalized
from stages.reference import ntrex_documents
from tests.conftest import MULTILINGUAL_SAMPLE, REPO, WARC_DIR, WAYBACK, WarcBuilder
from tests.pipeline.conftest import WARC_GLOB

BANNER = "CASINO CITY NETWORK: Online Casino City"


@pytest.fixture(scope="module")
def paragraph_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("paragraphs") / "out"
    report = run(["--input", WARC_GLOB, "--output", str(out), "--quiet", "--paragraph-dedup"])
    return out, report


def documents(out):
    return {row["id"]: row for split in ("data", "valid/data")
            for row in pq.read_table(out / split, columns=["id", "url", "text", "edits", "epoch"]).to_pylist()
            if row["epoch"] == 0}


def lines_of(text):
    return [normalized(line) for line in text.split("\n") if normalized(line)]


def test_a_sites_template_stays_in_one_page_and_each_page_keeps_its_own_text(paragraph_run, demo_run):
    out, report = paragraph_run
    assert report["status"] == "ok" and report["conservation"]["holds"]
    before, after = documents(demo_run[0]), documents(out)
    casino = [i for i, d in before.items() if BANNER in d["text"]]
    assert len(casino) >= 10
    assert sum(BANNER in after[i]["text"] for i in casino if i in after) == 1  # in one page, gone from the others
    occurs = collections.Counter(line for d in before.values() for line in set(lines_of(d["text"])))
    for doc_id in casino:
        if doc_id not in after:
            continue
        own = [line for line in lines_of(before[doc_id]["text"]) if occurs[line] == 1]
        assert own and set(own) <= set(lines_of(after[doc_id]["text"]))  # the page's own text all stays
    # nothing else changed: a document kept in both runs lost only paragraphs that other documents share
    for doc_id, doc in after.items():
        lost = set(lines_of(before[doc_id]["text"])) - set(lines_of(doc["text"]))
        assert all(occurs[line] > 1 for line in lost), (doc["url"], lost)
        assert bool(lost) == bool(doc["edits"])


def test_every_cut_is_in_the_edit_book_the_column_and_the_report(paragraph_run):
    out, report = paragraph_run
    docs = documents(out)
    book = pq.read_table(out / "edits").to_pylist()
    assert book and all(row["stage"] == "paragraph_dedup" for row in book)
    in_output = [row for row in book if row["id"] in docs]
    assert len(in_output) >= len(book) - 5  # a few edited pages may be dropped by a later stage
    checked = 0  # cut lines that PII left alone (in the kept copy, PII replaced phone numbers and emails)
    for row in in_output:
        (edit,) = docs[row["id"]]["edits"]
        assert (edit["stage"], edit["paragraphs"], edit["chars"]) == (row["stage"], row["paragraphs"], row["chars"])
        owner = docs.get(row["kept_in"][0])
        first = lines_of(row["removed"].split("\n")[0])
        if owner is not None and not any(c.isdigit() or c == "@" for c in first[0]):
            assert set(first) <= set(lines_of(owner["text"]))  # what was cut is in the page that keeps it
            checked += 1
    assert checked >= 10 and sum(1 for d in docs.values() if d["edits"]) == len(in_output)
    edits = report["edits"]["paragraph_dedup"]
    assert (edits["documents"], edits["chars"]) == (len(book), sum(row["chars"] for row in book))
    assert 0 < edits["share_of_text"] < 0.1 and edits["repeated_paragraphs"] >= 10
    top = edits["most_repeated"][0]
    assert top["documents"] >= 10 and top["sites"] == ["www.casinocity.com"]  # the archived site, not the archive
    assert any(t["text"] == BANNER for t in edits["most_repeated"])
    funnel = {f["stage"]: f for f in report["funnel"]}
    assert list(funnel).index("paragraph_dedup") == list(funnel).index("near_dedup") + 1
    assert funnel["paragraph_dedup"]["notes"]["chars_removed"] == edits["chars"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Text cut from kept documents" in html and BANNER in html


def test_inspect_shows_what_was_cut_and_where_it_stays(paragraph_run):
    out, _ = paragraph_run
    row = max(pq.read_table(out / "edits").to_pylist(), key=lambda r: r["chars"])
    shown = subprocess.run([sys.executable, "-m", "pipeline.cli", "inspect", str(out), "--id", row["id"]],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"cut:      paragraph_dedup · {row['paragraphs']} paragraph(s)" in shown.stdout
    assert row["kept_in"][0] in shown.stdout and row["removed"].split("\n")[0].strip()[:30] in shown.stdout


def test_a_resumed_run_writes_the_same_bytes(paragraph_run, tmp_path):
    expected, _ = paragraph_run
    out = tmp_path / "out"
    shutil.copytree(expected / "prepared", out / "prepared")
    for marker in sorted((out / "prepared").glob("*.done.json"))[:3]:
        marker.unlink()  # as if the run had died with three input files still to prepare
    resumed = run(["--input", WARC_GLOB, "--output", str(out), "--quiet", "--paragraph-dedup", "--resume"])
    assert resumed["prepared"]["files_reused"] == len(list(WARC_DIR.glob("*.warc.gz"))) - 3
    assert compare_outputs(str(expected), str(out)) == []


def _split_records(source, evens, odds) -> None:
    """A WARC's records, byte for byte (one gzip member each): every other record into one file, the rest into
    another."""
    spans, data = record_spans(str(source)), source.read_bytes()
    for target, part in ((evens, spans[0::2]), (odds, spans[1::2])):
        target.write_bytes(b"".join(data[offset:offset + length] for offset, length in part))


def test_paragraphs_of_an_earlier_run_are_cut_from_a_new_one(tmp_path, demo_run):
    """Crawl A: half of the Wayback captures; crawl B: the other half. Their pages differ, but
    casinocity.com's template is in both: with --dedup-against A, B keeps none of it."""
    for name in ("a_in", "b_in"):
        (tmp_path / name).mkdir()
    _split_records(WAYBACK, tmp_path / "a_in" / "a.warc.gz", tmp_path / "b_in" / "b.warc.gz")
    a_out, b_out = tmp_path / "a", tmp_path / "b"
    run(["--input", str(tmp_path / "a_in" / "*.warc.gz"), "--output", str(a_out), "--quiet", "--paragraph-dedup"])
    assert any(BANNER in d["text"] for d in documents(a_out).values())
    report = run(["--input", str(tmp_path / "b_in" / "*.warc.gz"), "--output", str(b_out), "--quiet",
                  "--paragraph-dedup", "--dedup-against", str(a_out)])
    assert report["status"] == "ok" and report["conservation"]["holds"]
    assert not any(BANNER in d["text"] for d in documents(b_out).values())
    book = pq.read_table(b_out / "edits").to_pylist()
    banner_rows = [row for row in book if BANNER in (row["removed"] or "")]
    assert banner_rows and all(str(a_out) in row["kept_in"][0] for row in banner_rows)  # kept in A, named with its run

    from pipeline.job.config import ConfigError

    with pytest.raises(ConfigError, match="no paragraph hashes"):  # the demo run hashed no paragraphs
        run(["--input", str(tmp_path / "b_in" / "*.warc.gz"), "--output", str(tmp_path / "c"), "--quiet",
             "--paragraph-dedup", "--dedup-against", str(demo_run[0])])
    assert json.loads((a_out / "manifest.json").read_text())["paragraph_signatures"]["min_chars"] == 30


def test_span_mode_keeps_one_copy_of_each_repeated_three_sentence_span(tmp_path):
    """C4's unit (`paragraph_dedup.unit=span`) on the same pages: the template's sentences stay in one page."""
    report = run(["--input", WARC_GLOB, "--output", str(tmp_path / "out"), "--quiet", "--paragraph-dedup",
                  "--set", "paragraph_dedup.unit=span"])
    assert report["status"] == "ok" and report["conservation"]["holds"]
    warning = "Warning: You must ensure you meet all age and other regulatory requirements before entering a"
    casino = [d for d in documents(tmp_path / "out").values() if "casinocity.com" in d["url"]]
    assert len(casino) >= 10 and sum(warning in d["text"] for d in casino) == 1
    top = report["edits"]["paragraph_dedup"]["most_repeated"][0]
    assert top["documents"] >= 10 and top["sites"] == ["www.casinocity.com"]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["paragraph_signatures"]["unit"] == "span"


def test_a_paragraph_stays_with_a_copy_when_its_original_is_dropped_by_a_page_filter(tmp_path):
    """The original of a news article (NTREX; its Last-Modified the earliest date) carries a spam comment full of
    listed sexual words, and a portal republished the article inside a longer page. The page filters (bad words,
    toxicity, listed sites) judge every page before the dedup stages count copies, so the original is out before
    owners are chosen and the portal's copy keeps the article: no paragraph leaves the corpus with a page that
    another stage drops (they once ran after paragraph dedup, and the article left with the original)."""
    articles = [text for code, _, text in ntrex_documents(str(MULTILINGUAL_SAMPLE)) if code == "eng-GB"]
    story = [line for line in articles[0].splitlines() if len(line) > 60][:6]
    other = [line for line in articles[1].splitlines() if len(line) > 60][:8]
    spam = ("Comment: hot webcam porn and free xxx videos, nude escorts tonight, hardcore anal sex and "
            "bondage clips, click the link for the best blowjob site")

    def html_page(paragraphs):
        body = "".join(f"<p>{p}</p>\n" for p in paragraphs)
        return f"<html><head><title>News</title></head><body><article>{body}</article></body></html>".encode()

    warc = WarcBuilder(tmp_path / "news.warc.gz")
    warc.response("https://news.example/story", html_page([*story, spam]),
                  extra_http=[("Last-Modified", "Fri, 01 Mar 2019 08:00:00 GMT")])
    warc.response("https://portal.example/today", html_page(["Today's stories, chosen by our editors.", *story, *other]))
    warc.close()
    out = tmp_path / "out"
    report = run(["--input", str(warc.path), "--output", str(out), "--quiet", "--paragraph-dedup"])
    assert report["status"] == "ok" and report["conservation"]["holds"]
    ledger = {r["url"]: (r["stage"], r["reason"]) for r in pq.read_table(out / "ledger").to_pylist()}
    assert ledger == {"https://news.example/story": ("bad_words", "bad_words_sexual")}
    kept = {d["url"]: d for d in documents(out).values()}
    assert set(kept) == {"https://portal.example/today"}
    portal = kept["https://portal.example/today"]
    assert set(map(normalized, story)) <= set(lines_of(portal["text"])) and not portal["edits"]


def test_text_records_with_dates_give_the_paragraph_to_the_earliest(tmp_path):
    """Two JSONL sets in FineWeb's layout (text, url, date): a blog post crawled in 2014 that quotes an NTREX article
    below its own paragraphs, and a 2024 record of the article's paragraphs alone, which the quality model scores
    higher (1.0 against 0.9998) and which without dates would have kept them. The 2014 record keeps them; the
    2024 copy has nothing left and is ledgered; the shards carry the record's date."""
    articles = [text for code, _, text in ntrex_documents(str(MULTILINGUAL_SAMPLE)) if code == "eng-GB"]
    story = [line for line in articles[0].splitlines() if len(line) > 60][:6]
    own = [line for line in articles[1].splitlines() if len(line) > 60][:8]
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "a.jsonl").write_text(json.dumps(
        {"text": "\n".join([*own, *story]), "url": "https://blog.example/post", "date": "2014-07-10T08:00:00Z"}) + "\n")
    (tmp_path / "new" / "b.jsonl").write_text(json.dumps(
        {"text": "\n".join(story), "url": "https://copy.example/story", "date": "2024-05-20T10:00:00Z"}) + "\n")
    out = tmp_path / "out"
    report = run(["--source", f"old={tmp_path / 'old'}/*.jsonl", "--source", f"new={tmp_path / 'new'}/*.jsonl",
                  "--output", str(out), "--quiet", "--paragraph-dedup"])
    assert report["status"] == "ok" and report["conservation"]["holds"]
    kept = {row["url"]: row for split in ("data", "valid/data")
            for row in pq.read_table(out / split, columns=["url", "text", "metadata"]).to_pylist()}
    assert set(kept) == {"https://blog.example/post"}
    blog = kept["https://blog.example/post"]
    assert blog["text"] == "\n".join([*own, *story]) and blog["metadata"]["source_date"] == "2014-07-10T08:00:00Z"
    ledger = {r["url"]: (r["stage"], r["reason"]) for r in pq.read_table(out / "ledger").to_pylist()}
    assert ledger == {"https://copy.example/story": ("paragraph_dedup", "too_much_repeated")}


def test_every_original_stays_complete_and_its_copies_and_an_aggregator_lose_what_they_copied(tmp_path):
    """One WARC, every record fetched at the same moment (no evidence in dates): three NTREX articles on their
    publisher's site; for two of them an exact mirror whose canonical names the original; a portal's copy of one
    (its own lines around the article, canonical naming the original); a digest and a wire page that carry only
    the first paragraphs (with a line of their own or none) and no canonical; and an aggregator made of the first
    paragraph of each. Exact and near dedup keep the original where the canonical says which it is; paragraph
    dedup gives each group's shared text to the complete article (stages/shared_text.py), so every original keeps
    all of its paragraphs and every other page keeps only its own lines, if any."""
    articles = [text for code, _, text in ntrex_documents(str(MULTILINGUAL_SAMPLE)) if code == "eng-GB"]
    # articles whose first five paragraphs alone the quality model scores above the whole article (0.9961 over
    # 0.9773, 0.9995 over 0.9963, 0.9999 over 0.9987): the per-paragraph choice by quality gave them to the teasers
    story = {k: [line for line in articles[i].splitlines() if len(line) > 60][:8] for k, i in zip("abd", (11, 33, 28))}
    extra = [line for line in articles[3].splitlines() if len(line) > 60]

    def html_page(paragraphs, canonical=None):
        link = f'<link rel="canonical" href="{canonical}">' if canonical else ""
        body = "".join(f"<p>{p}</p>\n" for p in paragraphs)
        return f"<html><head><title>News</title>{link}</head><body><article>{body}</article></body></html>".encode()

    pages = {
        "https://news.example/a": html_page(story["a"]),
        "https://news.example/b": html_page(story["b"]),
        "https://news.example/d": html_page(story["d"]),
        "https://mirror.example/a": html_page(story["a"], canonical="https://news.example/a"),
        "https://mirror.example/b": html_page(story["b"], canonical="https://news.example/b"),
        "https://portal.example/syndicated/a": html_page(
            ["The portal brings you this story from our partners at News Example.", *story["a"],
             "Subscribe to the portal's morning letter for more stories like this one."],
            canonical="https://news.example/a"),
        "https://digest.example/a": html_page(story["a"][:5]),
        "https://teaser.example/d": html_page(story["d"][:5]),
        "https://wire.example/b": html_page([*story["b"][:6], extra[0]]),
        "https://aggregator.example/today": html_page(
            ["Today's top stories from around the web, picked for you by our editors.",
             story["a"][0], story["b"][0], story["d"][0]]),
    }
    warc = WarcBuilder(tmp_path / "copies.warc.gz")
    for url, body in pages.items():
        warc.response(url, body)
    warc.close()
    out = tmp_path / "out"
    report = run(["--input", str(warc.path), "--output", str(out), "--quiet", "--paragraph-dedup"])
    assert report["status"] == "ok" and report["conservation"]["holds"]
    kept = {d["url"]: d for d in documents(out).values()}
    for k in "abd":  # every original, complete and uncut
        original = kept[f"https://news.example/{k}"]
        assert lines_of(original["text"]) == lines_of("\n".join(story[k])) and not original["edits"]
    ledger = {r["url"]: r for r in pq.read_table(out / "ledger").to_pylist()}
    ids = {url: d["id"] for url, d in kept.items()}
    for k in "ab":
        assert ledger[f"https://mirror.example/{k}"]["reason"] == "exact_duplicate"
        assert ledger[f"https://mirror.example/{k}"]["kept_id"] == ids[f"https://news.example/{k}"]
    article_lines = {normalized(p) for k in "abd" for p in story[k]}
    for url in pages:
        if url.startswith("https://news.example/") or url in ledger:
            continue
        assert not article_lines & set(lines_of(kept[url]["text"])), url  # the copied text is gone from each copy
    assert len(kept) + len(ledger) == len(pages)
