"""OUTPUT/signatures/: (id, exact key, MinHash band digests) of every document in the output, and the
stage that drops new documents duplicating those of earlier runs (`--dedup-against OLD_OUTPUT`).

Signatures are computed in phase 1 (pipeline/job/prepare.py) on the text that dedup compares, so a page of
next month's crawl is compared with this one's exactly as two pages of one crawl are. Only the old
runs' signatures are read, never their texts: one GroupByKey of bucket groups (exact key or band digest,
packed entries) joins them with the new documents' (no gather onto one worker), one CoGroupByKey of id
groups drops the duplicates.
"""
from __future__ import annotations

import hashlib
import io

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipeline.job.config import ConfigError
from pipeline.job.dedup import GroupedEntries, GroupedRecords, bucket_group, resolve_by_id
from pipeline.job.prepare import paragraph_settings, signature_settings
from pipeline.job.signed import Decision, Signed, by_group_of_id, group_of
from pipeline.job.transforms import DOCUMENTS, LEDGER
from pipeline.storage import read_json
from stages.dedup import BAND_DIGEST_BYTES, DEDUP_AGAINST, EXACT_OLD, NEAR_OLD, DedupConfig
from stages.record import StageEnvironmentError

STAGE = DEDUP_AGAINST


def check_old_runs(folders, dedup: DedupConfig, paragraphs: dict | None = None) -> list[tuple[str, str, dict]]:
    """Pre-flight of --dedup-against: each folder is a finished run whose signatures were made with the
    same settings as this run's (with paragraph dedup, `paragraphs`: its paragraph hashes too), and its
    signatures/ holds exactly the files its manifest lists (rows and size; their SHA-256 is checked where
    they are read). (folder, path, listed entry) of each file."""
    files = []
    for folder in folders:
        manifest = read_json(FileSystems.join(folder, "manifest.json"))
        if manifest is None:
            raise ConfigError(f"--dedup-against {folder}: no manifest.json there (not a finished refinery run)")
        theirs = manifest.get("signatures")
        if theirs is None or manifest.get("signature_files") is None:
            raise ConfigError(f"--dedup-against {folder}: its manifest lists no signature files (a run made before "
                              "refinery recorded them); rerun it, or leave it out")
        if theirs != signature_settings(dedup):
            raise ConfigError(f"--dedup-against {folder}: its signatures were made with {theirs}, this run's "
                              f"are {signature_settings(dedup)}; set the dedup section alike")
        if paragraphs is not None and manifest.get("paragraph_signatures") != paragraphs:
            raise ConfigError(f"--dedup-against {folder}: its signatures hold no paragraph hashes made as this run's "
                              f"paragraph dedup needs ({manifest.get('paragraph_signatures')} there, {paragraphs} here): "
                              "rerun it with paragraph_dedup.enabled and the same min_chars, or leave it out")
        for listed in manifest["signature_files"]:
            path = FileSystems.join(folder, listed["path"])
            problem = _signature_file_problem(path, listed)
            if problem:
                raise ConfigError(f"--dedup-against {folder}: {listed['path']} {problem}; that run's signatures "
                                  "are damaged: rerun it, or leave it out")
            files.append((folder, path, listed))
    return files


def _signature_file_problem(path: str, listed: dict) -> str | None:
    """What is wrong with a signature file against its manifest entry (size and rows: reads its footer only)."""
    match = FileSystems.match([path])[0].metadata_list
    if not match:
        return "is missing"
    if match[0].size_in_bytes != listed["bytes"]:
        return f"has {match[0].size_in_bytes} bytes, the manifest says {listed['bytes']}"
    try:
        with FileSystems.open(path) as fh:
            rows = pq.ParquetFile(fh).metadata.num_rows
    except Exception as exc:
        return f"cannot be read ({type(exc).__name__}: {exc})"
    if rows != listed["rows"]:
        return f"holds {rows} rows, the manifest says {listed['rows']}"
    return None


# Buckets of the old and new signatures, packed per group (pipeline/job/dedup.py, GroupedEntries). An entry:
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


def earlier_signature_files(config) -> list[tuple[str, str, str]]:
    """(folder, signature file, its SHA-256) of each earlier run --dedup-against names, checked for paragraph dedup."""
    return [(folder, path, listed["sha256"]) for folder, path, listed
            in check_old_runs(config.dedup_against, config.dedup, paragraph_settings(config.paragraph_dedup))]


def read_signature_file(path: str, sha256: str) -> pq.ParquetFile:
    """An earlier run's signature file, read whole (one part's: ~100 bytes per document) and checked against the
    SHA-256 its manifest lists."""
    with FileSystems.open(path) as fh:
        data = fh.read()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise StageEnvironmentError(f"--dedup-against: {path} changed since its run's manifest was written "
                                    "(SHA-256 differs); rerun that run, or leave it out")
    return pq.ParquetFile(io.BytesIO(data))


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
