"""Measurable signals of a page's quality, each a shard column, and the rule that combines them with the
quality model's score into `quality_score`.

The fastText model tells edited prose from the junk it was trained against; on pages unlike its training it
rates a navigation menu rendered as a pipe table 1.00 and a page of mojibake 0.84. These signals measure what it
cannot see: how much of the page is site chrome (menu and table lines), symbols and digits, repeated lines and
text damaged beyond repair. Each caps the score by a linear ramp between a level ordinary prose stays under and
one where the page is junk whatever it says (`RAMPS`, measured in docs/quality.md); the model's score is
multiplied by each cap, so one bad signal is enough to take a page out of the anneal split, and none can
raise a page the model rates low.
"""
from __future__ import annotations

import unicodedata

from stages.text import TERMINAL_PUNCTUATION

# Lines of this many characters or more that do not end a sentence are not counted as chrome.
CHROME_LINE_CHARS = 40
# Symbols: Unicode's symbol categories (|, +, =, ©, emoji, ...) and the punctuation that decorates rather than
# punctuates (a page of 【x】【x】 spam); a script's own marks (Tibetan's tsheg, Arabic's comma) are prose.
DECORATION = frozenset("【】〖〗〔〕#*_\\@")
MIN_LINES = 5  # page structure is measured on pages of this many lines or more (a snippet has none)

# signal -> (level ordinary prose stays under, level from which the page is junk): the score is multiplied by
# 1 between 0 and the first, by 0 from the second, linearly in between.
RAMPS = {
    "chrome_share": (0.35, 0.8),          # characters in menu, link-list and table lines
    "symbol_share": (0.06, 0.2),          # characters that are symbols, not letters, digits or punctuation of prose
    "digit_share": (0.15, 0.4),           # characters that are digits (price lists, tables of figures)
    "repeated_line_share": (0.2, 0.6),    # characters in lines that repeat an earlier line
    "encoding_damage": (0.0005, 0.01),    # characters damaged beyond repair (set by text_repair)
    # bits per character under the language's reference prose model / its level (stages/reference_lm.py): the
    # cap starts over the highest p99 of web prose of a third source (Leipzig's sentences, 65 languages: Thai
    # 1.63, every other language <= 1.52; bench/lm_surprise.py)
    "lm_surprise": (1.65, 2.5),
}
# The columns the quality stage sets (encoding_damage is text_repair's); model_quality: the model's P(hq) alone.
QUALITY_SIGNALS = ("model_quality", *(name for name in RAMPS if name != "encoding_damage"))


def is_chrome_line(line: str) -> bool:
    """A line of site chrome: a table row (`| cell | cell |`), or a short line that ends no sentence (a menu
    entry, a link, a heading, a label)."""
    stripped = line.strip()
    if stripped.startswith("|") or stripped.count(" | ") >= 2:
        return True
    core = stripped.strip("|*•-–·>#▸► \t")
    return len(core) < CHROME_LINE_CHARS and not core.endswith(TERMINAL_PUNCTUATION)


def signals(text: str) -> dict[str, float]:
    """The structural signals of a page's text (all shares in [0, 1]; encoding_damage comes from text_repair)."""
    lines = [line for line in text.split("\n") if line.strip()]
    chars = sum(len(line.strip()) for line in lines) or 1
    chrome = sum(len(line.strip()) for line in lines if is_chrome_line(line)) if len(lines) >= MIN_LINES else 0
    seen: set[str] = set()
    repeated = 0
    for line in lines:
        key = line.strip()
        if key in seen:
            repeated += len(key)
        seen.add(key)
    visible = symbols = digits = 0
    for c in text:
        if c.isspace():
            continue
        visible += 1
        if c.isdigit():
            digits += 1
        elif c in DECORATION or (not c.isalnum() and unicodedata.category(c)[0] == "S"):
            symbols += 1
    visible = visible or 1
    return {"chrome_share": chrome / chars, "symbol_share": symbols / visible, "digit_share": digits / visible,
            "repeated_line_share": repeated / chars}


def cap(name: str, value: float | None) -> float:
    """The factor the signal `name` at `value` multiplies the model's score by (1: no effect)."""
    if value is None:
        return 1.0
    fine, junk = RAMPS[name]
    return 1.0 if value <= fine else 0.0 if value >= junk else (junk - value) / (junk - fine)


def combine(model_quality: float, measured: dict[str, float | None]) -> float:
    """`quality_score`: the model's P(hq) times the cap of every signal."""
    score = model_quality
    for name in RAMPS:
        score *= cap(name, measured.get(name))
    return score
