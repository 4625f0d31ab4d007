"""`--dedup-against OLD_OUTPUT`: new documents duplicating those of earlier runs are dropped, naming the old id and
run; the global stage `Against` is at the end.

Only the old runs' signatures are read (pipeline/job/signatures.py), never their texts: one GroupByKey of bucket
groups (exact key or band digest, packed entries) joins them with the new documents' (no gather onto one worker),
one CoGroupByKey of id groups drops the duplicates.
"""
from __future__ import annotations

import os

import apache_beam as beam

from pipeline.job.config import ConfigError
from pipeline.job.globals.base import GlobalStage
from pipeline.job.globals.groupings import GroupedEntries, GroupedRecords, bucket_group, resolve_by_id
from pipeline.job.signatures import check_old_runs, earlier_signature_files, read_signature_file
from pipeline.job.signed import Decision, Signed, by_group_of_id, group_of
from pipeline.job.transforms import DOCUMENTS, LEDGER
from stages.dedup import BAND_DIGEST_BYTES, DEDUP_AGAINST, EXACT_OLD, NEAR_OLD, DedupConfig

STAGE = DEDUP_AGAINST

# Buckets of the old and new signatures, packed per group (groupings.py, GroupedEntries). An entry:
# kind (1 byte: band index, or EXACT_KIND), digest (12 bytes; the exact key's 16), who (1 byte: new 0, old:
# 1 + the old run's index in --dedup-against), id length (2 bytes), id.
EXACT_KIND = 255


def _entry(kind: int, digest: bytes, who: int, doc_id: str) -> bytes:
    raw = doc_id.encode("utf-8", "surrogatepass")
    return bytes((kind,)) + digest + bytes((who,)) + len(raw).to_bytes(2, "big") + raw


def _keys(exact: str | None, bands: list[bytes]):
    if exact:
        yield EXACT_KIND, bytes.fromhex(exact)
    yield from enumerate(bands)


class _OldEntries(GroupedEntries):
    """(old run index, signature file, its SHA-256) -> (bucket group, entries) of every document there."""

    def process(self, indexed):
        index, path, sha256 = indexed
        for batch in read_signature_file(path, sha256).iter_batches(columns=["id", "exact_key", "bands"]):
            for row in batch.to_pylist():
                for kind, digest in _keys(row["exact_key"], row["bands"] or []):
                    yield from self.add(bucket_group(kind, digest), _entry(kind, digest, 1 + index, row["id"]))


class _NewEntries(GroupedEntries):
    def process(self, packed: bytes):
        s = Signed.unpack(packed)
        for kind, digest in _keys(s.exact_key, s.band_digests()):
            yield from self.add(bucket_group(kind, digest), _entry(kind, digest, 0, s.id))


def _matches(group, folders: list[str]):
    """(group, [entries]) -> (new id, (0 exact / 1 near, old id, old folder)) for each new document in a
    bucket with an old one (the smallest old id)."""
    buckets: dict[tuple[int, bytes], tuple[list, list]] = {}
    for entries in group[1]:
        at = 0
        while at < len(entries):
            kind = entries[at]
            end = at + 1 + (16 if kind == EXACT_KIND else BAND_DIGEST_BYTES)
            who, size = entries[end], int.from_bytes(entries[end + 1:end + 3], "big")
            doc_id = entries[end + 3:end + 3 + size].decode("utf-8", "surrogatepass")
            olds, news = buckets.setdefault((kind, entries[at + 1:end]), ([], []))
            if who:
                olds.append((doc_id, folders[who - 1]))
            else:
                news.append(doc_id)
            at = end + 3 + size
    for (kind, _), (olds, news) in buckets.items():
        if olds:
            old = min(olds)
            yield from ((new, (0 if kind == EXACT_KIND else 1, *old)) for new in news)


def _resolve(kv):
    """(group, {"doc": [records], "match": [(id, match)]}) -> the documents matching nothing, Decisions for the others."""
    _, joined = kv
    matches: dict = {}
    for doc_id, match in joined["match"]:
        matches[doc_id] = min(match, matches.get(doc_id, match))

    def decision(s: Signed) -> Decision | None:
        match = matches.get(s.id)
        if match is None:
            return None
        rank, old_id, folder = match
        return Decision(s.id, s.part, STAGE, NEAR_OLD if rank else EXACT_OLD,
                        f"{'near' if rank else 'exact'} duplicate of {old_id} in {folder}")

    yield from resolve_by_id(STAGE, joined["doc"], decision)


class DedupAgainst(beam.PTransform):
    """packed Signed -> (those duplicating no document of the old runs, Decisions naming the old id and run)."""

    def __init__(self, folders, dedup: DedupConfig):
        super().__init__()
        self._files, self._folders = check_old_runs(folders, dedup), list(folders)

    def expand(self, signed_docs):
        indexed = [(self._folders.index(folder), path, listed["sha256"]) for folder, path, listed in self._files]
        old = (signed_docs.pipeline
               | "OldFiles" >> beam.Create(indexed)
               | "SpreadOldFiles" >> beam.Reshuffle()
               | "OldEntries" >> beam.ParDo(_OldEntries()))
        new = signed_docs | "NewEntries" >> beam.ParDo(_NewEntries())
        matches = ((old, new)
                   | "AllEntries" >> beam.Flatten()
                   | "ByGroup" >> beam.GroupByKey()
                   | "Matches" >> beam.FlatMap(_matches, self._folders))
        results = (({"doc": signed_docs | "GroupOfId" >> beam.ParDo(GroupedRecords(by_group_of_id)),
                     "match": matches | "MatchGroup" >> beam.Map(lambda kv: (group_of(kv[0]), kv))}
                    | "Join" >> beam.CoGroupByKey())
                   | "Resolve" >> beam.FlatMap(_resolve).with_outputs(LEDGER, main=DOCUMENTS))
        return results[DOCUMENTS], results[LEDGER]


class Against(GlobalStage):
    def decide(self, flow):
        flow.signed, decided = flow.signed | f"Stage_{self.name}" >> DedupAgainst(self.config.dedup_against,
                                                                                  self.config.dedup)
        return decided

    @classmethod
    def preflight(cls, config) -> None:
        own = os.path.abspath(config.output)
        if any(os.path.abspath(folder) == own for folder in config.dedup_against):
            raise ConfigError("--dedup-against names this run's own --output; give earlier runs' folders")
        earlier_signature_files(config)  # checks them
