"""FineWeb's URL word rules: what they catch of adult URLs, and what ordinary and group-naming text they drop
(issue 56, item 3: every harmful-content filter measured for identity bias).

    .venv/bin/python bench/url_words.py [--json FILE]

The rules (`url_filter.word_rules`, on by default: a banned word as a token, two soft-banned words, a banned sub-word
anywhere) judge a URL's words. Measured, with no block list loaded so only the words decide:
* what they are for: UT1's adult URLs (19,587 host/path entries) and every 20th of its 4.56 M adult hosts, the
  list's own sites (the domain list drops those anyway; the words are for the adult sites no list names, whose URLs
  look like these);
* what they cost: sentences as the URL a news site or a blog makes of a title (lower case, accents folded, words
  joined by "-", 100 characters; `https://news.example.org/2024/05/<slug>`) — Leipzig's web sentences (75
  languages, 1,000 a language), per language, and those naming a group of the language's identity lexicon against
  those naming none; benign identity template sentences (Jigsaw's where the shared data is here, per group, and
  ours in 15 languages); and the real URLs of the workspace's WARC files.
Slugs of scripts other than Latin keep their letters, which no rule (ASCII words) matches: sites that percent-encode
or transliterate them are not measured.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import lzma
import os
import re
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from bench.listed_site import warc_files  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.harmful.bias import JIGSAW_FILES, JigsawTemplates  # noqa: E402
from stages.harmful.identity_frames import counter_rows, evaluation_rows, lexicons  # noqa: E402
from stages.harmful.url_filter import UT1, UrlFilter, UrlFilterConfig  # noqa: E402
from stages.record import Document  # noqa: E402

LEIPZIG = shared_data.path("multilingual", "lingua_testdata", "sentences")
TEMPLATES = shared_data.path("harmful", "identity_templates")
HOST_SAMPLE = 20  # every 20th UT1 adult host: 228,000 of 4.56 M
ADULT_URLS, ADULT_HOSTS = "UT1 adult URLs (host/path)", f"UT1 adult hosts (1 in {HOST_SAMPLE})"


def slug_url(text: str) -> str:
    """The URL a site makes of a title: accents folded, lower case, words joined by "-", at most 100 characters."""
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(ch))
    return "https://news.example.org/2024/05/" + "-".join(re.findall(r"\w+", folded))[:100].strip("-")


class WordRules:
    """FineWeb's URL word rules alone (no block list), as the url_filter stage applies them."""

    def __init__(self):
        self._filter = UrlFilter(UrlFilterConfig(categories=(), allow_categories=()))

    def __call__(self, url: str) -> tuple[str, str] | None:
        return self._filter.verdict(url)


def adult_urls() -> dict[str, list[str]]:
    with lzma.open(os.path.join(UT1, "adult.urls.xz"), "rt", encoding="utf-8") as fh:
        urls = ["http://" + line.strip() for line in fh if line.strip()]
    with lzma.open(os.path.join(UT1, "adult.domains.xz"), "rt", encoding="utf-8") as fh:
        hosts = ["http://" + line.strip() + "/" for i, line in enumerate(fh) if i % HOST_SAMPLE == 0 and line.strip()]
    return {ADULT_URLS: urls, ADULT_HOSTS: hosts}


def leipzig() -> dict[str, list[str]]:
    out = {}
    for path in sorted(glob.glob(os.path.join(LEIPZIG, "*.txt"))):
        with open(path, encoding="utf-8") as fh:
            out[os.path.basename(path)[:-len(".txt")]] = [line.strip() for line in fh if line.strip()]
    return out


def warc_urls() -> list[str]:
    urls = set()
    for path in warc_files():
        with open(path, "rb") as fh:
            urls.update(doc.url for doc in read_warc(fh, source="bench") if isinstance(doc, Document) and doc.url)
    return sorted(urls)


