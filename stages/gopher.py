"""Gopher quality and repetition rules (Rae et al. 2021, "Scaling Language Models", appendix A),
at the thresholds FineWeb uses (datatrove GopherQualityFilter / GopherRepetitionFilter).

Any threshold set to None disables that rule. Rules that only make sense for some scripts
are skipped where they do not apply, and the skip is counted (`count("skip....")`).
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from common.settings import check, check_not_negative
from stages.ngrams import NGrams
from stages.record import Document, DropReason, RuleStage, StageResult, over, under
from stages.rescue import Rescue
from stages.table import StageSpec
from stages.text import NO_SPACE_LANGS, is_word, normalized_words, split_paragraphs, split_words, stop_words


@dataclass(frozen=True)
class GopherQualityConfig:
    """Gopher quality rules (Rae et al. 2021) at FineWeb's thresholds; none disables a single rule."""

    enabled: bool = True
    min_words: int | None = 50
    max_words: int | None = 100_000
    min_mean_word_length: float | None = 3    # skipped for zh/ja/th, whose words are 1-2 characters
    max_mean_word_length: float | None = 10
    max_hash_ratio: float | None = 0.1        # "#" per word
    max_ellipsis_ratio: float | None = 0.1    # "..." or "…" per word
    max_bullet_lines: float | None = 0.9      # share of lines starting with a bullet
    max_ellipsis_lines: float | None = 0.3    # share of lines ending with an ellipsis
    min_alpha_words: float | None = 0.8       # share of words with at least one letter
    min_stop_words: int | None = 2            # stop-word occurrences (per-language lists, stages/text.py);
                                                 # skipped, and counted, for a language without one

    def __post_init__(self):
        check_not_negative(self)


class GopherQuality(RuleStage):
    name = "gopher_quality"

    def __init__(self, config: GopherQualityConfig = GopherQualityConfig()):
        super().__init__(config)

    def evaluate(self, text: str, lang: str | None) -> tuple | None:
        c = self.config_for(lang)
        m = quality_measures(text, lang)
        n = m["words"]
        verdict = under(DropReason.GOPHER_TOO_FEW_WORDS, n, c.min_words) \
            or over(DropReason.GOPHER_TOO_MANY_WORDS, n, c.max_words)
        if verdict:
            return verdict
        mean = m["mean_word_length"]
        if mean is None:
            self.count(f"skip.mean_word_length.{lang}")  # words of 1-2 characters are normal there
        else:
            verdict = under(DropReason.GOPHER_MEAN_WORD_LENGTH, mean, c.min_mean_word_length, ".2f") \
                or over(DropReason.GOPHER_MEAN_WORD_LENGTH, mean, c.max_mean_word_length, ".2f")
            if verdict:
                return verdict
        verdict = (over(DropReason.GOPHER_SYMBOL_RATIO, m["hash_ratio"], c.max_hash_ratio, ".3f", "'#' per word ")
                   or over(DropReason.GOPHER_SYMBOL_RATIO, m["ellipsis_ratio"], c.max_ellipsis_ratio, ".3f",
                           "ellipsis per word ")
                   or over(DropReason.GOPHER_BULLET_LINES, m["bullet_lines"], c.max_bullet_lines, ".2f")
                   or over(DropReason.GOPHER_ELLIPSIS_LINES, m["ellipsis_lines"], c.max_ellipsis_lines, ".2f")
                   or under(DropReason.GOPHER_ALPHA_WORDS, m["alpha_words"], c.min_alpha_words, ".2f"))
        if verdict:
            return verdict
        if c.min_stop_words is not None:
            found = m["stop_words"]
            if found is None:
                self.count(f"skip.stop_words.{lang}")  # no list for this language: rule not applied
            elif found < c.min_stop_words:
                return DropReason.GOPHER_STOP_WORDS, f"{found} {lang} stop words < {c.min_stop_words}", found, c.min_stop_words
        return None


