"""Recipe for the bundled quality classifier, stages/models/quality.ftz (run: `make quality-model`).

DCLM's idea (curated reference text vs what the crawl is full of), with reference prose in every language
this workspace has, so the score tells prose from junk rather than one language from another.

Positives (edited, human-written prose):
  * NTREX-128 news documents (123 documents, professionally translated into 128 language variants)
  * FLORES-200 Wikipedia sentences, 10 consecutive ones a document (205 language variants)
  * the main-text snippets trafilatura's evaluation marks on each benchmark page (`with`), one text a page
  * the main text trafilatura extracts from the benchmark pages, in pieces of ~80 words: editorial text of
    real sites (news, blogs, shops, government), whatever the heuristic filters think of the page
Negatives (what a crawl is full of besides that):
  * boilerplate of the same pages: their visible text nodes outside the main text (menus, footers, link
    lists, notices; stages.quality_train.boilerplate_lines), in pieces of ~80 words, and the evaluation's
    `without` snippets of each page; from the benchmark WARC and every other WARC in shared/data/warc
  * the same boilerplate as layout tables: its lines as pipe-table rows of 2-6 cells, as extraction renders a
    menu set in a table (`| Home | Reservations | Our Destinations |`), in pieces of ~160 words
    (stages.quality_train.chrome_table); the model rated such a menu 1.00
  * machine-made text in every reference language, made from a third of the reference documents: their
    words in order cut into lines of 1-4 words (listings, menus) or their short phrases repeated and joined
    by separators (keyword stuffing, tag clouds). Without them every negative would be German or English web
    text and the model would learn the language. (Shuffled words, tried first, taught it that any word pair
    it had not seen is junk: real German blog prose scored 0.)
  * broken text in every reference script, from a sixth of the reference documents: their UTF-8 read as
    Windows-1252, Latin-1, Windows-1251 or GBK (stages.quality_train.garbled); text repair fixes most such
    pages before the model sees them, and what it cannot fix (GBK with lost bytes) scored 0.84
No label comes from this project's filters: pages they drop and random crawl pages are only measured (a
model trained to agree with the filters adds nothing to them, and its scores saturate on what they keep).
Held out (20 %): reference documents by document number across all languages (a translation never sits on
the other side), web pages by registered domain (a site never does). Web negatives are counted 3 times
(repeated), so the few real pages weigh against the many machine-made ones.

Deterministic: one thread, fixed seed. `bench/quality_model.py` measures this model against another on the
held-out data (the examples of `collect`).
"""
from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import shared_data  # noqa: E402

from stages.extraction.extract import ExtractConfig, Extractor  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.gopher import GopherQuality, GopherRepetition  # noqa: E402
from stages.langid import LanguageIdentifier, model_codes  # noqa: E402
from stages.quality_train import (  # noqa: E402
    QualityTrainConfig,
    boilerplate_lines,
    chrome_table,
    garbled,
    machine_made,
    train,
)
from stages.record import Document  # noqa: E402
from stages.reference import flores_documents, lid_code, ntrex_documents  # noqa: E402
from stages.runner import StageRunner  # noqa: E402

SHARED = shared_data.ROOT
MULTILINGUAL = os.path.join(SHARED, "multilingual")
BENCH = os.path.join(SHARED, "warc", "bench_trafilatura_pages.warc.gz")
EVALDATA = os.path.join(SHARED, "html", "trafilatura", "evaldata.json")
OUTPUT = "stages/models/quality.ftz"
# Chosen among 12 tried on the held-out sets of bench/quality_model.py (epochs 3/5/10, lr 0.2/0.5, uni- or bigrams, with
# and without random crawl or filter-dropped pages as negatives, with and without page main text as positives).
SETTINGS = QualityTrainConfig(epochs=3, lr=0.2, word_ngrams=2, dim=16, min_count=2, bucket=200_000, seed=0)
WEB_WEIGHT = 3
MEASURED_ONLY = ("main_text", "dropped_page", "crawl_page")  # scored by bench/quality_model.py, never labels
PIECE_WORDS = 80


@dataclasses.dataclass(frozen=True)
class Example:
    text: str
    positive: bool
    kind: str          # ntrex | flores | with_snippets | boilerplate | without_snippets | dropped_page | crawl_page
                       # | listing | keywords | main_text (held out only: a kept benchmark page's main text)
    lang: str | None
    held_out: bool


def held(key: str, share: float = 0.2) -> bool:
    return int(hashlib.blake2b(key.encode(), digest_size=8).hexdigest(), 16) / 2**64 < share