def measure() -> dict:
    rules = WordRules()
    result: dict = {"catch": {}, "ordinary": {}, "groups": {}, "templates": {}, "words": {}}
    for name, urls in adult_urls().items():
        reasons = collections.Counter(v[0] for v in map(rules, urls) if v)
        result["catch"][name] = {"n": len(urls), "caught": sum(reasons.values()), "by_rule": dict(reasons)}
    hits_by_word: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    sentences = leipzig()
    for lang, lines in sentences.items():
        hits = [(line, v) for line in lines if (v := rules(slug_url(line)))]
        for _line, (reason, detail) in hits:
            hits_by_word[f"{reason}: {detail}"][lang] += 1
        result["ordinary"][lang] = {"n": len(lines), "dropped": len(hits), "examples": [
            f"{detail} ({reason}): {line[:90]}" for line, (reason, detail) in hits[:3]]}
    result["words"] = {word: dict(langs) for word, langs in hits_by_word.items()}
    for lang, lex in lexicons().items():
        lines = sentences.get(lang.split("-")[0]) if "-" not in lang else None
        if not lines:
            continue
        pattern = lex.pattern(lex.groups + lex.swap + lex.forms)
        naming = [line for line in lines if pattern.search(line)]
        rest = [line for line in lines if not pattern.search(line)]
        result["groups"][lang] = {"naming": len(naming), "naming_dropped": sum(bool(rules(slug_url(s))) for s in naming),
                                  "none": len(rest), "none_dropped": sum(bool(rules(slug_url(s))) for s in rest)}
    template_sets = []
    if os.path.isdir(TEMPLATES):
        template_sets += [(f"jigsaw_{lang}", JigsawTemplates(os.path.join(TEMPLATES, f"{name}_sentence_templates.csv.gz"),
                                                             lang).rows()) for lang, name in JIGSAW_FILES.items()]
    template_sets += [(f"ours_{lang}", evaluation_rows(lang) + counter_rows(lang)) for lang in sorted(lexicons())]
    for name, rows in template_sets:
        benign = [r for r in rows if not r.toxic]
        by_group = collections.Counter(r.group for r in benign if rules(slug_url(r.text)))
        result["templates"][name] = {"benign": len(benign), "dropped": sum(by_group.values()),
                                     "worst_group": list(by_group.most_common(1)[0]) if by_group else None}
    urls = warc_urls()
    dropped = [(u, v) for u in urls if (v := rules(u))]
    result["warc_urls"] = {"n": len(urls), "dropped": len(dropped), "examples": [f"{u} ({v[1]})" for u, v in dropped]}
    return result


def markdown(r: dict) -> str:
    def pct(k: int, n: int) -> str:
        return f"{k:,} / {n:,} ({100 * k / n:.2f} %)" if n else "–"
    out = ["| URLs | caught by the word rules | banned word / soft words / sub-word |", "|---|---|---|"]
    for name, c in r["catch"].items():
        by = c["by_rule"]
        out.append(f"| {name} | {pct(c['caught'], c['n'])} | {by.get('banned_word', 0):,} / "
                   f"{by.get('soft_banned_words', 0):,} / {by.get('banned_subword', 0):,} |")
    total = sum(v["n"] for v in r["ordinary"].values())
    dropped = sum(v["dropped"] for v in r["ordinary"].values())
    out += ["", f"Leipzig web sentences as URLs: {pct(dropped, total)} dropped; languages with any:", "",
            "| lang | dropped | what |", "|---|---|---|"]
    for lang, v in sorted(r["ordinary"].items(), key=lambda kv: -kv[1]["dropped"]):
        if v["dropped"]:
            out.append(f"| {lang} | {pct(v['dropped'], v['n'])} | {'; '.join(v['examples'])} |")
    out += ["", "| lang | sentences naming a group: dropped | naming none: dropped |", "|---|---|---|"]
    for lang, v in sorted(r["groups"].items()):
        out.append(f"| {lang} | {v['naming_dropped']} / {v['naming']} | {v['none_dropped']} / {v['none']} |")
    out += ["", "| templates | benign sentences as URLs: dropped | worst group |", "|---|---|---|"]
    for name, v in r["templates"].items():
        worst = f"{v['worst_group'][0]} ({v['worst_group'][1]})" if v["worst_group"] else "–"
        out.append(f"| {name} | {pct(v['dropped'], v['benign'])} | {worst} |")
    w = r["warc_urls"]
    out += ["", f"The workspace's WARC files: {pct(w['dropped'], w['n'])} of their URLs dropped by the words"
                + (": " + "; ".join(w["examples"]) if w["examples"] else ".")]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    shared_data.require("bench/url_words.py", {LEIPZIG: "Leipzig web sentences (lingua's test data)"})
    result = measure()
    print(markdown(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
