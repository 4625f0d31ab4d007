"""`refinery calibrate` (a real Beam job) and `refinery run --thresholds` on real multilingual text."""
import json
import subprocess
import sys

import pyarrow.parquet as pq
import yaml

from pipeline.commands.calibrate import calibrate_corpus
from pipeline.job.run import run
from stages.reference import ntrex_documents
from tests.conftest import MULTILINGUAL_SAMPLE, WarcBuilder, finished_rows

NTREX = str(MULTILINGUAL_SAMPLE)  # the first 40 NTREX-128 documents of 7 languages


def ntrex(code):
    return [text for c, _, text in ntrex_documents(NTREX) if c == code]


def test_calibration_is_deterministic_and_small_languages_get_their_script_default(tmp_path):
    for lang, code, n in (("en", "eng-GB", 40), ("de", "deu", 40), ("ja", "jpn", 40), ("nl", "nld", 3), ("fr", "fra", 40)):
        with open(tmp_path / f"{lang}.jsonl", "w", encoding="utf-8") as fh:  # NTREX news documents
            for i, text in enumerate(ntrex(code)[:n]):
                fh.write(json.dumps({"id": str(i), "text": text}, ensure_ascii=False) + "\n")
    args = [a for lang in ("en", "de", "ja", "nl") for a in ("--source", f"{lang}={tmp_path}/{lang}.jsonl")]
    args += ["--lid-source", f"fr={tmp_path}/fr.jsonl", "--source-is-language", "--parallel", "--min-docs", "20"]
    first = calibrate_corpus(args + ["--output", str(tmp_path / "a.yaml")])
    calibrate_corpus(args + ["--output", str(tmp_path / "b.yaml")])
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()
    assert set(first["languages"]) == {"en", "de", "ja", "fr", "nl"}  # fr, nl: a language-ID entry only
    assert set(first["languages"]["en"]) == {"langid"}
    latin_rules = {k: v for k, v in first["scripts"]["Latin"].items() if k != "langid"}
    assert {k: v for k, v in first["languages"]["fr"].items() if k != "langid"} == latin_rules  # its script's rules
    assert first["calibration"]["documents"] == {"de": 40, "en": 40, "ja": 40, "nl": 3}  # fr: language ID only
    lid = first["calibration"]["langid"]
    assert lid["en"]["own_pages"] == 40 and lid["fr"]["own_pages"] == 40 and lid["en"]["kept_true"] == 1.0
    assert 0.3 <= first["languages"]["de"]["langid"]["threshold"] <= 0.65 and first["langid_rule"]
    # the same 40 articles: Japanese, written without spaces, counts n-grams in words of content at its
    # characters per English word (about 2.4); German keeps English's n words
    ja = first["languages"]["ja"]["gopher_repetition"]
    assert 2.0 <= ja["chars_per_word"] <= 2.9 and "ngram_scale" not in ja
    assert first["scripts"]["CJK"]["gopher_repetition"]["chars_per_word"] == ja["chars_per_word"]
    assert not {"ngram_scale", "chars_per_word"} & set(first["languages"]["de"].get("gopher_repetition", {}))
    assert "Latin" in first["scripts"] and "CJK" in first["scripts"]  # nl would be judged by Latin's entry
    assert first["rule"] and first["reference_language"] == "en"
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "calibrate", "--source", f"en={tmp_path}/nl.jsonl",
                          "--output", str(tmp_path / "c.yaml")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "needs at least 30 documents in the reference language" in out.stderr
    assert "Traceback" not in out.stderr


def page(paragraphs):
    return ("<html><body><article>" + "".join(f"<p>{p}</p>" for p in paragraphs) + "</article></body></html>").encode()


def test_thresholds_change_the_decisions_they_should_and_no_others(tmp_path):
    malayalam = ntrex("mal")[11]   # mean word length 10.18: over the English-shaped 10, under ml's calibrated 10.66
    warc = WarcBuilder(tmp_path / "pages.warc.gz")
    warc.response("http://t.example/ml", page(malayalam.splitlines()))
    for code in ("eng-GB", "deu", "fra", "rus"):
        for i, text in enumerate(ntrex(code)[:6]):
            warc.response(f"http://t.example/{code}/{i}", page(text.splitlines()))
    warc.response("http://t.example/en-list", page(["Home", "News", "Contact", "Login"] * 30))  # boilerplate
    warc.close()
    args = ["--input", str(tmp_path / "pages.warc.gz"), "--quiet", "--no-dedup", "--no-toxicity", "--no-bad-words"]
    run(args + ["--output", str(tmp_path / "default"), "--thresholds", "none"])
    report = run(args + ["--output", str(tmp_path / "calibrated"), "--thresholds", "bundled"])

    def outcome(out):
        kept = {r["url"]: r["text"] for r in finished_rows(out)}
        ledger = {r["url"]: (r["stage"], r["reason"], r["detail"]) for r in pq.read_table(str(out / "ledger")).to_pylist()}
        return kept, ledger

    kept_default, ledger_default = outcome(tmp_path / "default")
    kept_calibrated, ledger_calibrated = outcome(tmp_path / "calibrated")
    assert ledger_default["http://t.example/ml"][:2] == ("gopher_quality", "gopher_mean_word_length")
    assert "http://t.example/ml" in kept_calibrated
    del ledger_default["http://t.example/ml"]
    del kept_calibrated["http://t.example/ml"]
    assert kept_calibrated == kept_default            # every other page: the same decision, the same text
    assert {u: r[:2] for u, r in ledger_calibrated.items()} == {u: r[:2] for u, r in ledger_default.items()}
    assert "http://t.example/en-list" in ledger_calibrated  # junk is still dropped
    assert report["config"]["thresholds"] == "bundled" and report["conservation"]["holds"]
    applied = report["langid_thresholds"]  # per language seen: what language ID applied, and from where
    assert applied["en"]["from"] == "thresholds file (bundled): en" and applied["ml"]["threshold"] >= 0.1
    assert {"en", "de", "fr", "ru", "ml"} <= set(applied)

    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump({"languages": {"ml": {"gopher_quality": {"max_mean_word_length": 9.0}}}}))
    strict_report = run(args + ["--output", str(tmp_path / "strict"), "--thresholds", str(strict),
                                "--langid-threshold", "0.5"])
    assert strict_report["langid_thresholds"]["en"] == {"threshold": 0.5, "confident": 0.0, "from": "your setting"}
    _, ledger_strict = outcome(tmp_path / "strict")
    assert ledger_strict["http://t.example/ml"][2].endswith("> 9.0 (ml threshold)")
