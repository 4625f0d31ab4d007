"""Source mixing and the anneal split, decided per document while each part's shards are written
(pipeline/job/finish.py); Beam-free: token counts per source are summed over one small record per finished document
(a combine), then each document is drawn against the rates they imply (a side input of a few numbers)."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.job.holdout import held_out
from stages.mix import approx_tokens, copies, rehydration_weight, repeat_id, unit_hash
from stages.record import Document, Drop, DropReason
from stages.runner import Count, count_kept, no_count

STAGE = "mix"


@dataclass(frozen=True)
class Mix:
    weights: dict[str, float]
    seed: int
    max_epochs: int = 4

    def copies(self, doc_id: str, source: str, rates: dict[str, float], weight: int = 1) -> int:
        return copies(doc_id, rates.get(source, 1.0) * weight, self.seed, self.max_epochs)

    def draw(self, doc: Document, rates: dict[str, float], count: Count = no_count,
             weight: int = 1) -> list[Document] | Drop:
        """The document and its repeats (own id, own epoch), or its drop. `weight`: its rehydration weight (the
        rates were computed over tokens times each document's weight)."""
        count(f"{STAGE}.in", 1)
        rate = rates.get(doc.source, 1.0) * weight
        if rate > self.max_epochs:
            count(f"{STAGE}.note.capped.{doc.source}", 1)  # the report names sources whose share is out of reach
        n = self.copies(doc.id, doc.source, rates, weight)
        if n == 0:
            count(f"{STAGE}.drop.{DropReason.MIX_DOWNSAMPLED}", 1)
            return doc.drop(STAGE, DropReason.MIX_DOWNSAMPLED, f"{doc.source} rate {rate:.3f}")
        count_kept(count, STAGE, approx_tokens(doc.text) if doc.text else 0)
        for _ in range(1, n):  # repeats of a source smaller than its share
            count(f"{STAGE}.note.repeats", 1)
        return repeats(doc, n)


def repeats(doc: Document, n: int) -> list[Document]:
    """The document and its n - 1 repeats, each with its own id and epoch."""
    return [doc] + [doc.replace(id=repeat_id(doc.id, epoch), epoch=epoch) for epoch in range(1, n)]


@dataclass(frozen=True)
class Rehydration:
    """FineWeb-2's rehydration: a document dedup kept for a cluster of duplicates is written `weight` times."""

    table: tuple
    max_epochs: int

    def weight(self, cluster_size: int | None) -> int:
        return min(rehydration_weight(self.table, cluster_size), self.max_epochs)


def weight_of(rehydrate: Rehydration | None, cluster_size: int | None) -> int:
    return rehydrate.weight(cluster_size) if rehydrate else 1


def anneal_tokens(finished: tuple, rates: dict[str, float], mix: Mix | None, holdout_fraction: float,
                  min_quality: float) -> list[tuple[str, int]]:
    """(id, source, tokens, quality, rehydration weight) of a finished document -> its ("all", tokens) in the
    training shards (one per copy the mix or rehydration makes, none if held out) and ("hq", tokens) if its
    original may enter the anneal split."""
    doc_id, source, tokens, quality, weight = finished
    if held_out(doc_id, holdout_fraction):
        return []
    n = mix.copies(doc_id, source, rates, weight) if mix else weight
    return [("all", tokens)] * n + ([("hq", tokens)] if n and quality is not None and quality >= min_quality else [])


def anneal_pick(doc: Document, totals: dict[str, int], fraction: float, min_quality: float, seed: int) -> bool:
    """Whether a training document also enters the anneal split: high-quality originals only, drawn so the
    split holds `fraction` of the main output's tokens (or all such documents, if there are fewer)."""
    if doc.epoch != 0 or doc.quality_score is None or doc.quality_score < min_quality:
        return False
    rate = min(1.0, fraction * totals.get("all", 0) / max(totals.get("hq", 0), 1))
    return unit_hash(seed, "anneal", doc.id) < rate
