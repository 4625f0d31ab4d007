"""OUTPUT/signatures/: (id, exact key, MinHash band digests) of every document in the output, and the
stage that drops new documents duplicating those of earlier runs (`--dedup-against OLD_OUTPUT`).

Signatures are computed in phase 1 (pipeline/prepare.py) on the text that dedup compares, so a page of
next month's crawl is compared with this one's exactly as two pages of one crawl are. Only the old
runs' signatures are read, never their texts: one GroupByKey per exact key / band digest joins them
with the new documents' (no gather onto one worker), one CoGroupByKey by id drops the duplicates.
"""
from __future__ import annotations

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipeline.config import ConfigError
from pipeline.dedup import Decision, Signed, by_group_of_id, count_kept_signed, group_of
from pipeline.prepare import read_json, signature_settings
from pipeline.transforms import DOCUMENTS, LEDGER, count
from stages.dedup import DEDUP_AGAINST, EXACT_OLD, NEAR_OLD, DedupConfig

SIGNATURES_DIR = "signatures"
STAGE = DEDUP_AGAINST


def check_old_runs(folders, dedup: DedupConfig) -> list[str]:
    """Pre-flight of --dedup-against: each folder is a finished run whose signatures were made with the
    same settings as this run's; their signature files."""
    files = []
    for folder in folders:
        manifest = read_json(FileSystems.join(folder, "manifest.json"))
        if manifest is None:
            raise ConfigError(f"--dedup-against {folder}: no manifest.json there (not a finished refinery run)")
        theirs = manifest.get("signatures")
        if theirs is None:
            raise ConfigError(f"--dedup-against {folder}: that run kept no signatures/ (made before refinery "
                              "wrote them); rerun it, or leave it out")
        if theirs != signature_settings(dedup):
            raise ConfigError(f"--dedup-against {folder}: its signatures were made with {theirs}, this run's "
                              f"are {signature_settings(dedup)}; set the dedup section alike")
        match = FileSystems.match([FileSystems.join(folder, SIGNATURES_DIR, "part-*.parquet")])[0]
        files += [(folder, m.path) for m in match.metadata_list]
    return files


def _old_keys(folder_and_path):
    folder, path = folder_and_path
    with FileSystems.open(path) as fh:
        for batch in pq.ParquetFile(fh).iter_batches(columns=["id", "exact_key", "bands"]):
            for row in batch.to_pylist():
                old = (row["id"], folder)
                if row["exact_key"]:
                    yield ("x", row["exact_key"]), old
                for i, digest in enumerate(row["bands"] or ()):
                    yield (i, digest), old


def _new_keys(packed: bytes):
    s = Signed.unpack(packed)
    if s.exact_key:
        yield ("x", s.exact_key), s.id
    for i, digest in enumerate(s.band_digests()):
        yield (i, digest), s.id


def _matches(bucket):
    """(key, [old (id, folder) or new id]) -> (new id, (0 exact / 1 near, old id, folder)) for each new member."""
    (kind, _), members = bucket
    members = list(members)
    olds = [m for m in members if isinstance(m, tuple)]
    if not olds:
        return []
    old = min(olds)
    rank = 0 if kind == "x" else 1
    return [(m, (rank, *old)) for m in members if not isinstance(m, tuple)]


def _resolve(kv):
    """(group, {"doc": [packed], "match": [(id, match)]}) -> the documents matching nothing, Decisions for the others."""
    _, joined = kv
    matches: dict = {}
    for doc_id, match in joined["match"]:
        matches[doc_id] = min(match, matches.get(doc_id, match))
    for packed in joined["doc"]:
        s = Signed.unpack(packed)
        count(f"{STAGE}.in")
        match = matches.get(s.id)
        if match is None:
            count_kept_signed(STAGE, s)
            yield packed
        else:
            rank, old_id, folder = match
            reason = NEAR_OLD if rank else EXACT_OLD
            count(f"{STAGE}.drop.{reason}")
            yield beam.pvalue.TaggedOutput(LEDGER, Decision(s.id, s.part, STAGE, reason, f"{'near' if rank else 'exact'} "
                                                            f"duplicate of {old_id} in {folder}"))


class DedupAgainst(beam.PTransform):
    """packed Signed -> (those duplicating no document of the old runs, Decisions naming the old id and run)."""

    def __init__(self, folders, dedup: DedupConfig):
        super().__init__()
        self._files, self._dedup = check_old_runs(folders, dedup), dedup

    def expand(self, signed_docs):
        old = (signed_docs.pipeline
               | "OldFiles" >> beam.Create(self._files)
               | "SpreadOldFiles" >> beam.Reshuffle()
               | "OldKeys" >> beam.FlatMap(_old_keys))
        new = signed_docs | "NewKeys" >> beam.FlatMap(_new_keys)
        matches = ((old, new)
                   | "AllKeys" >> beam.Flatten()
                   | "ByKey" >> beam.GroupByKey()
                   | "Matches" >> beam.FlatMap(_matches))
        results = (({"doc": signed_docs | "GroupOfId" >> beam.Map(by_group_of_id),
                     "match": matches | "MatchGroup" >> beam.Map(lambda kv: (group_of(kv[0]), kv))}
                    | "Join" >> beam.CoGroupByKey())
                   | "Resolve" >> beam.FlatMap(_resolve).with_outputs(LEDGER, main=DOCUMENTS))
        return results[DOCUMENTS], results[LEDGER]
