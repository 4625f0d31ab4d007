"""Toxicity score: a fastText classifier (the Dolma approach) applied to windows of a page.

The classifier (`stages/models/toxicity.ftz`, recipe `scripts/build_toxicity_model.py`, card next to
it) learned from tweets and comments in 9 languages (every permissively licensed labeled set of the
workspace: Davidson, MLMA, MPOLD, GAHD, KoCoHub, ToLD-Br, COLD, SWSR, ...) against their clean ones,
news/Wikipedia sentences (NTREX-128, FLORES-200) and everyday sentences (Tatoeba) in every language lid.176
names, and paragraphs of real web pages; its figures on text of other sources are in the card. A tweet
is ~100 characters and a page thousands: scored whole, a toxic paragraph drowns in the rest (merged into
300-character windows, 31 % of pages with one toxic comment put in were caught; paragraph by paragraph,
95 %). So the page is scored paragraph by paragraph (windows), and judged from their distribution
(`page_toxicity`): the windows at or over `window_threshold` (the `combine` most toxic) are evidence about one
page, and their log-odds add (naive Bayes from an even prior), so a thread of abuse approaches 1, and lines the
model half-believes stay near where they are (three at 0.55: 0.65; the noisy-OR 1 - the product of 1 - P made them
a 0.91 page); and (`min_toxic_windows`, 2) a page needs two toxic windows to score over the mean of its two most
toxic: one odd line is not a toxic page (Leipzig web pages flagged at 0.9: 0.38 % -> 0.05 %). A window with fewer
than `evidence_letters` letters counts in proportion to them (a three-word menu line or a line of code is little
evidence either way; `letters` counts a Han character as 3 and a kana as 2).
Per language (`language_offsets`): a window's log-odds lose its language's offset from the model's card, fitted
when the model is built on held-out news and Wikipedia text (NTREX-128, FLORES-200) so that ordinary text of each
language scores like English's at the 95th percentile: languages whose clean training text is formal and whose toxic
text is social media (Chinese, French, Turkish) otherwise score ordinary web text as toxic (Chinese web sentences as
pages: 17 % at 0.9, 3 % with the offset). Only languages hotter than English get one; none raises a score.
And (`language_masks`) a window leaves out the words of the card's list for its page's language: words that language's
news and everyday sentences use and its own toxic text does not favour but the model scores toxic alone, learnt from
another language where they are other words ("hoe" is "how" in Afrikaans, "retard" is "late" in French; Leipzig
Afrikaans pages at 0.5: 14 % -> 0 %).
Columns: `toxicity_score` (the page's score, what `threshold` applies to), `toxicity_worst` (its most toxic
window) and `toxic_window_share` (the share of its windows at or over `window_threshold`).
"""
from __future__ import annotations

import functools
import html
import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from common.settings import check, per_language
from stages.models import bundled, load_classifier, positive_probability
from stages.quality import category_class, combining_marks
from stages.quality import normalize as normalize_words
from stages.record import Document, ModelStage, StageResult
from stages.table import StageSpec

STAGE = "toxicity"
TOXIC, CLEAN = "__label__toxic", "__label__clean"
BUNDLED_MODEL = "toxicity.ftz"
REASON = "toxic"
_MENTION = re.compile(r"@\w+")
_URL = re.compile(r"https?://\S+|www\.\S+")
# Digits and signs written for letters inside a word ("n1gg3r", "b!tch", "a$$hole"): mapped back where letters stand
# on both sides, so years, prices, "mp3" and "4chan" keep their digits (the quality normalization makes them 0s).
_LEET_RUN = re.compile(r"(?<=[^\W\d_])[013457@$!]+(?=[^\W\d_])")
_LEET = str.maketrans("013457@$!", "oieastasi")
# Latin letters inside a Cyrillic word or Cyrillic or Greek ones inside a Latin word ("пиzда", "cyки", "fuсk" with a
# Cyrillic "с", "fυck" with a Greek "υ"): the word is read in the window's majority script, Latin letters as their
# Cyrillic look-alike or sound (p is "р", as it looks), Cyrillic and Greek ones as their Latin look-alike. Words of one
# script are never changed, nor mixed words in a mostly Greek window (Greek has no toxic training text).
_LATIN_TO_CYRILLIC = str.maketrans("aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPrRsStTuUvVxXyYzZ",
                                   "аАбВсСдДеЕфФгГхНиИйЙкКлЛмМнНоОрРрРсСтТуУвВхХуУзЗ")
