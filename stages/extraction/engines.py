"""The extraction engines behind `extract.engine`: trafilatura, Resiliparse, and a cascade of the two.

- `trafilatura` (the default, FineWeb's extractor): the best main text of the three, ~15 ms a page.
- `resiliparse` (DCLM-Baseline's extractor): `extract_plain_text(main_content=True)`, ~10x faster,
  keeps more boilerplate (headers, "related articles", footers).
- `cascade`: Resiliparse's main text with trafilatura's boilerplate classes skipped and short unpunctuated
  lines trimmed from its ends; then a small logistic check on cheap features of that text and the HTML
  says whether trafilatura would do better, and only those pages are extracted again with trafilatura (its fast
  mode by default, `extract.cascade_fallback`, Resiliparse's text kept where it finds none). A page check on the
  HTML's features alone runs first: where it says the check would surely send the page on (~1 page in 5 of
  articles), the page goes straight to trafilatura and Resiliparse's pass is skipped.

bench/extract_engines.py measures all three on trafilatura's 990 annotated pages; scripts/build_cascade_check.py
fits the check (stages/models/extract_cascade.json) and reports it on pages of sites it was not fitted on.
"""
from __future__ import annotations

import functools
import json
import math
import os
import re
from collections import Counter
from typing import Any

ENGINES = ("trafilatura", "resiliparse", "cascade")
CHECK_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "extract_cascade.json")

# Class/id words of trafilatura's OVERALL_DISCARD lists (trafilatura/xpaths.py) that Resiliparse's
# main-content heuristic lets through; each kept only where skipping it raised F1 by at least 0.1 point on one
# half of the annotated sites and did not lower it on the other half (scripts/build_cascade_check.py --ablate).
BOILERPLATE_WORDS = ("newsletter", "author", "footer", "related", "meta", "rating")
BOILERPLATE_TAGS = ("div", "section", "span", "p", "ul", "aside", "nav", "footer")


def skip_selectors(words: tuple[str, ...]) -> tuple[str, ...]:
    """A CSS selector for the container tags whose class or id contains one of `words`: one `:is(...):is(...)`
    rather than one selector per tag, attribute and word (the same elements on all 1,174 HTML pages of the
    workspace, Resiliparse 0.35 ms a page faster: it matches every element against every selector)."""
    attributes = ",".join(f'[{attr}*="{word}"]' for word in words for attr in ("class", "id"))
    return (f":is({','.join(BOILERPLATE_TAGS)}):is({attributes})",)


SKIP_SELECTORS = skip_selectors(BOILERPLATE_WORDS)
# A line that ends a sentence; others are headings, menus, bylines, dates when short.
SENTENCE_END = frozenset(".!?\"'»”)。！？…")
EDGE_LINE_CHARS = 40    # unpunctuated lines shorter than this are trimmed from the text's start and end
INNER_LINE_CHARS = 15   # ... and shorter than this anywhere ("Weitere Artikel", "Mehr zum Thema:")
# HTML tags whose density (per KB of HTML) the check reads: page layout, not language.
LAYOUT_TAGS = ("a", "li", "p", "div", "nav", "footer", "aside", "article", "h1", "h2", "h3", "script", "form", "img",
               "span", "table", "br")
_TAG_NAME = re.compile(r"<([A-Za-z][A-Za-z0-9]*)")


def resiliparse_text(html: str, include_comments: bool, skip: tuple[str, ...] = ()) -> str:
    """Resiliparse's main text as DCLM extracts it, without image alt texts (trafilatura's
    include_images=False) and comments unless asked for."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, alt_texts=False, comments=include_comments,
                              skip_elements=list(skip) or None)


def _boilerplate_line(line: str, limit: int) -> bool:
    return len(line) < limit and line[-1] not in SENTENCE_END


def trim_lines(text: str) -> str:
    """Drops short unpunctuated lines at both ends (breadcrumbs, titles of the next article, "Share") and
    very short ones inside; blank lines go too."""
    lines = [line.strip() for line in text.split("\n")]
    lines = [line for line in lines if line and not _boilerplate_line(line, INNER_LINE_CHARS)]
    start, end = 0, len(lines)
    while start < end and _boilerplate_line(lines[start], EDGE_LINE_CHARS):
        start += 1
    while end > start and _boilerplate_line(lines[end - 1], EDGE_LINE_CHARS):
        end -= 1
    return "\n".join(lines[start:end])


def cascade_fast_text(html: str, include_comments: bool) -> str:
    """The cascade's first try: Resiliparse with trafilatura's boilerplate classes skipped, lines trimmed."""
    return trim_lines(resiliparse_text(html, include_comments, SKIP_SELECTORS))


REPEAT_LINE_CHARS = 20  # a line of this many characters found twice: a caption or pull quote printed again
_P_TEXT = re.compile(r"<p\b[^>]{0,500}>([^<]{1,5000})", re.IGNORECASE)  # bounded: linear on any page
SHORTER_THAN_PARAGRAPHS = 0.5   # the fast text holds less than this share of the text of the page's <p> elements
MIN_PARAGRAPH_CHARS = 1000      # ... on a page with at least this much of it


GUARD_REASONS = ("repeats_a_line", "too_few_words", "fails_a_repetition_rule", "shorter_than_the_paragraphs")
MIN_WORDS = 50  # Gopher's minimum: a fast text of fewer words in a spaced script is dropped whatever it holds


def too_few_words(text: str) -> bool:
    """Fewer words than Gopher's minimum, in a spaced script (an unspaced one is few "words" anyway)."""
    words = len(text.split())
    return words < MIN_WORDS and words * 20 > len(text)


