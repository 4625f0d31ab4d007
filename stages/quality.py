"""Model-based quality scoring: P(high quality) from a fastText classifier (as in DCLM / FineWeb-Edu).

`normalize` is the one text preprocessing used both when training (`stages.quality_train`)
and when scoring, so the model sees the same tokens in both.
"""
from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from common.settings import check
from stages.models import bundled, load_fasttext, positive_probability
from stages.quality_signals import combine, signals
from stages.record import Document, DropReason, ModelStage, StageResult
from stages.table import StageSpec

STAGE = "quality"
POSITIVE, NEGATIVE = "__label__hq", "__label__lq"
BUNDLED_MODEL = "quality.ftz"
MAX_CHARS = 20_000  # a page's head tells its quality; long pages would only cost time

GRADES = tuple(f"__label__{g}" for g in range(6))  # a graded model (0-5, FineWeb-Edu's scale)
LINE = "¶"  # a line break, kept as a token by `normalize_page`: boilerplate is made of short lines

_PUNCT = re.compile(r"([^\w\s])", re.UNICODE)
_DIGITS = re.compile(r"\d")
_SPACE = re.compile(r"\s+")
# Line breaks as tokens in two linear passes: other whitespace runs become one space, then a break with the spaces
# around it the token (one regex, `\s*\n\s*`, took quadratic time on a long run of spaces without a break).
_SPACE_NOT_BREAK = re.compile(r"[^\S\n]+")
_BREAKS = re.compile(r" ?\n[ \n]*")
# Scripts written without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan): one token a
# character, so the classifier sees character unigrams and bigrams instead of whole sentences as "words".
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0eff\u1780-\u17ff\u1000-\u109f\u0f00-\u0fff"
_PUNCT_OR_UNSPACED = re.compile(f"([^\\w\\s]|[{_UNSPACED}])", re.UNICODE)


@functools.cache
def category_class(category: str) -> str:
    """The body of a regex class of every code point of planes 0-2 and 14 (tags, variation selectors) whose Unicode
    category starts with `category`, as ranges of consecutive code points (a class of 2,000 single characters made
    `normalize` 3x slower)."""
    runs: list[list[int]] = []
    for code in itertools.chain(range(0x30000), range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(code)).startswith(category):
            if runs and runs[-1][1] == code - 1:
                runs[-1][1] = code
            else:
                runs.append([code, code])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in runs)


def combining_marks() -> str:
    """The body of a regex class of every combining mark (Unicode category M: vowel signs, viramas, accents)."""
    return category_class("M")


@functools.cache
def _punct_keeping_marks(unspaced: bool) -> re.Pattern:
    """`_PUNCT` (or `_PUNCT_OR_UNSPACED`) without the combining marks: Python's `\\w` has no vowel sign or virama
    (Unicode category M), so `_PUNCT` cut every Devanagari, Bengali, Tamil ... word at its vowel signs ("करते" ->
    "करत े") and the model saw consonant stems and lone signs instead of words."""
    return re.compile(f"([^\\w\\s{combining_marks()}]" + (f"|[{_UNSPACED}])" if unspaced else ")"), re.UNICODE)


def normalize(text: str, max_chars: int = MAX_CHARS, lines: bool = False, unspaced: bool = False,
              keep_marks: bool = False) -> str:
    """NFKC, lower case, digits -> 0, punctuation split off as tokens, one line (fastText reads one line);
    `lines`: each line break becomes the token ¶ first; `unspaced`: one token a character in scripts written
    without spaces; `keep_marks`: combining marks (vowel signs, viramas) stay in their word. The bundled quality
    model was trained without `keep_marks` (its Indic tokens are stems and signs): it must be retrained with it."""
    text = unicodedata.normalize("NFKC", text[:max_chars]).lower()
    text = _DIGITS.sub("0", text)
    if lines:
        text = _BREAKS.sub(f" {LINE} ", _SPACE_NOT_BREAK.sub(" ", text.strip()))
    if keep_marks:
        text = _punct_keeping_marks(unspaced).sub(r" \1 ", text)
    else:
        text = (_PUNCT_OR_UNSPACED if unspaced else _PUNCT).sub(r" \1 ", text)
    return _SPACE.sub(" ", text).strip()


def normalize_page(text: str) -> str:
    """What the quality classifier reads, in training and scoring alike: `normalize` keeping line breaks,
    and one token a character in scripts written without spaces."""
    return normalize(text, lines=True, unspaced=True)