# (not "μ": "μg" and "μm" are units, written with the Greek letter on real pages)
_TO_LATIN = str.maketrans("аАвВеЕкКмМнНоОрРсСтТуУхХіІјЈѕЅԁһԛԝ" "αβεηικνορτυχωΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
                          "aABBeEKKmMHHoOpPcCTTyYxXiIjJsSdhqw" "abenikvoptuxwABEZHIKMNOPTYX")
_LATIN = re.compile(r"[A-Za-z]")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_GREEK = re.compile(r"[\u0370-\u03ff]")
_GREEK_OR_CYRILLIC = re.compile(r"[\u0370-\u04ff]")  # the two blocks are adjacent: one scan of a Latin window
# a run of Latin, Greek and Cyrillic letters, found in one pass; whether it mixes them is checked per run (a pattern
# for "a run with both" backtracked over every split of a long run: 20 s on 2,000 letters)
_LETTER_RUN = re.compile(r"[A-Za-z\u0370-\u03ff\u0400-\u04ff]+")


def _one_script(text: str) -> str:
    """`text` with its words of mixed Latin, Cyrillic and Greek letters written in the text's majority script."""
    if not _GREEK_OR_CYRILLIC.search(text) or not _LATIN.search(text):
        return text
    latin, cyrillic, greek = (len(script.findall(text)) for script in (_LATIN, _CYRILLIC, _GREEK))
    if greek > max(latin, cyrillic):
        return text
    table = _LATIN_TO_CYRILLIC if cyrillic >= latin else _TO_LATIN

    def one(m: re.Match) -> str:
        word = m.group(0)
        scripts = bool(_LATIN.search(word)) + bool(_CYRILLIC.search(word)) + bool(_GREEK.search(word))
        return word.translate(table) if scripts > 1 else word
    return _LETTER_RUN.sub(one, text)


@functools.cache
def _format_characters() -> re.Pattern:
    """Invisible format characters (Unicode Cf: zero-width space and joiners, soft hyphen, direction marks, BOM,
    tags): inside a word they cut it into pieces the model does not know ("f<U+200B>uck": "f", "uck")."""
    return re.compile(f"[{category_class('Cf')}]")


def normalize(text: str) -> str:
    """The one preprocessing of training and scoring: HTML entities undone, invisible format characters dropped,
    words of mixed Latin, Cyrillic and Greek letters read in one script and letters written as digits or signs inside a
    word mapped back (evasions), @mentions and links replaced by
    placeholders (tweets have them, pages rarely), then the quality normalization with one token a character in
    scripts written without spaces (Chinese, Japanese, Thai: no word to split on), and vowel signs and viramas kept in
    their words (Hindi, Bengali, Tamil ... insults are words, not consonant stems)."""
    text = _URL.sub(" url ", _one_script(_format_characters().sub("", html.unescape(text))))
    text = _MENTION.sub(" @user ", _LEET_RUN.sub(lambda m: m.group(0).translate(_LEET), text))
    return normalize_words(text, max_chars=2_000, unspaced=True, keep_marks=True)


# Evasions only the model's vocabulary can undo (`Respeller`): letters hidden by asterisks ("f*ck", "b***h", "a**"; not
# a footnote's "word*" nor Markdown's "**bold**") and a word spelled out in single letters ("f u c k", "f.u.c.k").
_MASKED = re.compile(r"(?<![\w*])[^\W\d_]+(?:\*+[^\W\d_]+)*(?:\*+[^\W\d_]+|\*{2,})(?![\w*])")
_SPELLED = re.compile(r"(?<![\w.\-*])[^\W\d_](?:[ .\-][^\W\d_](?![\w])){2,}")
_SPELLING_SEPARATORS = str.maketrans("", "", " .-")


