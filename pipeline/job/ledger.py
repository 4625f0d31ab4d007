"""The drop ledger's last step: every `kept_id` names a document that is in the output.

A duplicate names the copy its dedup stage kept, but that copy can leave later: the exact-dedup
survivor may be a near duplicate of another page, or be dropped by decontamination, a PII
budget or the mix. Each round joins the duplicates, keyed by the copy they name, with the ledger
keyed by id (a CoGroupByKey: no gather onto one worker); one round per dedup stage follows every
chain to its end. A copy that is in no ledger row is in the output (conservation is checked after
the run); one dropped for another reason leaves `kept_id` empty and the detail says what happened.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import apache_beam as beam

from stages.record import Drop

_DUP, _FATE = "duplicates", "fate"


def _follow(grouped) -> Iterable[tuple[Drop, bool]]:
    copy_id, groups = grouped
    fates = list(groups[_FATE])
    for drop, done in groups[_DUP]:
        if done or not fates:  # resolved earlier, or the copy named is in the output
            yield drop, True
            continue
        stage, label, next_id = fates[0]
        if next_id:  # the copy is itself a duplicate: name its survivor, and go on next round
            yield dataclasses.replace(drop, kept_id=next_id,
                                      detail=f"{drop.detail}; {copy_id} was a {label} of {next_id}"[:1000]), False
        else:
            yield dataclasses.replace(drop, kept_id=None,
                                      detail=f"{drop.detail}; that copy was dropped later by {stage} ({label})"[:1000]), True


class ResolveKeptCopies(beam.PTransform):
    """ledger Drops -> the same Drops, duplicates' `kept_id` resolved to the copy in the output."""

    def __init__(self, rounds: int):
        super().__init__()
        self._rounds = rounds

    def expand(self, drops):
        if not self._rounds:
            return drops
        fate = drops | "FateById" >> beam.Map(lambda d: (d.id, (d.stage, d.label, d.kept_id)))
        others = drops | "NotDuplicates" >> beam.Filter(lambda d: not d.kept_id)
        pending = (drops | "Duplicates" >> beam.Filter(lambda d: bool(d.kept_id))
                   | "Pending" >> beam.Map(lambda d: (d, False)))
        for i in range(self._rounds):
            pending = ({_DUP: pending | f"ByCopy{i}" >> beam.Map(lambda dd: (dd[0].kept_id, dd)), _FATE: fate}
                       | f"Join{i}" >> beam.CoGroupByKey()
                       | f"Follow{i}" >> beam.FlatMap(_follow))
        resolved = pending | "Resolved" >> beam.Map(lambda dd: dd[0])
        return (others, resolved) | "AllDrops" >> beam.Flatten()
