"""Source mixing as Beam transforms: global token counts per source (a combine), then a
deterministic per-document draw against the rates they imply (a side input of a few numbers)."""
from __future__ import annotations

import apache_beam as beam

from pipeline.transforms import DOCUMENTS, LEDGER, count, count_kept
from stages.mix import approx_tokens, copies, mix_rates, repeat_id, unit_hash
from stages.record import Document, DropReason

STAGE = "mix"


def _draw(doc: Document, rates: dict[str, float], seed: int, max_epochs: int):
    count(f"{STAGE}.in")
    rate = rates.get(doc.source, 1.0)
    if rate > max_epochs:
        count(f"{STAGE}.note.capped.{doc.source}")  # the report names sources whose share is out of reach
    n = copies(doc.id, rate, seed, max_epochs)
    if n == 0:
        count(f"{STAGE}.drop.{DropReason.MIX_DOWNSAMPLED}")
        yield beam.pvalue.TaggedOutput(LEDGER, doc.drop(STAGE, DropReason.MIX_DOWNSAMPLED,
                                                        f"{doc.source} rate {rates.get(doc.source, 1.0):.3f}"))
        return
    count_kept(STAGE, doc)
    yield doc
    for epoch in range(1, n):  # repeats of a source smaller than its share: own id, own epoch
        count(f"{STAGE}.note.repeats")
        yield doc.replace(id=repeat_id(doc.id, epoch), epoch=epoch)


class Mix(beam.PTransform):
    def __init__(self, weights: dict[str, float], seed: int, max_epochs: int = 4):
        super().__init__()
        self._weights, self._seed, self._max_epochs = weights, seed, max_epochs

    def expand(self, documents):
        weights = self._weights
        rates = (documents
                 | "SourceTokens" >> beam.Map(lambda d: (d.source, approx_tokens(d.text)))
                 | "PerSource" >> beam.CombinePerKey(sum)
                 | "AsDict" >> beam.combiners.ToDict()
                 | "Rates" >> beam.Map(lambda tokens: mix_rates(weights, tokens)))
        results = documents | "Draw" >> beam.FlatMap(_draw, beam.pvalue.AsSingleton(rates), self._seed, self._max_epochs) \
            .with_outputs(LEDGER, main=DOCUMENTS)
        return results[DOCUMENTS], results[LEDGER]


def _anneal_pick(doc: Document, totals: dict[str, int], fraction: float, min_quality: float, seed: int):
    if doc.epoch != 0 or doc.quality_score is None or doc.quality_score < min_quality:
        return
    rate = min(1.0, fraction * totals.get("all", 0) / max(totals.get("hq", 0), 1))
    if unit_hash(seed, "anneal", doc.id) < rate:
        count("anneal.rows")
        yield doc


class AnnealSplit(beam.PTransform):
    """A second split for the final phase of training: high-quality documents only (quality_score >=
    min_quality), drawn so the split holds `fraction` of the main output's tokens (or all such documents,
    if there are fewer). Documents stay in the main output too."""

    def __init__(self, fraction: float, min_quality: float, seed: int):
        super().__init__()
        self._fraction, self._min_quality, self._seed = fraction, min_quality, seed

    def expand(self, documents):
        min_quality = self._min_quality
        totals = (documents
                  | "Tokens" >> beam.FlatMap(lambda d: [("all", approx_tokens(d.text))] + (
                      [("hq", approx_tokens(d.text))] if d.epoch == 0 and (d.quality_score or 0) >= min_quality
                      else []))
                  | "Sum" >> beam.CombinePerKey(sum)
                  | "AsDict" >> beam.combiners.ToDict())
        return documents | "Pick" >> beam.FlatMap(_anneal_pick, beam.pvalue.AsSingleton(totals), self._fraction,
                                                  self._min_quality, self._seed)