def quality_measures(text: str, lang: str | None) -> dict:
    """What the Gopher quality rules measure on a page (the rules and `refinery calibrate` both use this):
    words, mean_word_length (None for no-space languages), hash_ratio and ellipsis_ratio (per word),
    bullet_lines and ellipsis_lines (shares of lines), alpha_words (share), stop_words (None without a list)."""
    content_words = list(filter(is_word, split_words(text, lang)))  # Gopher: symbols are not words
    n = max(len(content_words), 1)
    lines = [line for line in text.splitlines() if line.strip()] or [""]
    vocabulary = stop_words(lang)
    return {
        "words": len(content_words),
        "mean_word_length": None if lang in NO_SPACE_LANGS else sum(map(len, content_words)) / n,
        "hash_ratio": text.count("#") / n,
        "ellipsis_ratio": (text.count("...") + text.count("…")) / n,
        "bullet_lines": sum(line.lstrip().startswith(("•", "-", "*", "·", "‣", "◦")) for line in lines) / len(lines),
        "ellipsis_lines": sum(line.rstrip().endswith(("...", "…")) for line in lines) / len(lines),
        "alpha_words": _words_with_a_letter(content_words) / n,
        "stop_words": None if vocabulary is None else sum(map(vocabulary.__contains__, normalized_words(text, lang))),
    }


def _words_with_a_letter(words: list[str]) -> int:
    # Most words are letters only (str.isalpha, in C); only the rest are looked at character by character.
    mixed = list(itertools.filterfalse(str.isalpha, words))
    return len(words) - len(mixed) + sum(any(ch.isalpha() for ch in w) for w in mixed)