def fast_text_is_broken(text: str, html: str) -> str | None:
    """Why the fast text should not be kept whatever the check says, or None: it repeats a line (Resiliparse
    prints a photo caption or pull quote again where trafilatura's text has it once), it fails a Gopher
    repetition rule or has too few words to pass Gopher's length rule (the filters would drop a page
    trafilatura's text may keep), or it holds much less than the page's paragraphs (half an article)."""
    seen = set()
    for line in text.split("\n"):
        line = line.strip()
        if len(line) >= REPEAT_LINE_CHARS:
            if line in seen:
                return "repeats_a_line"
            seen.add(line)
    if too_few_words(text):
        return "too_few_words"
    if _repetition().evaluate(text, None) is not None:
        return "fails_a_repetition_rule"
    paragraphs = sum(len(m.group(1).strip()) for m in _P_TEXT.finditer(html))
    if paragraphs >= MIN_PARAGRAPH_CHARS and len(text) < SHORTER_THAN_PARAGRAPHS * paragraphs:
        return "shorter_than_the_paragraphs"
    return None


@functools.lru_cache(maxsize=1)
def _repetition():
    """The Gopher repetition rules at their defaults (English-shaped: the page's language is not known yet)."""
    from stages.gopher import GopherRepetition

    return GopherRepetition()


def page_features(html: str) -> list[float]:
    """What the check reads of the HTML alone: its size and the density of its layout tags (one regex pass,
    ~0.15 ms a page)."""
    kb = max(len(html) / 1000, 1.0)
    tags: Counter[str] = Counter()
    for name, count in Counter(_TAG_NAME.findall(html)).items():  # one pass; <DIV> and <div> alike
        tags[name.lower()] += count
    return [math.log1p(len(html))] + [math.log1p(tags[tag] / kb) for tag in LAYOUT_TAGS]


def check_features(text: str, html: str, page: list[float] | None = None) -> list[float]:
    """What the cascade's check reads: the shape of the fast text's lines and the page's features (`page`:
    page_features(html), when already computed). Cheap (~0.3 ms a page with them)."""
    page = page_features(html) if page is None else page
    lines = [line for line in text.split("\n") if line]
    n = max(len(lines), 1)
    head, tail = lines[:5], lines[-5:]
    return [math.log1p(len(text)), math.log1p(len(lines)),
            sum(len(line) < 30 for line in lines) / n,
            sum(line[-1] not in SENTENCE_END for line in lines) / n,
            sum(line.startswith("•") for line in lines) / n,
            math.log1p(len(text) / n),
            sum(len(line) < 30 for line in head) / max(len(head), 1),
            sum(len(line) < 30 for line in tail) / max(len(tail), 1),
            page[0], len(text) / max(len(html), 1), *page[1:]]


FEATURE_NAMES = ("log_chars", "log_lines", "short_lines", "unpunctuated_lines", "bullet_lines", "log_chars_per_line",
                 "short_head", "short_tail", "log_html_chars", "text_per_html_char",
                 *(f"{tag}_per_kb" for tag in LAYOUT_TAGS))
PAGE_FEATURE_NAMES = ("log_html_chars", *(f"{tag}_per_kb" for tag in LAYOUT_TAGS))


@functools.lru_cache(maxsize=4)
def load_check(path: str = CHECK_PATH) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        check = json.load(fh)
    if check["features"] != list(FEATURE_NAMES) or check["page_check"]["features"] != list(PAGE_FEATURE_NAMES):
        raise ValueError(f"{path} was fitted on other features than stages/extraction/engines.py computes: "
                         "rebuild it with scripts/build_cascade_check.py")
    return check


def log_odds(model: dict[str, Any], features: list[float]) -> float:
    """A fitted linear model of the card (the check, or the page check) on one page's features."""
    return model["bias"] + sum(w * (x - mu) / sd for w, x, mu, sd in
                               zip(model["weights"], features, model["mean"], model["scale"]))


def trafilatura_would_do_better(text: str, html: str, check: dict[str, Any], page: list[float] | None = None) -> float:
    """The check's probability that trafilatura's text of this page beats the fast text."""
    z = log_odds(check, check_features(text, html, page))
    return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))


def page_check_sends_on(page: list[float], check: dict[str, Any], threshold: float) -> bool:
    """True where the page's features alone say the check would send it on: their estimate of the check's
    log-odds, less `margin` times its typical error, reaches the threshold's. Such a page goes straight to
    trafilatura, without Resiliparse's pass (~1.4 ms) that the check would only have read to agree."""
    if threshold <= 0.0 or threshold >= 1.0:  # 0: every page goes on anyway; 1: none
        return threshold <= 0.0
    model = check["page_check"]
    return log_odds(model, page) - model["margin"] * model["error_sd"] >= math.log(threshold / (1.0 - threshold))