class Respeller:
    """Writes masked and spelled-out words as the words of the model's vocabulary they most likely stand for:
    "f*ck" is "fuck" (the vocabulary's most frequent f?ck; ASCII letters fill an ASCII word), "f u c k i n g b i t c h"
    is "fucking bitch" (the most likely split into known words, by their frequencies: unigram segmentation). A mask
    no vocabulary word fits, or letters that make no known words, are left as written. The vocabulary is the
    model's (words seen 10 times in training, with their counts), so this is done at scoring, not in `normalize`:
    training text is read as written. The text itself is not changed: only what the model reads."""

    MAX_MASKED = 64   # masked words looked up per page (`page`): a candidate list each
    MAX_SPELLED = 60  # letters of one spelled-out run that are split into words (longer runs stay as written)
    MAX_WORD = 20     # letters of the longest word a spelled-out run is split into

    def __init__(self, words: Sequence[str], counts: Sequence[int] | None = None):
        counts = list(map(int, counts)) if counts is not None else [len(words) - i for i in range(len(words))]
        total = sum(counts) or 1
        self._cost = {w: -math.log(c / total) for w, c in zip(words, counts) if w and c > 0}
        self._by_start: dict[tuple[int, str], list[str]] = {}
        for word, _ in sorted(zip(words, counts), key=lambda wc: -wc[1]):
            if word and "*" not in word:
                self._by_start.setdefault((len(word), word[0]), []).append(word)
        self._fits = functools.lru_cache(maxsize=4096)(self._fit)

    def _fit(self, masked: str) -> str:
        letters = [(i, c) for i, c in enumerate(masked) if c != "*"]
        ascii_only = masked.isascii()
        for word in self._by_start.get((len(masked), masked[0]), ()):
            if all(word[i] == c for i, c in letters) and (word.isascii() or not ascii_only):
                return word
        return masked

    def __call__(self, text: str) -> str:
        return self.page([text])[0]

    def page(self, texts: Sequence[str]) -> list[str]:
        """The texts (a page's windows) respelled; at most MAX_MASKED masked words a page are looked up (a lookup
        scans the vocabulary's words of one length and first letter: ~0.3 ms; a page of 400 windows of new masks
        took 9 s with a budget per window)."""
        if not self._cost:
            return list(texts)  # no vocabulary (toxicity.respell: false): as written
        budget = [self.MAX_MASKED]

        def fit(m: re.Match) -> str:
            budget[0] -= 1
            return self._fits(m.group(0).lower()) if budget[0] >= 0 else m.group(0)
        return [_SPELLED.sub(self._spelled, _MASKED.sub(fit, text) if "*" in text else text) for text in texts]

    def _spelled(self, m: re.Match) -> str:
        """The run's letters as the most likely sequence of known words (the least sum of -log frequency: "l o o k l
        i k e a t r a n n y" is "look like a tranny", not "look l ikea tranny"); as written where none fits."""
        letters = m.group(0).translate(_SPELLING_SEPARATORS).lower()
        n = len(letters)
        if n > self.MAX_SPELLED:
            return m.group(0)
        best: list[tuple[float, int] | None] = [(0.0, 0)] + [None] * n  # (cost of letters[:end], last word's start)
        for end in range(1, n + 1):
            for start in range(max(0, end - self.MAX_WORD), end):
                cost = self._cost.get(letters[start:end])
                if best[start] is not None and cost is not None and \
                        (best[end] is None or best[start][0] + cost < best[end][0]):
                    best[end] = (best[start][0] + cost, start)
        if best[n] is None:
            return m.group(0)
        words, end = [], n
        while end:
            start = best[end][1]
            words.append(letters[start:end])
            end = start
        return " ".join(reversed(words))


