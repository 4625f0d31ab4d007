"""Rescue by evidence: a page that fails one repetition limit by a hair while the quality model calls it
good prose is kept, and says so (`metadata.rescued`).

Gopher's n-gram limits are single numbers for every page of a language; real articles land a few percent
over them (0.153 > 0.15) for reasons of topic and length, not because they are spam. A page is rescued only
when all of these hold: the failed rule is one of the n-gram repetition rules (line, paragraph, bullet and
word-count rules are not: near those limits the pages measured are listings and link farms), it fails that
one rule only, by less than `rescue_margin` of the limit, no rule was waived for it before, and the quality
judgment (the run's `quality.model` and the page's signals) scores it at least `rescue_min_quality`. Measured on trafilatura's
benchmark articles and the demo's junk pages: bench/RESULTS.md, "Rescue by evidence".
"""
from __future__ import annotations

from collections.abc import Iterator

from stages.record import Document, DropReason

RESCUABLE = frozenset({DropReason.DUP_NGRAM_CHARS, DropReason.TOP_NGRAM_CHARS})
RESCUED = "rescued"   # the metadata key (and output column metadata.rescued)


class Rescue:
    """Asks the quality model about a page that missed one rescuable limit by less than `margin`."""

    def __init__(self, quality_config):
        from stages.quality import QualityScorer

        self.scorer = QualityScorer(quality_config)

    def check(self) -> None:
        self.scorer.check()

    def setup(self) -> None:
        self.scorer.setup()

    def teardown(self) -> None:
        self.scorer.teardown()

    def __call__(self, stage: str, doc: Document, verdict: tuple, others: Iterator[tuple], margin: float | None,
                 min_quality: float) -> Document | None:
        """The document kept with `metadata.rescued` set, or None (drop it with `verdict`). `others`: the
        stage's further verdicts, asked for only when everything else qualifies."""
        reason, detail, *measured = verdict
        if margin is None or reason not in RESCUABLE or not measured or doc.metadata.get(RESCUED):
            return None
        value, limit = measured
        if not value <= limit * (1.0 + margin) or next(others, None) is not None:
            return None
        score = self.scorer.judge([doc])[0].quality_score
        if score < min_quality:
            return None
        return doc.replace(metadata={**doc.metadata, RESCUED: f"{stage}:{reason} {detail}; quality {score:.3f}"})
