"""A grouped global stage (stages/grouped.py) in the job: packed Signed records -> (the records it keeps, a
Decision for each it drops). One GroupByKey by the stage's group; each group's records meet on one worker."""
from __future__ import annotations

import apache_beam as beam

from pipeline.counters import count, dropped, entered
from pipeline.job.dedup import count_kept_signed
from pipeline.job.signed import Decision, Signed
from pipeline.job.transforms import DOCUMENTS, LEDGER
from stages.grouped import GroupedStage


class GroupedGlobal(beam.PTransform):
    def __init__(self, name: str, stage: GroupedStage, reasons):
        super().__init__()
        self.name, self._stage, self._reasons = name, stage, frozenset(reasons)

    def expand(self, signed):
        keyed = signed | "GroupOf" >> beam.ParDo(_Keyed(self.name, self._stage)).with_outputs(DOCUMENTS, main="keyed")
        decided = (keyed["keyed"]
                   | "ByGroup" >> beam.GroupByKey()
                   | "Decide" >> beam.FlatMap(_decide, self.name, self._stage, self._reasons)
                   .with_outputs(LEDGER, main=DOCUMENTS))
        kept = (keyed[DOCUMENTS], decided[DOCUMENTS]) | "Kept" >> beam.Flatten()
        return kept, decided[LEDGER]


class _Keyed(beam.DoFn):
    """(group, packed) per record in a group; a record in no group is kept here (DOCUMENTS), counted."""

    def __init__(self, name: str, stage: GroupedStage):
        self._name, self._stage = name, stage

    def process(self, packed: bytes):
        s = Signed.unpack(packed)
        group = self._stage.group(s)
        if group is None:
            count(entered(self._name))
            count_kept_signed(self._name, s)
            yield beam.pvalue.TaggedOutput(DOCUMENTS, packed)
        else:
            yield str(group), packed


def _decide(kv, name: str, stage: GroupedStage, reasons: frozenset):
    group, packed_records = kv
    members = sorted(((Signed.unpack(p), p) for p in packed_records), key=lambda m: m[0].id)  # same on every runner
    drops = {d.id: d for d in stage.decide(group, [s for s, _ in members])}
    for s, packed in members:
        count(entered(name))
        drop = drops.get(s.id)
        if drop is None:
            count_kept_signed(name, s)
            yield packed
            continue
        if drop.reason not in reasons:
            raise ValueError(f"stage {name} dropped {s.id} with reason {drop.reason!r}, which its spec does not "
                             f"declare (declared: {', '.join(sorted(reasons))})")
        count(dropped(name, drop.reason))
        yield beam.pvalue.TaggedOutput(LEDGER, Decision(s.id, s.part, name, drop.reason, drop.detail[:500],
                                                        drop.kept_id))