@dataclass(frozen=True)
class ToxicityConfig:
    """Toxicity score (fastText classifier, bundled; `make toxicity-model` rebuilds it)."""

    enabled: bool = True
    model: str | None = None           # fastText model path; none = bundled stages/models/toxicity.ftz
    # Drop pages scoring at least this; none scores without dropping (`toxicity_score` column).
    threshold: float | None = None
    # LANG=THRESHOLD overrides of threshold, e.g. [zh=0.99, fr=0.98]: a listed language is dropped at its own value
    # (also when threshold is none); ordinary web text scores higher in some languages (docs/harmful.md)
    threshold_by_language: tuple[str, ...] = ()
    # A page is scored paragraph by paragraph (line by line): lines shorter than `min_chars` are joined
    # to the next, lines longer than 2 * `window_chars` are cut into pieces of about that size.
    window_chars: int = 300
    min_chars: int = 40
    max_windows: int = 400             # at most this many windows per page (the first ones): bounds the cost
    window_threshold: float = 0.5      # a window at or over this is a toxic window (counted; combined if over 0.5)
    combine: int = 3                   # the page score combines its this-many most toxic windows
    # A page with fewer toxic windows than this scores at most the mean of its this-many most toxic windows (all
    # of them, if it has fewer): at 2 one odd line in a listing does not make a toxic page, nor does one rude
    # comment in an article (`toxicity_worst` keeps its score); 1 = a lone toxic window is the page's score
    # (ordinary web pages flagged at 0.9: 0.38 % with 1, 0.05 % with 2; what each costs: docs/harmful.md)
    min_toxic_windows: int = 2
    evidence_letters: int = 30         # a window with fewer letters than this counts in proportion to them (Han 3, kana 2)
    # Subtract the model card's per-language log-odds offsets (fitted on held-out news/Wikipedia text when the
    # model was built; a model without a card has none) from each window's score, by the page's language
    language_offsets: bool = True
    # Leave out of each window the words of the card's `language_masks` for the page's language: words the model
    # learnt as toxic from another language, or ordinary words (news, Tatoeba) its language's toxic text does not
    # favour ("hoe" is "how" in Afrikaans, "sex" is "six" in Swedish); fitted when the model is built
    language_masks: bool = True
    # Read a word whose letters are hidden by asterisks ("f*ck", "b***h") or spelled out one by one ("f u c k") as the
    # most frequent word of the model's vocabulary it can stand for (`Respeller`); the text itself is not changed
    respell: bool = True
    sources: tuple[str, ...] = ()      # run on documents of these sources only; empty = every source

    def __post_init__(self):
        check(self.threshold is None or 0.0 <= self.threshold <= 1.0,
              f"threshold must be in [0, 1] or none, got {self.threshold}")
        check(self.window_chars >= 20 and self.max_windows >= 1 and self.min_chars >= 1,
              "window_chars must be >= 20, max_windows and min_chars >= 1")
        check(0.0 < self.window_threshold <= 1.0 and self.combine >= 1 and self.evidence_letters >= 1
              and self.min_toxic_windows >= 1,
              "window_threshold must be in (0, 1], combine, evidence_letters and min_toxic_windows >= 1")
        self.thresholds()

    def thresholds(self) -> dict[str, float]:
        """threshold_by_language as {lang: threshold}; a malformed entry is a ConfigError."""
        return per_language(tuple(self.threshold_by_language), "threshold_by_language", "THRESHOLD", 0.0, 1.0)


@dataclass(frozen=True)
class PageToxicity:
    score: float            # the page's score: its toxic windows combined (with fewer than min_toxic_windows, at
                            # most the mean of its most toxic ones)
    worst: float            # the most toxic window's P(toxic), weighted by its evidence
    toxic_windows: int      # windows at or over window_threshold
    windows: int
    window: str             # the most toxic window's text


# How many Latin letters of text one character stands for in the scripts written without spaces between words: a
# Han character is about a word (English words average ~4.7 letters, Chinese ~1.5 characters): 3; a kana a
# syllable: 2. Counted as one letter each, a 12-character Chinese sentence was as little evidence as a 12-letter
# English fragment (Jigsaw's Chinese templates: no toxic sentence reached 0.5). Hangul blocks (syllables, in
# spaced text) stay at one: at 2 or 3, 19-20 % of our benign Korean template sentences reached 0.9 (the model's
# Korean is weak; the short-text discount was what kept them under; bench/RESULTS.md).
_LETTERS_PER_CHAR = {3: ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F)),
                     2: ((0x3040, 0x30FF),)}


@functools.cache
def _extra_letters() -> tuple[tuple[int, re.Pattern], ...]:
    """(letters a character stands for beyond one, a class of the letters of those ranges): one regex pass each,
    where a loop over a Chinese window's characters cost 150 us (the model's call on it costs less)."""
    def letter_class(ranges) -> re.Pattern:
        runs, start = [], None
        for low, high in ranges:
            for code in range(low, high + 2):
                letter = code <= high and chr(code).isalpha()
                if letter and start is None:
                    start = code
                elif not letter and start is not None:
                    runs.append(f"{chr(start)}-{chr(code - 1)}")
                    start = None
        return re.compile(f"[{''.join(runs)}]")

    return tuple((weight - 1, letter_class(ranges)) for weight, ranges in _LETTERS_PER_CHAR.items())


@functools.cache
def _marks() -> re.Pattern:
    return re.compile(f"[{combining_marks()}]")


