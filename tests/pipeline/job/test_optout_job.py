"""Page-level opt-outs through the whole job: each dropped page has its ledger row with language and reason, a
licensed page keeps its licence in the shards, and `--optout-require-license open` keeps only open ones."""
import html
import json

import pyarrow.parquet as pq

from pipeline.job.run import run
from tests.conftest import SENTENCES_DIR, WarcBuilder, finished_rows

EN = [line for line in (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()
      if line.endswith(".") and len(line.split()) >= 8]


def page(start: int, head: str = "") -> bytes:
    body = "".join(f"<p>{html.escape(s)}</p>\n" for s in EN[start:start + 14])
    return (f"<html><head><title>Page {start}</title>{head}</head><body><article><h1>Page {start}</h1>\n{body}"
            "</article></body></html>").encode()


def test_opt_outs_and_licences_in_a_run(tmp_path):
    warc = WarcBuilder(tmp_path / "sites.warc.gz")
    warc.response("https://art.example/noai", page(0, '<meta name="robots" content="noai, noimageai">'))
    warc.response("https://news.example/tdm", page(20), extra_http=[("tdm-reservation", "1"),
                                                                   ("tdm-policy", "https://news.example/tdm.json")])
    warc.response("https://blog.example/gptbot", page(40), extra_http=[("X-Robots-Tag", "GPTBot: noindex")])
    warc.response("https://wiki.example/cc", page(60, '<link rel="license" '
                                                      'href="https://creativecommons.org/licenses/by-sa/4.0/">'))
    warc.response("https://shop.example/plain", page(80))
    warc.close()
    args = ["--input", str(warc.path), "--quiet", "--no-dedup"]
    report = run(args + ["--output", str(tmp_path / "out")])
    ledger = {r["url"]: r for r in pq.read_table(str(tmp_path / "out" / "ledger")).to_pylist()}
    assert {url: (r["stage"], r["reason"], r["lang"]) for url, r in ledger.items()} == {
        "https://art.example/noai": ("optout", "noai_meta", "en"),
        "https://news.example/tdm": ("optout", "tdm_reserved", "en"),
        "https://blog.example/gptbot": ("optout", "noai_header", "en")}
    assert ledger["https://news.example/tdm"]["detail"] == "tdm-reservation: 1 (header); tdm-policy: https://news.example/tdm.json"
    kept = {r["url"]: r["metadata"] for r in finished_rows(tmp_path / "out")}
    assert kept["https://wiki.example/cc"]["license"] == "cc-by-sa-4.0"
    assert kept["https://wiki.example/cc"]["license_source"] == "rel=license"
    assert kept["https://shop.example/plain"]["license"] is None
    assert "optout_verdict" not in kept["https://wiki.example/cc"] and report["conservation"]["holds"]
    funnel = {row["stage"]: row for row in report["funnel"]}
    assert funnel["optout"]["dropped_by_reason"] == {"noai_meta": 1, "tdm_reserved": 1, "noai_header": 1}
    assert funnel["optout_signals"]["notes"] == {"noimageai": 1}
    cost = report["optout"]["removed"]  # per signal and language: documents and the tokens they would have given
    assert set(cost) == {"noai_meta", "tdm_reserved", "noai_header"}
    assert all(set(by_lang) == {"en"} and by_lang["en"]["documents"] == 1 and by_lang["en"]["tokens"] > 200
               for by_lang in cost.values())
    assert report["optout"]["licenses_kept"] == {"cc-by-sa-4.0": 1, "none": 1}
    page_report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Opt-outs honoured" in page_report and "tdm_reserved" in page_report and "cc-by-sa-4.0" in page_report
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["optout"]["agent_list"].startswith("ai-robots-txt@") and "GPTBot" in manifest["optout"]["agents"]

    report = run(args + ["--output", str(tmp_path / "open"), "--optout-require-license", "open", "--no-optout-tdm"])
    kept = [r["url"] for r in finished_rows(tmp_path / "open")]
    assert kept == ["https://wiki.example/cc"]
    reasons = {row["stage"]: row for row in report["funnel"]}["optout"]["dropped_by_reason"]
    assert reasons == {"noai_meta": 1, "noai_header": 1, "no_open_license": 2}  # the TDM page: no licence either
