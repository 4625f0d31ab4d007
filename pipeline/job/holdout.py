"""The validation split: a fixed share of the finished documents, chosen by a hash of the document's
id, goes to OUTPUT/valid/ instead of the training shards.

Chosen after every filter, dedup, PII and decontamination stage (so it is cleaned like the rest and no
near-duplicate of it stays in training) and keyed by the id alone (not the run's seed or mix), so reruns
and runs with other mixtures or seeds over the same input hold out the same documents: their validation
losses are measured on the same text. Repeats made by the mix (`id#eN`) of a held-out document are left
out of training too, and never enter valid/ twice.
"""
from __future__ import annotations

from pipeline.counters import HOLDOUT_VALID, HOLDOUT_VALID_TOKENS, count, note
from stages.mix import approx_tokens, original_id, unit_hash
from stages.record import Document

STAGE = "holdout"
VALID, TRAIN = "valid", "train"


def held_out(doc_id: str, fraction: float) -> bool:
    """Whether this document belongs to the validation split (stable: depends on the id alone)."""
    return fraction > 0 and unit_hash(0, STAGE, original_id(doc_id)) < fraction


def split(doc: Document, fraction: float) -> str | None:
    """TRAIN or VALID for a finished document; None for a repeat of a held-out one (left out of both)."""
    if not held_out(doc.id, fraction):
        return TRAIN
    if doc.epoch:
        count(note(STAGE, "repeats_left_out"))  # a copy, not a document read: no conservation entry
        return None
    count(HOLDOUT_VALID)
    count(HOLDOUT_VALID_TOKENS, approx_tokens(doc.text))
    return VALID