def letters(text: str) -> int:
    """The amount of text in `text` in Latin-letter equivalents (digits, spaces and punctuation count 0; a vowel sign
    or virama counts as a letter: "के" is "ke")."""
    count = sum(c.isalpha() for c in text)
    if text.isascii():
        return count
    return count + len(_marks().findall(text)) + sum(extra * len(pattern.findall(text)) for extra, pattern in _extra_letters())


def page_toxicity(scored: Sequence[tuple[float, str]], config: ToxicityConfig) -> PageToxicity:
    """The page's judgment from its windows' (P(toxic), text): see the module's docstring."""
    return page_from_weighted(evidence_weighted(scored, config), config)


def evidence_weighted(scored: Sequence[tuple[float, str]], config: ToxicityConfig) -> list[tuple[float, str]]:
    """The windows' (P(toxic), text), each P weighted by the window's evidence (`evidence_letters`), most toxic first."""
    return sorted(((p * min(1.0, letters(w) / config.evidence_letters), w) for p, w in scored), reverse=True)


def page_from_weighted(weighted: Sequence[tuple[float, str]], config: ToxicityConfig) -> PageToxicity:
    """`page_toxicity` from `evidence_weighted`'s windows."""
    if not weighted:
        return PageToxicity(0.0, 0.0, 0, 0, "")
    toxic = [p for p, _ in weighted if p >= config.window_threshold]
    # only windows above even odds add evidence, so a page of enough toxic windows never scores under its worst one
    evidence = sum(log_odds(p) for p in toxic[:config.combine] if p > 0.5)
    score = 1.0 / (1.0 + math.exp(-evidence)) if evidence > 0 else weighted[0][0]
    if len(toxic) < config.min_toxic_windows:
        most = weighted[:config.min_toxic_windows]
        score = min(score, sum(p for p, _ in most) / len(most))
    return PageToxicity(score, weighted[0][0], len(toxic), len(weighted), weighted[0][1])


def log_odds(p: float) -> float:
    """log(P / (1 - P)), finite at 0 and 1."""
    p = min(max(p, 1e-12), 1.0 - 1e-12)
    return math.log(p / (1.0 - p))


def shifted(p: float, offset: float) -> float:
    """P with `offset` taken from its log-odds (0 stays 0: a window without letters)."""
    return p if not offset or p <= 0.0 else 1.0 / (1.0 + math.exp(offset - log_odds(p)))


def card_offsets(model_path: str) -> dict[str, float]:
    """{lang: log-odds offset} of a toxicity model, from its card (`<model>.card.json`, `language_offsets`);
    {} when it has no card or the card none. A card that is not JSON is a ValueError naming it."""
    return _card_part(model_path)[0]


def _card_part(model_path: str) -> tuple[dict[str, float], dict[str, frozenset[str]]]:
    card = model_path + ".card.json"
    try:
        return _read_card(card, os.stat(card).st_mtime_ns)
    except FileNotFoundError:
        return {}, {}


@functools.cache
def _read_card(card: str, _mtime_ns: int) -> tuple[dict[str, float], dict[str, frozenset[str]]]:
    try:
        with open(card, encoding="utf-8") as fh:
            content = json.load(fh)
        offsets = content.get("language_offsets", {}).get("offsets", {})
        masks = content.get("language_masks", {}).get("words", {})
        return ({lang: float(value) for lang, value in offsets.items()},
                {lang: frozenset(str(w) for w in words) for lang, words in masks.items()})
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"{card!r}: not a toxicity model card ({exc})") from exc


