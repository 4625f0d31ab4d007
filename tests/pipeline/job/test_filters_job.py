"""The Beam job with every filter on (C4 and FineWeb switched on by config), on pages built from real sentences."""
import html

import pyarrow.parquet as pq
import pytest

from pipeline.job.config import ConfigError
from pipeline.job.run import run
from stages.reference import ntrex_documents
from tests.conftest import DAVIDSON_SAMPLE, MULTILINGUAL_SAMPLE, SENTENCES_DIR, WarcBuilder, finished_rows
from tests.stages.test_gopher import near_miss_page

EN = (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()
DE = (SENTENCES_DIR / "de.txt").read_text(encoding="utf-8").splitlines()


def page(paragraphs, title="A page"):
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paragraphs)
    return (f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>\n{body}"
            f"</article></body></html>").encode()


def test_each_rule_family_leaves_its_reason_in_the_ledger(tmp_path):
    prose = [line for line in EN if line.endswith(".") and len(line.split()) >= 8]
    pages = {
        "http://t.example/good": prose[:20] + ["For tickets write to anna.schmidt@posteo.de or call +49 30 12345678 today."],
        "http://t.example/german": [line for line in DE if line.endswith(".")][:20],
        "http://t.example/repeated": prose[20:28] + prose[20:26],
        "http://t.example/short": [line for line in prose if len(line.split()) <= 12][:3],  # < 50 words
        "http://t.example/lorem": prose[40:55] + ["Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod."],
        "http://t.example/one-dup-line": prose[60:80] + [min(prose[60:80], key=len)],
    }
    article = next(text for code, _, text in ntrex_documents(str(MULTILINGUAL_SAMPLE)) if code == "eng-GB")
    near_miss, limit = near_miss_page(article.splitlines())   # over one n-gram limit by 4 %, quality 0.98
    pages["http://t.example/near-miss"] = near_miss.splitlines()
    warc = WarcBuilder(tmp_path / "pages.warc.gz")
    for url, paragraphs in pages.items():
        warc.response(url, page(paragraphs, title=url.rsplit("/", 1)[1]))
    warc.close()
    cfg = tmp_path / "all-filters.yaml"
    cfg.write_text("c4: {enabled: true}\nfineweb: {enabled: true}\n"
                   f"gopher_repetition: {{max_dup_ngram_chars: [[5, {limit[0][1]}]]}}\n")
    report = run(["--input", str(tmp_path / "pages.warc.gz"), "--output", str(tmp_path / "out"), "--quiet",
                  "--config", str(cfg)])

    ledger = {r["url"]: (r["stage"], r["reason"]) for r in pq.read_table(str(tmp_path / "out" / "ledger")).to_pylist()}
    assert ledger == {
        "http://t.example/repeated": ("gopher_repetition", "dup_line_fraction"),
        "http://t.example/short": ("gopher_quality", "gopher_too_few_words"),
        "http://t.example/lorem": ("c4", "c4_lorem_ipsum"),
        "http://t.example/one-dup-line": ("fineweb", "fineweb_dup_line_chars"),
    }
    kept = {r["url"]: r for r in finished_rows(tmp_path / "out")}
    assert set(kept) == {"http://t.example/good", "http://t.example/german", "http://t.example/near-miss"}
    assert kept["http://t.example/near-miss"]["metadata"]["rescued"].startswith("gopher_repetition:dup_ngram_chars n=5")
    assert kept["http://t.example/good"]["metadata"]["rescued"] is None
    from pipeline.reports import explore

    shown, total = explore.rescued(str(tmp_path / "out"))
    assert total == 1 and shown[0]["url"] == "http://t.example/near-miss"
    shown_in = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Rescued by evidence" in shown_in and "t.example/near-miss" in shown_in
    good = kept["http://t.example/good"]
    assert "<EMAIL>" in good["text"] and "<PHONE>" in good["text"] and "posteo" not in good["text"]
    assert good["pii_counts"] == {"email": 1, "ip_address": 0, "phone": 1, "credit_card": 0, "iban": 0}
    assert kept["http://t.example/german"]["lang"] == "de"

    stages = [f["stage"] for f in report["funnel"]]
    assert stages == ["warc", "url_filter", "optout_signals", "extract", "text_repair", "langid", "gopher_repetition",
                      "gopher_quality", "c4", "fineweb", "bad_words", "toxicity", "quality", "optout", "exact_dedup",
                      "near_dedup", "pii", "write"]
    assert report["conservation"]["holds"]
    pii = next(f for f in report["funnel"] if f["stage"] == "pii")
    assert pii["notes"] == {"replaced.EMAIL": 1, "replaced.PHONE": 1}
    assert next(f for f in report["funnel"] if f["stage"] == "gopher_repetition")["notes"] == {"rescued.dup_ngram_chars": 1}