@dataclass(frozen=True)
class GopherRepetitionConfig:
    """Gopher repetition rules (Rae et al. 2021) at FineWeb's thresholds; none disables a single rule."""

    enabled: bool = True
    max_dup_line_fraction: float | None = 0.30   # share of lines that repeat an earlier line
    max_dup_line_chars: float | None = 0.20      # share of line characters in repeated lines
    max_dup_para_fraction: float | None = 0.30   # share of paragraphs that repeat an earlier one
    max_dup_para_chars: float | None = 0.20      # share of paragraph characters in repeated paragraphs
    # n -> max share of characters in the most frequent n-gram
    max_top_ngram_chars: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    # n -> max share of characters inside n-grams that occur more than once
    max_dup_ngram_chars: tuple[tuple[int, float], ...] = (
        (5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
    # words of the page's language per English word in the same text: an n-gram rule looks at n-grams of
    # round(n * ngram_scale) words, so that it spans as much text as in English (Vietnamese writes syllables:
    # its 5-grams are English 3-grams). The bundled thresholds set it from NTREX-128's translations of the same
    # articles.
    ngram_scale: float = 1.0
    # Scripts without spaces (stages/ngrams.py): the language's characters per English word in the same text; set,
    # n-gram rules count words of content (a character 1 / chars_per_word words, a Latin word or number one) in
    # place of ICU's pieces, whose sizes vary too much to count (kana endings fall apart into single characters).
    # The bundled thresholds set it from NTREX-128 for zh, ja, th, lo, km, my, bo. Set, it replaces ngram_scale.
    chars_per_word: float | None = None
    # Rescue by evidence (stages/rescue.py): a page over exactly one n-gram limit, by less than this share of
    # the limit, that the quality model scores at least rescue_min_quality is kept with metadata.rescued
    # saying why; none: off (also off when the quality stage is)
    rescue_margin: float | None = 0.1
    rescue_min_quality: float = 0.9

    def __post_init__(self):
        check_not_negative(self)
        check(self.rescue_min_quality <= 1.0, f"rescue_min_quality must be in [0, 1], got {self.rescue_min_quality}")
        check(1.0 <= self.ngram_scale <= 5.0, f"ngram_scale must be in [1, 5], got {self.ngram_scale}")
        check(self.chars_per_word is None or 0.5 <= self.chars_per_word <= 20,
              f"chars_per_word must be in [0.5, 20], got {self.chars_per_word}")
        check(self.chars_per_word is None or self.ngram_scale == 1.0,
              "set ngram_scale or chars_per_word, not both (chars_per_word replaces it)")
        check(all(n >= 1 for n, _ in self.max_top_ngram_chars + self.max_dup_ngram_chars), "n-gram sizes must be >= 1")


class GopherRepetition(RuleStage):
    """Repetition statistics, with one definition of "characters" throughout.

    Lines and paragraphs: a duplicate is every copy after the first (its characters are
    counted against all characters of the text's lines/paragraphs). N-grams: over
    normalized words; characters are word characters (no whitespace), for both the
    numerator and the denominator. The top n-gram's share is its word characters times
    its count; the duplicated n-gram share counts each word position at most once, over
    every occurrence of a repeated n-gram, first included (Gopher's definition). One
    widely used implementation joins n-grams with spaces for one statistic and without
    for the other, and divides by the raw text length: its ratios are not comparable.
    """

    name = "gopher_repetition"

    def __init__(self, config: GopherRepetitionConfig = GopherRepetitionConfig(), rescue_with=None):
        super().__init__(config)
        self.rescue = Rescue(rescue_with) if rescue_with is not None and config.rescue_margin is not None else None

    def check(self) -> None:
        if self.rescue:
            self.rescue.check()

    def setup(self) -> None:
        if self.rescue:
            self.rescue.setup()

    def teardown(self) -> None:
        if self.rescue:
            self.rescue.teardown()

    def __call__(self, doc: Document) -> StageResult:
        verdicts = self.verdicts(doc.text, doc.lang)
        first = next(verdicts, None)
        if first is not None and self.rescue is not None:
            c = self.config_for(doc.lang)
            rescued = self.rescue(self.name, doc, first, verdicts, c.rescue_margin, c.rescue_min_quality)
            if rescued is not None:
                self.count(f"rescued.{first[0]}")
                return rescued
        return self.result(doc, first)

    def evaluate(self, text: str, lang: str | None) -> tuple | None:
        return next(self.verdicts(text, lang), None)

    def verdicts(self, text: str, lang: str | None) -> Iterator[tuple]:
        """Every rule the text fails, in the order the rules are checked (lazily: the first is usually enough)."""
        c = self.config_for(lang)
        lines = list(filter(None, map(str.strip, text.splitlines())))
        for units, max_fraction, max_chars, reasons in (
            (lines, c.max_dup_line_fraction, c.max_dup_line_chars,
             (DropReason.DUP_LINE_FRACTION, DropReason.DUP_LINE_CHARS)),
            ([p.strip() for p in split_paragraphs(text)], c.max_dup_para_fraction, c.max_dup_para_chars,
             (DropReason.DUP_PARA_FRACTION, DropReason.DUP_PARA_CHARS)),
        ):
            if not units:
                continue
            dup_count, dup_chars = duplicate_units(units)
            fraction, chars = dup_count / len(units), dup_chars / max(sum(map(len, units)), 1)
            yield from filter(None, (over(reasons[0], fraction, max_fraction, ".2f"),
                                     over(reasons[1], chars, max_chars, ".2f")))
        grams = NGrams(normalized_words(text, lang), c.chars_per_word,
                       sizes=[n for n, _ in c.max_top_ngram_chars + c.max_dup_ngram_chars])
        if not grams.total:
            return
        for n, limit in c.max_top_ngram_chars:
            m = ngram_size(n, c)
            verdict = over(DropReason.TOP_NGRAM_CHARS, grams.top_share(m), limit, ".3f", f"n={ngram_label(n, m, c)}: ")
            if verdict:
                yield verdict
        rules = [(ngram_size(n, c), n, limit) for n, limit in c.max_dup_ngram_chars]
        for i, (m, n, limit) in enumerate(rules):
            share = grams.duplicated_share(m)
            verdict = over(DropReason.DUP_NGRAM_CHARS, share, limit, ".3f", f"n={ngram_label(n, m, c)}: ")
            if verdict:
                yield verdict
            # A position inside a repeated longer n-gram is inside a repeated m-gram (its prefix or the one after):
            # longer n-grams cover no more, so when this share is within every later limit, none of them can fail
            # (the page's most common cost: 5-grams repeat little, and five np.unique passes are skipped). Not so
            # for n-grams of content, whose pieces weigh differently: there every rule is measured.
            if not grams.by_content and all(later > m and share <= (later_limit if later_limit is not None else share)
                                            for later, _, later_limit in rules[i + 1:]):
                return


def ngram_size(n: int, config: GopherRepetitionConfig) -> int:
    """What a rule's n becomes for a page: n words of content, or n x ngram_scale words."""
    return n if config.chars_per_word is not None else scaled(n, config.ngram_scale)


def scaled(n: int, scale: float) -> int:
    """The n-gram size that spans as much text as n English words."""
    return max(n, round(n * scale))


def ngram_label(n: int, m: int, config: GopherRepetitionConfig | None = None) -> str:
    if config is not None and config.chars_per_word is not None:
        return f"{n} (words of content, {config.chars_per_word:g} chars a word)"
    return str(n) if m == n else f"{n} (as {m} words)"


def duplicate_units(units: Sequence[str]) -> tuple[int, int]:
    """(number, characters) of units that repeat an earlier unit."""
    seen, count, chars = set(), 0, 0
    for unit in units:
        if unit in seen:
            count += 1
            chars += len(unit)
        else:
            seen.add(unit)
    return count, chars


SPECS = (
    StageSpec(
        name=GopherRepetition.name, order=30, config=GopherRepetitionConfig, build=GopherRepetition,
        inputs=lambda run: {"rescue_with": run.quality if run.quality.enabled else None},
        about="Gopher repetition rules",
        reasons={
            DropReason.DUP_LINE_FRACTION: "too many lines repeat an earlier line",
            DropReason.DUP_LINE_CHARS: "repeated lines hold too many of the characters",
            DropReason.DUP_PARA_FRACTION: "too many paragraphs repeat an earlier one",
            DropReason.DUP_PARA_CHARS: "repeated paragraphs hold too many of the characters",
            DropReason.TOP_NGRAM_CHARS: "the most frequent 2/3/4-gram covers too many characters (detail: n, share)",
            DropReason.DUP_NGRAM_CHARS: "duplicated 5...10-grams cover too many characters (detail: n, share)"}),
    StageSpec(
        name=GopherQuality.name, order=40, config=GopherQualityConfig, build=GopherQuality,
        about="Gopher quality rules (detail: measured value and threshold)",
        reasons={
            DropReason.GOPHER_TOO_FEW_WORDS: "fewer words than `min_words`",
            DropReason.GOPHER_TOO_MANY_WORDS: "more words than `max_words`",
            DropReason.GOPHER_MEAN_WORD_LENGTH: "mean word length outside [min, max]",
            DropReason.GOPHER_SYMBOL_RATIO: "too many `#` or ellipses per word",
            DropReason.GOPHER_BULLET_LINES: "too many lines start with a bullet",
            DropReason.GOPHER_ELLIPSIS_LINES: "too many lines end with an ellipsis",
            DropReason.GOPHER_ALPHA_WORDS: "too few words contain a letter",
            DropReason.GOPHER_STOP_WORDS: "too few stop words of the page's language"}),
)

def top_ngram_chars(words: Sequence[str], n: int) -> int:
    """Word characters covered by the most frequent n-gram (its length times its count)."""
    return NGrams(words).top_chars(n)


def duplicated_ngram_chars(words: Sequence[str], n: int) -> int:
    """Word characters at positions covered by any n-gram that occurs at least twice."""
    return NGrams(words).duplicated_chars(n)