def reference_examples():
    labels = model_codes()
    seen: dict[tuple[str, str], str] = {}  # one file (variant, script) per language and corpus
    for corpus, documents in (("ntrex", ntrex_documents(MULTILINGUAL)), ("flores", flores_documents(MULTILINGUAL))):
        for code, number, text in documents:
            lang = lid_code(code, labels)
            if lang is None or seen.setdefault((corpus, lang), code) != code or not text.strip():
                continue
            out = held(f"{corpus}:{number}")
            yield Example(text, True, corpus, lang, out)
            if held(f"machine:{corpus}:{code}:{number}", 1 / 3) or out:  # every held-out one: a paired test
                kind, junk = machine_made(text, f"{corpus}:{code}:{number}")
                yield Example(junk, False, kind, lang, out)
            if held(f"garbled:{corpus}:{code}:{number}", 1 / 6) or out:  # broken text in every script
                broken = garbled(text, f"{corpus}:{code}:{number}")
                if broken:
                    yield Example(broken, False, "garbled", lang, out)


@functools.cache
def _domains():
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # its bundled suffix list, no network


def _site(url: str) -> str:
    parts = _domains()(url)
    return parts.top_domain_under_public_suffix or parts.domain or url


def pieces(lines: list[str], words: int = PIECE_WORDS) -> list[str]:
    out, current, n = [], [], 0
    for line in lines:
        current.append(line)
        n += len(line.split())
        if n >= words:
            out.append("\n".join(current))
            current, n = [], 0
    if n >= 30:
        out.append("\n".join(current))
    return out


def page_examples():
    with open(EVALDATA, encoding="utf-8") as fh:
        evaldata = json.load(fh)
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    repetition, quality = GopherRepetition(), GopherQuality()
    paths = [BENCH] + sorted(p for p in glob.glob(os.path.join(SHARED, "warc", "*.warc*")) if p != BENCH
                             and ".wet" not in p)
    for path in paths:
        with open(path, "rb") as fh, chain:
            for page in read_warc(fh, source="recipe"):
                if not isinstance(page, Document) or not page.html:
                    continue
                doc = chain(page)
                url = page.url or page.id
                out = held(f"site:{_site(url)}")
                snippets = evaldata.get(url) if path == BENCH else None
                lang = doc.lang if isinstance(doc, Document) else None
                if snippets:
                    if snippets.get("with"):
                        yield Example("\n".join(snippets["with"]), True, "with_snippets", lang, out)
                    if snippets.get("without"):
                        yield Example("\n".join(snippets["without"]), False, "without_snippets", lang, out)
                if not isinstance(doc, Document):
                    continue
                chrome = boilerplate_lines(page.html, doc.text)
                for piece in pieces(chrome):
                    yield Example(piece, False, "boilerplate", lang, out)
                for number, piece in enumerate(pieces(chrome, words=PIECE_WORDS * 2)):  # menus as layout tables
                    yield Example(chrome_table(piece.split("\n"), f"{url}:{number}"), False, "chrome_table", lang, out)
                if path == BENCH and not out:  # the editorial text of a page, whatever the filters think of it
                    for piece in pieces([line for line in doc.text.splitlines() if line.strip()]):
                        yield Example(piece, True, "main_piece", lang, out)
                # measured only, never labels (a label from the filters would re-learn the filters):
                dropped = repetition.evaluate(doc.text, doc.lang) or quality.evaluate(doc.text, doc.lang)
                if dropped:
                    yield Example(doc.text, False, "dropped_page", lang, out)
                elif path != BENCH:
                    yield Example(doc.text, False, "crawl_page", lang, out)
                elif out:  # held-out benchmark pages the filters keep: their score distribution
                    yield Example(doc.text, True, "main_text", lang, out)


def collect() -> list[Example]:
    return list(reference_examples()) + list(page_examples())


def training_sets(examples: list[Example]) -> tuple[list[str], list[str], list[str], list[str]]:
    train_pos, train_neg, test_pos, test_neg = [], [], [], []
    for e in examples:
        if e.kind in MEASURED_ONLY:
            continue
        weight = WEB_WEIGHT if e.kind in ("boilerplate", "without_snippets") and not e.held_out else 1
        target = (test_pos if e.positive else test_neg) if e.held_out else (train_pos if e.positive else train_neg)
        target += [e.text] * weight
    return train_pos, train_neg, test_pos, test_neg


def main() -> int:
    shared_data.require("make quality-model", {BENCH: "the 1,033-page benchmark WARC",
                                               EVALDATA: "trafilatura's annotated pages",
                                               MULTILINGUAL: "NTREX-128 and FLORES-200 reference text"})
    examples = collect()
    train_pos, train_neg, test_pos, test_neg = training_sets(examples)
    kinds: dict[str, int] = {}
    for e in examples:
        key = f"{e.kind}{' (held out)' if e.held_out else ''}"
        kinds[key] = kinds.get(key, 0) + 1
    description = (__doc__.split("\n\n")[1] + "\n\n" + __doc__.split("\n\n")[2]).strip() + \
        f"\nExamples by kind: {json.dumps(dict(sorted(kinds.items())))}"
    card = train(train_pos, train_neg, OUTPUT, SETTINGS, description, held_out=(test_pos, test_neg))
    print(json.dumps({"sizes": card["sizes"], "held_out": card["held_out_metrics"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
