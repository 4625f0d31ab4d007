"""Share of pages the Gopher filters drop, per language, with our per-language rules and with
English-only rules (what an English-shaped pipeline does to German pages).

    .venv/bin/python bench/quality_by_language.py [WARC]   (default: ../shared/data/warc/bench_trafilatura_pages.warc.gz)

Runs the stages directly (no Beam): read -> extract (in-process) -> langid -> Gopher repetition -> Gopher quality.
"""
import collections
import json
import sys
import time

from stages.extraction.extract import ExtractConfig, Extractor
from stages.extraction.warc import read_warc
from stages.gopher import GopherQuality, GopherRepetition
from stages.langid import LanguageIdentifier
from stages.runner import StageRunner

DEFAULT = "../shared/data/warc/bench_trafilatura_pages.warc.gz"


def main(path: str) -> dict:
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    repetition, quality = GopherRepetition(), GopherQuality()
    per_lang = collections.defaultdict(collections.Counter)
    started = time.monotonic()
    with open(path, "rb") as fh, chain:
        for doc in chain.kept(read_warc(fh, source="bench")):
            c = per_lang[doc.lang]
            c["pages"] += 1
            rep = repetition.evaluate(doc.text, doc.lang)
            ours = rep or quality.evaluate(doc.text, doc.lang)
            english_rules = rep or quality.evaluate(doc.text, "en")  # English stop words, whitespace words
            c["dropped"] += ours is not None
            c["dropped_english_rules"] += english_rules is not None
            if ours is not None:
                c[f"reason:{ours[0]}"] += 1
            if english_rules is not None:
                c[f"english_reason:{english_rules[0]}"] += 1
    result = {"input": path, "seconds": round(time.monotonic() - started, 1), "languages": {}}
    for lang, c in sorted(per_lang.items(), key=lambda kv: -kv[1]["pages"]):
        result["languages"][lang] = {
            "pages": c["pages"],
            "dropped_share": round(c["dropped"] / c["pages"], 3),
            "dropped_share_english_rules": round(c["dropped_english_rules"] / c["pages"], 3),
            "reasons": {k.split(":", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("reason:")},
            "reasons_english_rules": {k.split(":", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("english_reason:")},
        }
    return result


if __name__ == "__main__":
    out = main(sys.argv[1] if len(sys.argv) > 1 else DEFAULT)
    print(json.dumps(out, indent=1, ensure_ascii=False))