def test_decontamination_in_the_job(tmp_path):
    from tests.conftest import TEST_DATA

    gsm8k = TEST_DATA / "benchmarks" / "gsm8k" / "test.jsonl"
    import json
    problem = json.loads(gsm8k.read_text().splitlines()[3])["question"]
    prose = [line for line in EN if line.endswith(".") and len(line.split()) >= 8]
    warc = WarcBuilder(tmp_path / "pages.warc.gz")
    warc.response("http://t.example/leaky", page(prose[:12] + [problem] + prose[12:24], title="leaky"))
    warc.response("http://t.example/clean", page(prose[30:50], title="clean"))
    warc.close()
    args = ["--input", str(tmp_path / "pages.warc.gz"), "--quiet", "--decontaminate", str(gsm8k)]
    report = run(args + ["--output", str(tmp_path / "excise")])
    kept = {r["url"]: r["text"] for r in finished_rows(tmp_path / "excise")}
    assert set(kept) == {"http://t.example/leaky", "http://t.example/clean"}
    assert problem[:50] not in kept["http://t.example/leaky"] and prose[0][:40] in kept["http://t.example/leaky"]
    decontam = next(f for f in report["funnel"] if f["stage"] == "decontaminate")
    assert decontam["notes"]["contaminated_docs.gsm8k"] == 1 and decontam["notes"]["excised_docs"] == 1
    (edit,) = pq.read_table(str(tmp_path / "excise" / "edits")).to_pylist()  # the excision is in the edit book
    assert edit["url"] == "http://t.example/leaky" and edit["stage"] == "decontaminate"
    assert " ".join(problem.split())[:50] in edit["removed"] and report["edits"]["decontaminate"]["chars"] == edit["chars"] > 0
    n_items = len(gsm8k.read_text().splitlines())
    assert report["decontamination"] == {"gsm8k": {"items": n_items, "too_short": 0}}  # what the index loaded
    html = (tmp_path / "excise" / "report.html").read_text()
    assert f"<td>gsm8k</td><td class=\"num\">{n_items}</td><td class=\"num\">1</td>" in html
    run(args + ["--output", str(tmp_path / "drop"), "--decontam-policy", "drop"])
    ledger = pq.read_table(str(tmp_path / "drop" / "ledger")).to_pylist()
    assert [(r["url"], r["reason"]) for r in ledger] == [("http://t.example/leaky", "contaminated")]
    assert "gsm8k:3" in ledger[0]["detail"]
    assert ledger[0]["value"] >= 1 and ledger[0]["snippet"]  # n-grams matched; the page's text


