"""Model-based quality scoring: P(high quality) from a fastText classifier (as in DCLM / FineWeb-Edu).

`normalize` is the one text preprocessing used both when training (`stages.quality_train`)
and when scoring, so the model sees the same tokens in both.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from stages.models import bundled, load_classifier, positive_probability
from stages.record import Document, DropReason, ModelStage, StageResult
from stages.settings import check
from stages.table import StageSpec

STAGE = "quality"
POSITIVE, NEGATIVE = "__label__hq", "__label__lq"
BUNDLED_MODEL = "quality.ftz"
MAX_CHARS = 20_000  # a page's head tells its quality; long pages would only cost time

_PUNCT = re.compile(r"([^\w\s])", re.UNICODE)
_DIGITS = re.compile(r"\d")
_SPACE = re.compile(r"\s+")


def normalize(text: str, max_chars: int = MAX_CHARS) -> str:
    """NFKC, lower case, digits -> 0, punctuation split off as tokens, one line (fastText reads one line)."""
    text = unicodedata.normalize("NFKC", text[:max_chars]).lower()
    text = _DIGITS.sub("0", text)
    text = _PUNCT.sub(r" \1 ", text)
    return _SPACE.sub(" ", text).strip()


@dataclass(frozen=True)
class QualityConfig:
    """Model-based quality score (fastText classifier, bundled; `make quality-model` rebuilds it)."""

    enabled: bool = True
    model: str | None = None        # fastText model path; none = bundled stages/models/quality.ftz
    # Keep only documents scoring at least this; none scores without dropping (mixing uses the score).
    threshold: float | None = None

    def __post_init__(self):
        check(self.threshold is None or 0.0 <= self.threshold <= 1.0,
              f"threshold must be in [0, 1] or none, got {self.threshold}")


def bundled_model_path() -> str:
    return bundled(BUNDLED_MODEL)


def load_model(path: str | None):
    """The classifier, or a clear error naming the file (missing, corrupt, or not a hq/lq classifier)."""
    return load_classifier(path or bundled_model_path(), "quality", (POSITIVE, NEGATIVE),
                           "Train one with `refinery train-quality` or pass quality.model")


def predict_hq(model, texts: Sequence[str]) -> list[float]:
    """P(high quality) for each normalized text, in one batched fastText call."""
    return positive_probability(model, texts, POSITIVE, NEGATIVE)


class QualityScorer(ModelStage):
    """Stage: sets `quality_score`; drops below `threshold` when one is set."""

    name = STAGE

    def __init__(self, config: QualityConfig = QualityConfig()):
        super().__init__(config)

    def load(self):
        return load_model(self.config.model)

    def score(self, texts: Sequence[str]) -> list[float]:
        if self._model is None:
            self.setup()
        return predict_hq(self._model, [normalize(t) for t in texts])

    def __call__(self, doc: Document) -> StageResult:
        return self.process_batch([doc])[0]

    def process_batch(self, docs: Sequence[Document]) -> list[StageResult]:
        """One fastText call for many documents (the pipeline feeds this stage batches)."""
        results: list[StageResult] = []
        for doc, score in zip(docs, self.score([d.text for d in docs])):
            if self.config.threshold is not None and score < self.config.threshold:
                results.append(doc.drop(STAGE, DropReason.QUALITY_BELOW_THRESHOLD,
                                        f"{score:.3f} < {self.config.threshold}",
                                        value=score, threshold=self.config.threshold))
            else:
                results.append(doc.replace(quality_score=score))
        return results


SPEC = StageSpec(
    name=STAGE, order=70, config=QualityConfig, build=QualityScorer, about="sets `quality_score`",
    reasons={DropReason.QUALITY_BELOW_THRESHOLD: "score under `quality.threshold` (only when one is set)"})
