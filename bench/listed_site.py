"""What `url_filter.second_look` keeps and what it lets through (issue 56; stages/harmful/listed_site.py).

    .venv/bin/python bench/listed_site.py [--json FILE]

Every page with text of the workspace's WARC files (data/warc, and shared/data/warc where it is here) is judged
by the listed_site stage as if its site were listed (extraction, lid.176, the toxicity score; default
settings): the pages the URL filter's lists actually name (on the bench WARC: four news and LGBTQ sites UT1
calls adult), and every other ordinary page (how much of ordinary text would clear a second look). What it
must not let through, measured on what the workspace has of it: pages of offensive tweets (Davidson's
"offensive" and "hate" tweets of the repo sample, 20 to a page) and the WARCs' pages the bad_words stage drops
(the Common Crawl excerpt's erotic story).
The workspace holds no page of a porn site, so what a real adult site's pages do is not measured here: its
pages with little text fall under `min_words`.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from stages.extraction.extract import ExtractConfig, Extractor  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.harmful.badwords import BadWordsFilter  # noqa: E402
from stages.harmful.listed_site import ListedSite  # noqa: E402
from stages.harmful.toxicity import ToxicityScorer  # noqa: E402
from stages.harmful.toxicity_train import read_davidson  # noqa: E402
from stages.harmful.url_filter import LISTED_SCORE, UrlFilter  # noqa: E402
from stages.langid import LanguageIdentifier  # noqa: E402
from stages.record import Document  # noqa: E402
from stages.runner import StageRunner  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAVIDSON_SAMPLE = os.path.join(REPO, "tests", "data", "harmful", "davidson_labeled_sample.csv")


def warc_files() -> list[str]:
    files = sorted(glob.glob(os.path.join(REPO, "data", "warc", "*.warc.gz")))
    shared = os.path.join(shared_data.ROOT, "warc")
    names = {os.path.basename(f) for f in files}
    return files + sorted(f for f in glob.glob(os.path.join(shared, "*.warc.gz")) if os.path.basename(f) not in names)


def judged_pages(listed_site: ListedSite, toxicity: ToxicityScorer):
    """(kind, url, lang, verdict) for every page with text; kind: listed (a block list names its site), dense in
    listed words, or ordinary."""
    url_filter, bad_words = UrlFilter(), BadWordsFilter()
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with chain:
        for path in warc_files():
            with open(path, "rb") as fh:
                for page in read_warc(fh, source="bench"):
                    if not isinstance(page, Document):
                        continue
                    listed = page.url and url_filter.verdict(page.url) is not None
                    doc = chain(page)
                    if not isinstance(doc, Document):
                        continue
                    doc = doc.replace(toxicity_score=toxicity.score(doc.text, doc.lang)[0]).with_score(LISTED_SCORE, 1.0)
                    kind = ("listed" if listed else "dense in listed words (the bad_words stage drops it)"
                            if bad_words.evaluate(doc.text, doc.lang, doc.lang_score) else "ordinary")
                    yield kind, page.url, doc.lang, listed_site.verdict(doc)


def offensive_pages(listed_site: ListedSite, toxicity: ToxicityScorer):
    tweets = [e.text for e in read_davidson(DAVIDSON_SAMPLE) if e.toxic]
    for i in range(0, len(tweets) - 19, 20):
        text = "\n".join(tweets[i:i + 20])
        doc = Document(id=f"tweets-{i}", url="", source="x", text=text, lang="en",
                       toxicity_score=toxicity.score(text, "en")[0])
        yield "offensive tweets (20 to a page)", doc.id, "en", listed_site.verdict(doc)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    listed_site, toxicity = ListedSite(), ToxicityScorer()
    toxicity.setup()
    rows = list(judged_pages(listed_site, toxicity)) + list(offensive_pages(listed_site, toxicity))
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for kind, _, _, verdict in rows:
        counts[kind]["pages"] += 1
        counts[kind]["kept" if verdict is None else _signal(verdict[0])] += 1
    print("| pages | n | kept | dropped: too little text | listed words | toxic | low quality | no bad-word list for "
          "its language |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, c in counts.items():
        print(f"| {kind} | {c['pages']} | {c['kept']} | {c['words']} | {c['listed words']} | {c['toxicity']} | "
              f"{c['quality']} | {c['language']} |")
    print()
    for kind, url, lang, verdict in rows:
        if kind == "listed" or (kind != "ordinary" and verdict is None):
            print(f"- {kind} [{lang}] {url}: {'kept' if verdict is None else verdict[0]}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({k: dict(v) for k, v in counts.items()}, fh, indent=1)
    return 0


def _signal(detail: str) -> str:
    for key, name in (("words <", "words"), ("listed words", "listed words"), ("toxicity", "toxicity"),
                      ("quality", "quality"), ("no bad-word list", "language")):
        if key in detail:
            return name
    return "other"


if __name__ == "__main__":
    sys.exit(main())