@dataclass(frozen=True)
class QualityConfig:
    """Model-based quality score (fastText classifier, bundled; `make quality-model` rebuilds it)."""

    enabled: bool = True
    model: str | None = None        # fastText model path; none = bundled stages/models/quality.ftz
    # Keep only documents scoring at least this; none scores without dropping (mixing uses the score).
    threshold: float | None = None
    # lm_surprise: the page's bits per character under its language's reference prose model over that
    # language's level (stages/reference_lm.py), one of the signals; off: the signal is not measured
    lm_surprise: bool = True
    reference_lm: str | None = None  # a file of reference language models; none = bundled (`make reference-lm`)

    def __post_init__(self):
        check(self.threshold is None or 0.0 <= self.threshold <= 1.0,
              f"threshold must be in [0, 1] or none, got {self.threshold}")


def bundled_model_path() -> str:
    return bundled(BUNDLED_MODEL)


def load_model(path: str | None):
    """The classifier (hq/lq, or graded 0-5), or a clear error naming the file (missing, corrupt, or
    neither kind of quality classifier)."""
    path = path or bundled_model_path()
    model = load_fasttext(path, "quality model", "Train one with `refinery train-quality` or pass quality.model")
    labels = set(model.get_labels())
    if {POSITIVE, NEGATIVE} <= labels or (labels <= set(GRADES) and len(labels) >= 2):
        return model
    raise ValueError(f"{path!r} is not a quality classifier: labels {sorted(labels)[:5]}, expected {POSITIVE} and "
                     f"{NEGATIVE}, or grades {GRADES[0]} ... {GRADES[-1]}")


def is_graded(model) -> bool:
    return set(model.get_labels()) <= set(GRADES)


def predict_hq(model, texts: Sequence[str]) -> list[float]:
    """The quality score of each normalized text, in one batched fastText call: P(hq) of a two-label model;
    for a graded model, its expected grade / 5 (so 0-1 as well)."""
    if not is_graded(model):
        return positive_probability(model, texts, POSITIVE, NEGATIVE)
    if not texts:
        return []
    labels, probs = model.predict(list(texts), k=len(model.get_labels()))
    return [min(sum(int(lab.rsplit("_", 1)[1]) * float(p) for lab, p in zip(labs, ps)) / 5.0, 1.0)
            for labs, ps in zip(labels, probs)]


def page_signals(text: str, lang: str | None, reference) -> dict[str, float | None]:
    """The page's signals measured here (encoding_damage is text_repair's): its structure and, when `reference`
    (stages.reference_lm.ReferenceModels) is given, its lm_surprise."""
    measured: dict[str, float | None] = dict(signals(text))
    if reference is not None:
        measured["lm_surprise"] = reference.surprise(text, lang)
    return measured


class QualityScorer(ModelStage):
    """Stage: sets `quality_score`; drops below `threshold` when one is set."""

    name = STAGE

    def __init__(self, config: QualityConfig = QualityConfig()):
        super().__init__(config)

    def load(self):
        """The classifier and, unless switched off, the reference language models (one file for all languages)."""
        from stages import reference_lm

        return load_model(self.config.model), reference_lm.load(self.config.reference_lm) if self.config.lm_surprise else None

    def score(self, texts: Sequence[str]) -> list[float]:
        """The model's P(hq) of each text, alone (no signals)."""
        if self._model is None:
            self.setup()
        return predict_hq(self._model[0], [normalize_page(t) for t in texts])

    def __call__(self, doc: Document) -> StageResult:
        return self.process_batch([doc])[0]

    def judge(self, docs: Sequence[Document]) -> list[Document]:
        """The documents with `quality_score` set: the model's score (one fastText call for all) combined with
        each page's signals (stages/quality_signals.py), which are set as scores too."""
        judged = []
        for doc, model_score in zip(docs, self.score([d.text for d in docs])):
            measured = page_signals(doc.text, doc.lang, self._model[1])
            score = combine(model_score, {**measured, "encoding_damage": doc.scores.get("encoding_damage")})
            doc = doc.with_score("model_quality", model_score)
            for name, value in measured.items():
                doc = doc.with_score(name, value)
            judged.append(doc.replace(quality_score=score))
        return judged

    def process_batch(self, docs: Sequence[Document]) -> list[StageResult]:
        """The pipeline feeds this stage batches."""
        threshold = self.config.threshold
        return [doc.drop(STAGE, DropReason.QUALITY_BELOW_THRESHOLD, f"{doc.quality_score:.3f} < {threshold}",
                         value=doc.quality_score, threshold=threshold)
                if threshold is not None and doc.quality_score < threshold else doc for doc in self.judge(docs)]


SPEC = StageSpec(
    name=STAGE, order=70, config=QualityConfig, build=QualityScorer, about="sets `quality_score`: the model and the page's signals",
    reasons={DropReason.QUALITY_BELOW_THRESHOLD: "score under `quality.threshold` (only when one is set)"})
