"""OUTPUT/signatures/: (id, exact key, MinHash band digests) of every document in the output, as earlier runs'
are checked and read by the stage that drops new documents duplicating theirs (`--dedup-against OLD_OUTPUT`,
pipeline/job/globals/against.py).

Signatures are computed in phase 1 (pipeline/job/prepare.py) on the text that dedup compares, so a page of
next month's crawl is compared with this one's exactly as two pages of one crawl are. Only the old
runs' signatures are read, never their texts: one GroupByKey of bucket groups (exact key or band digest,
packed entries) joins them with the new documents' (no gather onto one worker), one CoGroupByKey of id
groups drops the duplicates.
"""
from __future__ import annotations

import hashlib
import io

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipeline.job.config import ConfigError
from pipeline.job.prepare import paragraph_settings, signature_settings
from pipeline.storage import read_json
from stages.dedup import DEDUP_AGAINST, DedupConfig
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