def test_url_filter_runs_before_extraction_and_only_on_its_sources(tmp_path):
    import json

    prose = [line for line in EN if line.endswith(".") and len(line.split()) >= 8]
    warc = WarcBuilder(tmp_path / "pages.warc.gz")
    warc.response("https://videos.sex.com/a", page(prose[:20], title="blocked"))       # UT1 adult, a subdomain
    warc.response("https://www.essex.com/news", page(prose[20:40], title="kept"))
    warc.response("https://example.org/tags/porn/", page(prose[40:60], title="word"))   # FineWeb banned word
    warc.close()
    books = tmp_path / "books.jsonl"   # a text source whose records carry URLs of a listed domain
    books.write_text(json.dumps({"id": "b1", "url": "https://sex.com/library/book1", "text": "\n".join(prose[60:90])}) + "\n")
    args = ["--input", str(tmp_path / "pages.warc.gz"), "--source", f"books={books}", "--quiet", "--no-dedup"]

    report = run(args + ["--output", str(tmp_path / "all")])
    ledger = {r["url"]: (r["stage"], r["reason"]) for r in pq.read_table(str(tmp_path / "all" / "ledger")).to_pylist()}
    assert ledger == {"https://videos.sex.com/a": ("url_filter", "blocked_domain"),
                      "https://example.org/tags/porn/": ("url_filter", "banned_word"),
                      "https://sex.com/library/book1": ("url_filter", "blocked_domain")}
    funnel = {f["stage"]: f for f in report["funnel"]}
    assert [f["stage"] for f in report["funnel"]][:3] == ["warc", "read_text", "url_filter"]
    assert (funnel["url_filter"]["in"], funnel["url_filter"]["kept"]) == (4, 1)
    assert funnel["extract"]["in"] == 1  # blocked pages cost no extraction
    assert report["conservation"]["holds"]

    report = run(args + ["--output", str(tmp_path / "web-only"), "--url-filter-sources", "web"])
    kept = {r["url"] for r in finished_rows(tmp_path / "web-only")}
    assert kept == {"https://www.essex.com/news", "https://sex.com/library/book1"}
    funnel = {f["stage"]: f for f in report["funnel"]}
    assert funnel["url_filter"]["notes"] == {"not_for_source.books": 1}
    assert tuple(report["config"]["url_filter"]["sources"]) == ("web",) and report["conservation"]["holds"]
    with pytest.raises(ConfigError, match="url_filter.sources: no source named 'wbe' in this run"):
        run(args + ["--output", str(tmp_path / "typo"), "--url-filter-sources", "wbe"])


def test_bad_words_and_toxicity_in_the_job(tmp_path):
    import csv

    with open(DAVIDSON_SAMPLE, encoding="utf-8") as fh:
        offensive = [" ".join(r["tweet"].split()) for r in csv.DictReader(fh) if r["class"] == "1"]
    prose = [line for line in EN if line.endswith(".") and len(line.split()) >= 8]
    warc = WarcBuilder(tmp_path / "pages.warc.gz")
    warc.response("http://t.example/forum", page(prose[:8] + offensive[100:130], title="forum"))   # dense
    warc.response("http://t.example/one-insult", page(prose[10:30] + ["you are a stupid fucking idiot and everyone "
                                                                      "here hates you, go away"], title="insult"))
    warc.response("http://t.example/calm", page(prose[40:60], title="calm"))
    warc.close()
    args = ["--input", str(tmp_path / "pages.warc.gz"), "--quiet", "--no-dedup"]
    # swearing counts only when asked for: the forum's tweets are profane, not sexual or hateful
    report = run(args + ["--output", str(tmp_path / "scores"), "--bad-words-kinds", "sexual", "slur", "profanity"])
    ledger = {r["url"]: (r["stage"], r["reason"], r["detail"]) for r in pq.read_table(str(tmp_path / "scores" / "ledger")).to_pylist()}
    assert list(ledger) == ["http://t.example/forum"]
    assert ledger["http://t.example/forum"][:2] == ("bad_words", "bad_words_profanity")
    assert "per 1000 words" in ledger["http://t.example/forum"][2]
    kept = {r["url"]: r for r in finished_rows(tmp_path / "scores")}
    # one insult among 20 sentences is the page's worst window, not a toxic page (`min_toxic_windows` 2)
    insult, calm = kept["http://t.example/one-insult"], kept["http://t.example/calm"]
    assert insult["toxicity_worst"] > 0.9 and insult["toxicity_score"] < 0.7 and calm["toxicity_worst"] < 0.5
    assert report["conservation"]["holds"]

    run(args + ["--output", str(tmp_path / "drop"), "--toxicity-threshold", "0.7", "--no-bad-words"])
    ledger = {r["url"]: (r["stage"], r["reason"]) for r in pq.read_table(str(tmp_path / "drop" / "ledger")).to_pylist()}
    assert ledger == {"http://t.example/forum": ("toxicity", "toxic")}
    # with one toxic window deciding, the insult's page goes too
    run(args + ["--output", str(tmp_path / "one"), "--toxicity-threshold", "0.7", "--no-bad-words",
                "--toxicity-min-toxic-windows", "1"])
    ledger = {r["url"]: (r["stage"], r["reason"]) for r in pq.read_table(str(tmp_path / "one" / "ledger")).to_pylist()}
    assert ledger == {"http://t.example/forum": ("toxicity", "toxic"), "http://t.example/one-insult": ("toxicity", "toxic")}
