"""The groupings global stages share (pipeline/job/globals/base.py): records packed per group so that a grouping holds
a few large objects per group (GroupedEntries, GroupedRecords, records_in), bucket groups, the join of decisions by
id, counting what a stage keeps, the cluster sizes dedup leaves, and GroupedGlobal: one GroupByKey by a plain-Python
stage's group (stages/grouped.py)."""
from __future__ import annotations

from collections.abc import Iterable

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from pipeline.counters import count, count_kept_tokens, dropped, entered
from pipeline.job.signed import Decision, Signed
from pipeline.job.transforms import DOCUMENTS, LEDGER
from stages.grouped import GroupedStage

BUCKET_GROUP_BITS = 12  # 4,096 bucket groups per band, each of documents / 4,096 entries (~60 MB at 3 B documents)


def cluster_sizes(packed: bytes):
    """A document dedup kept -> (its part, (id, cluster size)) where it stands for duplicates (FinishPart sets
    `cluster_size`; 1 where nothing comes)."""
    s = Signed.unpack(packed)
    if s.copies > 1:
        yield s.part, (s.id, s.copies)


def count_kept_signed(stage: str, s: Signed) -> None:
    count_kept_tokens(stage, s.tokens)


def resolve_by_id(stage: str, records: Iterable[bytes], decision_of) -> Iterable:
    """The signed records of one id group (GroupedRecords blobs), each kept or dropped by the Decision
    `decision_of(signed)` gives it (None: kept), counted for `stage`: what a join of decisions by id yields
    (`--dedup-against`, `--robots`)."""
    for packed in records_in(records):
        s = Signed.unpack(packed)
        count(entered(stage))
        decision = decision_of(s)
        if decision is None:
            count_kept_signed(stage, s)
            yield packed
        else:
            count(dropped(stage, decision.reason))
            yield beam.pvalue.TaggedOutput(LEDGER, decision)


class GroupedEntries(beam.DoFn):
    """Base of DoFns that emit (group, entries): byte records concatenated per group over a bundle (flushed
    every FLUSH_BYTES), so a grouping holds a few large objects per group instead of a key or an object per
    record (an in-memory runner keeps grouped values as Python objects, each with its header and list slot;
    for the 20-byte band entries that was most of their cost, bench/RESULTS.md)."""

    FLUSH_BYTES = 64 << 20

    def start_bundle(self) -> None:
        self._groups: dict[int, bytearray] = {}
        self._size = 0

    def add(self, group: int, entry: bytes):
        """Adds a fixed-layout entry; yields the groups when the buffer is full."""
        self._groups.setdefault(group, bytearray()).extend(entry)
        self._size += len(entry)
        if self._size >= self.FLUSH_BYTES:
            yield from self._flush()

    def add_record(self, group: int, record: bytes):
        """Adds a record of any length (read back with `records_in`)."""
        yield from self.add(group, len(record).to_bytes(RECORD_LENGTH_BYTES, "big") + record)

    def _flush(self):
        groups, self._groups, self._size = self._groups, {}, 0
        while groups:  # each buffer is freed as soon as it is copied out
            group, entries = groups.popitem()
            yield group, bytes(entries)

    def finish_bundle(self):
        for element in self._flush():
            yield GlobalWindows.windowed_value(element)


RECORD_LENGTH_BYTES = 4


def records_in(blobs: Iterable[bytes]) -> Iterable[bytes]:
    """The records that `GroupedEntries.add_record` concatenated into blobs."""
    n = RECORD_LENGTH_BYTES
    for blob in blobs:
        at = 0
        while at < len(blob):
            size = int.from_bytes(blob[at:at + n], "big")
            yield blob[at + n:at + n + size]
            at += n + size


class GroupedRecords(GroupedEntries):
    """packed record -> (group, records): `group_and_record(packed)` gives a record's group and what of it
    the grouping carries."""

    def __init__(self, group_and_record):
        self._group_and_record = group_and_record

    def process(self, packed: bytes, *_wait_for):
        yield from self.add_record(*self._group_and_record(packed))


def bucket_group(kind: int, digest: bytes) -> int:
    """The group of bucket (kind: a band index, or another key kind, digest): the kind and the digest's
    first BUCKET_GROUP_BITS bits."""
    return (kind << BUCKET_GROUP_BITS) | (int.from_bytes(digest[:2], "big") >> (16 - BUCKET_GROUP_BITS))


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
