"""Gopher quality and repetition rules (Rae et al. 2021, "Scaling Language Models", appendix A),
at the thresholds FineWeb uses (datatrove GopherQualityFilter / GopherRepetitionFilter).

Any threshold set to None disables that rule. Rules that only make sense for some scripts
are skipped where they do not apply, and the skip is counted (`count("skip....")`).
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from common.settings import check, check_not_negative
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
    # round(n * ngram_scale) words, so that it spans as much text as in English (Vietnamese writes syllables,
    # ICU cuts Japanese into short words: their 5-grams are English 2-3-grams). The bundled thresholds set it
    # from NTREX-128's translations of the same articles.
    ngram_scale: float = 1.0
    # Rescue by evidence (stages/rescue.py): a page over exactly one n-gram limit, by less than this share of
    # the limit, that the quality model scores at least rescue_min_quality is kept with metadata.rescued
    # saying why; none: off (also off when the quality stage is)
    rescue_margin: float | None = 0.1
    rescue_min_quality: float = 0.9

    def __post_init__(self):
        check_not_negative(self)
        check(self.rescue_min_quality <= 1.0, f"rescue_min_quality must be in [0, 1], got {self.rescue_min_quality}")
        check(1.0 <= self.ngram_scale <= 5.0, f"ngram_scale must be in [1, 5], got {self.ngram_scale}")
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
        grams = NGrams(normalized_words(text, lang))
        total = grams.total
        if not total:
            return
        for n, limit in c.max_top_ngram_chars:
            m = scaled(n, c.ngram_scale)
            verdict = over(DropReason.TOP_NGRAM_CHARS, grams.top_chars(m) / total, limit, ".3f", f"n={ngram_label(n, m)}: ")
            if verdict:
                yield verdict
        rules = [(scaled(n, c.ngram_scale), n, limit) for n, limit in c.max_dup_ngram_chars]
        for i, (m, n, limit) in enumerate(rules):
            share = grams.duplicated_chars(m) / total
            verdict = over(DropReason.DUP_NGRAM_CHARS, share, limit, ".3f", f"n={ngram_label(n, m)}: ")
            if verdict:
                yield verdict
            # A position inside a repeated longer n-gram is inside a repeated m-gram (its prefix or the one after):
            # longer n-grams cover no more, so when this share is within every later limit, none of them can fail
            # (the page's most common cost: 5-grams repeat little, and five np.unique passes are skipped).
            if all(later > m and share <= (later_limit if later_limit is not None else share)
                   for later, _, later_limit in rules[i + 1:]):
                return


def scaled(n: int, scale: float) -> int:
    """The n-gram size that spans as much text as n English words."""
    return max(n, round(n * scale))


def ngram_label(n: int, m: int) -> str:
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

class NGrams:
    """Exact n-gram identities of a word sequence as dense integer arrays, built up one n at a time:
    an n-gram is the pair (its (n-1)-gram, its last word), numbered by np.unique. No hashing, so no
    collisions; O(len(words) log len(words)) per n instead of hashing n-word tuples."""

    def __init__(self, words: Sequence[str]):
        # word -> its rank of first appearance (built and applied in C: this runs for every word of every page)
        vocabulary = dict(zip(dict.fromkeys(words), itertools.count()))
        self.words = np.fromiter(map(vocabulary.__getitem__, words), dtype=np.int64, count=len(words))
        self.vocabulary = max(len(vocabulary), 1)
        self.lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        self.total = int(self.lengths.sum())
        self._n, self._ids = 1, self.words

    def ids(self, n: int) -> np.ndarray:
        """One id per n-gram start position (len(words) - n + 1 of them); equal n-grams, equal ids."""
        if n < self._n:
            self._n, self._ids = 1, self.words
        while self._n < n:
            self._n += 1
            pairs = self._ids[:-1] * self.vocabulary + self.words[self._n - 1:]
            self._ids = np.unique(pairs, return_inverse=True)[1].reshape(-1)
        return self._ids

    def top_chars(self, n: int) -> int:
        """Word characters covered by the most frequent n-gram (its length times its count)."""
        if len(self.words) < n:
            return 0
        ids = self.ids(n)
        freq = np.bincount(ids)[ids]
        best = int(freq.max())
        if best < 2:
            return 0
        ends = np.concatenate(([0], np.cumsum(self.lengths)))
        chars = (ends[n:] - ends[:-n])[freq == best].max()
        return min(int(chars) * best, self.total)

    def duplicated_chars(self, n: int) -> int:
        """Word characters at positions covered by any n-gram that occurs at least twice."""
        if len(self.words) < n:
            return 0
        ids = self.ids(n)
        starts = np.flatnonzero(np.bincount(ids)[ids] > 1)
        if not len(starts):
            return 0
        cover = np.zeros(len(self.words) + 1, dtype=np.int64)
        np.add.at(cover, starts, 1)
        np.add.at(cover, starts + n, -1)
        return int(self.lengths[np.cumsum(cover[:-1]) > 0].sum())


def top_ngram_chars(words: Sequence[str], n: int) -> int:
    """Word characters covered by the most frequent n-gram (its length times its count)."""
    return NGrams(words).top_chars(n)


def duplicated_ngram_chars(words: Sequence[str], n: int) -> int:
    """Word characters at positions covered by any n-gram that occurs at least twice."""
    return NGrams(words).duplicated_chars(n)
