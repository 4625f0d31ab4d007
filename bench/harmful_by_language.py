"""What each harmful-content stage drops on the 1,033-page bench WARC, per language, with examples.

    .venv/bin/python bench/harmful_by_language.py [WARC]   (default ../shared/data/warc/bench_trafilatura_pages.warc.gz)

Every response record's URL goes through the URL filter; pages with text (extraction, lid.176) through
the bad-word stage (default density rule, and C4's any-word rule) and the toxicity scorer (the page score at 0.5 and
0.9, the recommended threshold). The toxicity model trained on paragraphs of half of these pages, so its columns count only the
other half (`page_held_out`). Prints a Markdown table and the examples behind each count.
"""
import collections
import sys

from stages.extraction.extract import ExtractConfig, Extractor
from stages.extraction.warc import read_warc
from stages.harmful.badwords import BadWordsConfig, BadWordsFilter
from stages.harmful.toxicity import ToxicityScorer
from stages.harmful.toxicity_train import page_held_out
from stages.harmful.url_filter import UrlFilter
from stages.langid import LanguageIdentifier
from stages.record import Document
from stages.runner import StageRunner

COLUMNS = ("url_filter", "bad_words", "bad_words any (C4)", "toxicity >= 0.5", "toxicity >= 0.9")


def main(path: str) -> None:
    url_filter, density, any_word = UrlFilter(), BadWordsFilter(), BadWordsFilter(BadWordsConfig(mode="any"))
    toxicity = ToxicityScorer()
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    pages, held_out = collections.Counter(), collections.Counter()
    drops: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    unreadable = 0
    with open(path, "rb") as fh, chain:
        for page in read_warc(fh, source="bench"):
            if not isinstance(page, Document):
                continue
            blocked = url_filter.verdict(page.url)
            doc = chain(page)
            lang = doc.lang if isinstance(doc, Document) else "(no text)"
            pages[lang] += 1
            if blocked:
                drops[(lang, "url_filter")].append(f"{page.url} — {blocked[0]}: {blocked[1]}")
            if not isinstance(doc, Document):
                unreadable += 1
                continue
            for name, stage in (("bad_words", density), ("bad_words any (C4)", any_word)):
                verdict = stage.evaluate(doc.text, doc.lang)
                if verdict:
                    drops[(lang, name)].append(f"{page.url} — {verdict[1][:160]}")
            if page_held_out(page.url or page.id):
                held_out[lang] += 1
                score, window = toxicity.score(doc.text, doc.lang)
                for t in (0.5, 0.9):
                    if score >= t:
                        drops[(lang, f"toxicity >= {t}")].append(f"{page.url} — {score:.2f}: {window[:160]!r}")
    print(f"{sum(pages.values())} pages ({unreadable} without text after extraction/language ID)\n")
    print("| language | pages | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for lang, n in pages.most_common():
        cells = [str(len(drops[(lang, c)])) if not c.startswith("toxicity") else f"{len(drops[(lang, c)])}/{held_out[lang]}"
                 for c in COLUMNS]
        print(f"| {lang} | {n} | " + " | ".join(cells) + " |")
    total = [str(sum(len(drops[(lang, c)]) for lang in pages)) for c in COLUMNS]
    print(f"| all | {sum(pages.values())} | " + " | ".join(
        t if not c.startswith("toxicity") else f"{t}/{sum(held_out.values())}" for t, c in zip(total, COLUMNS)) + " |")
    for column in COLUMNS:
        print(f"\n## {column}")
        for lang in pages:
            for example in drops[(lang, column)]:
                print(f"- [{lang}] {example}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/warc/bench_trafilatura_pages.warc.gz")
