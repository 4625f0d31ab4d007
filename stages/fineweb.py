"""FineWeb's own quality rules (Penedo et al. 2024; datatrove FineWebQualityFilter). Off by default."""
from __future__ import annotations

from dataclasses import dataclass

from common.settings import check_not_negative
from stages.gopher import duplicate_units
from stages.record import DropReason, RuleStage, over, under
from stages.table import StageSpec
from stages.text import TERMINAL_PUNCTUATION, split_words


@dataclass(frozen=True)
class FineWebConfig:
    """FineWeb's own quality rules (available, off by default)."""

    enabled: bool = False
    min_line_punct: float | None = 0.12        # share of lines ending in terminal punctuation
    max_short_lines: float | None = 0.67       # share of lines of <= short_line_chars characters
    short_line_chars: int = 30
    max_dup_line_chars: float | None = 0.01    # characters in repeated lines / all characters
    max_newline_ratio: float | None = 0.3      # newlines per word

    def __post_init__(self):
        check_not_negative(self)


class FineWebFilter(RuleStage):
    name = "fineweb"

    def __init__(self, config: FineWebConfig = FineWebConfig()):
        super().__init__(config)

    def evaluate(self, text: str, lang: str | None) -> tuple | None:
        c = self.config_for(lang)
        m = line_measures(text, lang, c.short_line_chars)
        if m is None:
            return DropReason.NO_TEXT, "no non-empty lines"
        return (under(DropReason.FINEWEB_LINE_PUNCT, m["line_punct"], c.min_line_punct, ".3f")
                or over(DropReason.FINEWEB_SHORT_LINES, m["short_lines"], c.max_short_lines, ".3f")
                or over(DropReason.FINEWEB_DUP_LINE_CHARS, m["dup_line_chars"], c.max_dup_line_chars, ".3f")
                or over(DropReason.FINEWEB_NEWLINE_RATIO, m["newline_ratio"], c.max_newline_ratio, ".3f"))


def line_measures(text: str, lang: str | None, short_line_chars: int) -> dict[str, float] | None:
    """What FineWeb's rules measure (the rules and `refinery calibrate` both use this); None without a line."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return None
    return {
        "line_punct": sum(line.rstrip().endswith(TERMINAL_PUNCTUATION) for line in lines) / len(lines),
        "short_lines": sum(len(line) <= short_line_chars for line in lines) / len(lines),
        "dup_line_chars": duplicate_units(lines)[1] / max(len(text.replace("\n", "")), 1),
        "newline_ratio": text.count("\n") / max(len(split_words(text, lang)), 1),
    }


SPEC = StageSpec(
    name=FineWebFilter.name, order=60, config=FineWebConfig, build=FineWebFilter, about="FineWeb's own rules",
    reasons={DropReason.FINEWEB_LINE_PUNCT: "too few lines end in terminal punctuation",
             DropReason.FINEWEB_SHORT_LINES: "too many short lines",
             DropReason.FINEWEB_DUP_LINE_CHARS: "repeated lines hold too many of the characters",
             DropReason.FINEWEB_NEWLINE_RATIO: "too many newlines per word: lists, not prose",
             DropReason.NO_TEXT: "no non-empty line"})