def windows(text: str, size: int, min_chars: int = 40) -> Iterator[str]:
    """The page's paragraphs (lines) as pieces to score: a line shorter than `min_chars` (a heading, a
    menu item) is joined to the next, a line longer than 2 * `size` is cut, at a space near `size`."""
    buffer: list[str] = []
    length = 0
    for line in text.splitlines():
        line = line.strip()
        while len(line) > 2 * size:
            cut = line.rfind(" ", size // 2, size + size // 2)
            cut = cut if cut > 0 else size
            if buffer:
                yield " ".join(buffer)
                buffer, length = [], 0
            yield line[:cut]
            line = line[cut:].strip()
        if not line:
            continue
        buffer.append(line)
        length += len(line) + 1
        if length >= min_chars:
            yield " ".join(buffer)
            buffer, length = [], 0
    if buffer:
        yield " ".join(buffer)


def load_model(path: str | None):
    return load_classifier(path or bundled(BUNDLED_MODEL), "toxicity", (TOXIC, CLEAN),
                           "Build one with `make toxicity-model` or pass toxicity.model")


def predict_toxic(model, texts: Sequence[str]) -> list[float]:
    """P(toxic) of each normalized text, in one fastText call."""
    return positive_probability(model, texts, TOXIC, CLEAN)


class ToxicityScorer(ModelStage):
    """Stage: sets `toxicity_score` (the page's most toxic paragraph); drops at or above `threshold`."""

    name = STAGE

    def __init__(self, config: ToxicityConfig = ToxicityConfig()):
        super().__init__(config)

    def load(self):
        model = load_model(self.config.model)
        self.offsets()  # a broken card fails here, in the driver, not on every page
        self._respell = Respeller(*model.get_words(include_freq=True) if self.config.respell else ([], []))
        return model

    def offsets(self) -> dict[str, float]:
        """{lang: log-odds offset} this stage applies (`language_offsets`): from the model's card, read once per
        stage (not per page: a stat and a package lookup each); after pickling it is read again where it runs."""
        return self._card()[0]

    def masks(self) -> dict[str, frozenset[str]]:
        """{lang: words left out of its windows} this stage applies (`language_masks`), from the model's card."""
        return self._card()[1]

    def _card(self) -> tuple[dict[str, float], dict[str, frozenset[str]]]:
        card = self.__dict__.get("_card_parts")
        if card is None:
            offsets, masks = _card_part(self.config.model or bundled(BUNDLED_MODEL))
            card = self._card_parts = (offsets if self.config.language_offsets else {},
                                       masks if self.config.language_masks else {})
        return card

    def window_scores(self, text: str, lang: str | None = None) -> list[tuple[float, str]]:
        """(P(toxic), window) for the page's windows; `lang` picks the words left out (`language_masks`)."""
        if self._model is None:
            self.setup()
        pieces = []
        for piece in windows(text, self.config.window_chars, self.config.min_chars):
            pieces.append(piece)
            if len(pieces) >= self.config.max_windows:
                self.count("windows_capped")
                break
        worded = [p for p in pieces if any(ch.isalpha() for ch in p)]  # a line of asterisks or numbers says nothing
        normalized = [normalize(p) for p in self._respell.page(worded)]
        masked = self.masks().get(lang or "")
        if masked:
            normalized = [" ".join(w for w in n.split() if w not in masked) for n in normalized]
        scores = dict(zip(worded, predict_toxic(self._model, normalized)))
        return [(scores.get(p, 0.0), p) for p in pieces]

    def offset_window_scores(self, text: str, lang: str | None = None) -> list[tuple[float, str]]:
        """`window_scores` less the language's offset (`language_offsets`): what the page is judged from."""
        scored = self.window_scores(text, lang)
        offset = self.offsets().get(lang or "", 0.0)
        return [(shifted(p, offset), w) for p, w in scored] if offset else scored

    def judge(self, text: str, lang: str | None = None) -> PageToxicity:
        """The page's judgment; `lang` (lid.176 code) picks its language's offset and masked words."""
        return page_toxicity(self.offset_window_scores(text, lang), self.config)

    def score(self, text: str, lang: str | None = None) -> tuple[float, str]:
        """The page's score and its most toxic window."""
        page = self.judge(text, lang)
        return page.score, page.window

    def __call__(self, doc: Document) -> StageResult:
        page = self.judge(doc.text, doc.lang)
        threshold = self.config.thresholds().get(doc.lang or "", self.config.threshold)
        if threshold is not None and page.score >= threshold:
            return doc.drop(self.name, REASON, f"{page.score:.3f} >= {threshold} ({page.toxic_windows} of "
                            f"{page.windows} windows toxic, worst {page.worst:.3f}): {page.window[:300]!r}",
                            value=page.score, threshold=threshold)
        share = page.toxic_windows / page.windows if page.windows else 0.0
        return doc.replace(toxicity_score=page.score).with_score("toxicity_worst", page.worst) \
            .with_score("toxic_window_share", share)


SPEC = StageSpec(
    name=STAGE, order=69, config=ToxicityConfig, build=ToxicityScorer,
    about="sets `toxicity_score`: the page's toxic paragraphs combined; `toxicity_worst`, `toxic_window_share`",
    reasons={REASON: "score at or over `toxicity.threshold` (only when one is set); detail: the paragraph"})
