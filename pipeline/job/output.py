"""Output shards, and the manifest written last.

Each prepared part (one input file) is written as its own shards by the task that streams it
(pipeline/job/finish.py), in the part's order: `part-<file>-NNN.parquet`, a new one per `shard_size_mb`
of text, and the mix's repeats apart (`part-<file>-repeats-NNN`), so no step gathers documents and a
rerun writes the same bytes. zstd, fixed-size row groups (the unit training readers permute), written
to a temporary name and renamed. Each writer reports rows, tokens per source and the SHA-256 of the
file; the driver turns those into `manifest.json`, written atomically after every shard exists: a
manifest means the output is complete.
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from common.shards import MANIFEST
from common.shards import manifest as shards_manifest
from pipeline import storage
from pipeline.job.faults import kill_point
from pipeline.job.outdir import EDITS_DIR
from pipeline.job.schema import DOCUMENT_SCHEMA
from pipeline.storage import write_atomically
from stages.counters import note

STATS_DIR = "_shard_stats"


def shard_name(index: int, count: int) -> str:
    return f"part-{index:05d}-of-{count:05d}.parquet"


class ShardWriter:
    """Document rows -> `<folder>/<prefix>-NNN.parquet`, a new shard once one holds `shard_size_mb` of text.
    Rows are kept in memory one row group at a time, the shard's compressed bytes until it is written
    (atomically: a retried task rewrites the same names). `close()` gives each shard's stats."""

    def __init__(self, folder: str, prefix: str, shard_size_mb: float, row_group_rows: int):
        self._folder, self._prefix = folder, prefix
        self._limit, self._row_group_rows = int(shard_size_mb * 1_000_000), row_group_rows
        self._stats: list[dict[str, Any]] = []
        self._open()

    def _open(self) -> None:
        self._buffer, self._rows, self._text_bytes = io.BytesIO(), [], 0
        self._writer = pq.ParquetWriter(self._buffer, DOCUMENT_SCHEMA, compression="zstd")
        self._count = {"rows": 0, "originals": 0, "row_groups": 0, "tokens_by_source": {}, "rows_by_source": {}}

    def add(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        size = len(row["text"].encode("utf-8", "surrogatepass"))
        self._text_bytes += size
        c = self._count
        c["rows"] += 1
        c["originals"] += row["epoch"] == 0
        c["tokens_by_source"][row["source"]] = c["tokens_by_source"].get(row["source"], 0) + (size + 3) // 4
        c["rows_by_source"][row["source"]] = c["rows_by_source"].get(row["source"], 0) + 1
        if len(self._rows) >= self._row_group_rows:
            self._flush()
        if self._text_bytes >= self._limit:
            self._write()
            self._open()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=DOCUMENT_SCHEMA))
            self._count["row_groups"] += 1
            self._rows = []

    def _write(self) -> None:
        self._flush()
        self._writer.close()
        data = self._buffer.getvalue()
        name = f"{self._prefix}-{len(self._stats):03d}.parquet"
        write_atomically(FileSystems.join(self._folder, name), data)
        kill_point("shard")
        self._stats.append({"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                            **self._count})

    def close(self) -> list[dict[str, Any]]:
        if self._count["rows"]:
            self._write()
        else:
            self._writer.close()
        return self._stats


class MissingShardStats(OSError):
    """The shard writers' stats are gone: the shards on disk cannot be vouched for."""


def collect_shards(output: str, data_dir: str) -> list[dict[str, Any]]:
    """The shard writers' stats (path relative to `output`, rows, bytes, sha256, tokens per source);
    an empty shard is written when no document survived (the writers' stats exist and list no shard), so
    readers still find a dataset."""
    stats_glob = FileSystems.join(output, STATS_DIR, "stats*")
    stat_files = [m.path for r in FileSystems.match([stats_glob]) for m in r.metadata_list]
    if not stat_files:  # the job writes one even when no shard was written: they vanished under this run
        raise MissingShardStats(f"{FileSystems.join(output, STATS_DIR)} holds none of the shard writers' stats "
                                "(removed by another process while this run went on?); nothing is published")
    shards = []
    for path in stat_files:
        with FileSystems.open(path) as fh:
            shards += [json.loads(line) for line in fh.read().decode("utf-8").splitlines() if line.strip()]
    shards.sort(key=lambda s: s["path"])
    if not shards:
        empty = shard_name(0, 1)
        buffer = io.BytesIO()
        pq.ParquetWriter(buffer, DOCUMENT_SCHEMA, compression="zstd").close()  # no row group: readers that size
        #                                 their batches by a row group's rows (datasets) fail on one of 0 rows
        write_atomically(FileSystems.join(output, data_dir, empty), buffer.getvalue())
        shards = [{"path": empty, "rows": 0, "originals": 0, "bytes": len(buffer.getvalue()), "row_groups": 0,
                   "sha256": hashlib.sha256(buffer.getvalue()).hexdigest(), "tokens_by_source": {},
                   "rows_by_source": {}}]
    for s in shards:
        s["path"] = f"{data_dir}/{s['path']}"
        s["tokens"] = sum(s["tokens_by_source"].values())
    return shards


def collect_signature_files(output: str) -> list[dict[str, Any]]:
    """The signature files the part writers reported (path, rows, bytes, sha256), for the manifest:
    `--dedup-against` refuses a folder whose signatures/ does not match them."""
    pattern = FileSystems.join(output, STATS_DIR, "signature_files*")
    files = []
    for path in (m.path for r in FileSystems.match([pattern]) for m in r.metadata_list):
        with FileSystems.open(path) as fh:
            files += [json.loads(line) for line in fh.read().decode("utf-8").splitlines() if line.strip()]
    return sorted(files, key=lambda f: f["path"])


def collect_anneal_top(output: str, tokens: int) -> dict[str, list[dict[str, Any]]]:
    """The anneal split's largest pages, sites and languages (the writers' ANNEAL_TOP file), each with its
    tokens and share of the split's `tokens`."""
    pattern = FileSystems.join(output, STATS_DIR, "anneal_top*")
    top: dict[str, list[dict[str, Any]]] = {"page": [], "site": [], "lang": []}
    for path in (m.path for r in FileSystems.match([pattern]) for m in r.metadata_list):
        with FileSystems.open(path) as fh:
            for line in fh.read().decode("utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    top[row["kind"]] = [{"name": name, "tokens": n, "share": round(n / max(tokens, 1), 4)}
                                        for n, name in row["top"]]
    return top


def write_manifest(output: str, shards: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """manifest.json from the shards' stats (temp file + rename: all or nothing). The commit point of a
    run: called last, only after every check passed."""
    manifest = shards_manifest(shards, DOCUMENT_SCHEMA.metadata[b"refinery.schema"].decode(), extra)
    write_atomically(FileSystems.join(output, MANIFEST),
                     json.dumps(manifest, indent=2, ensure_ascii=False, default=str).encode("utf-8"))
    storage.remove_tree(FileSystems.join(output, STATS_DIR))  # none when WriteShards did not write (refinery ablate)
    return manifest


def edits_report(output: str, counters: dict[str, int] | None) -> dict:
    """report.json's `edits`: per stage that cut text, from the edit book's files (documents, paragraphs,
    characters cut; the share of the text reaching the stage, where the runner delivered counters). A global
    stage adds its own to its entry (paragraph dedup: the most repeated paragraphs)."""
    files = [m.path for r in FileSystems.match([FileSystems.join(output, EDITS_DIR, "part-*.parquet")])
             for m in r.metadata_list]
    book: dict[str, dict] = {}
    if files:
        table = ds.dataset(files, format="parquet").to_table(columns=["stage", "paragraphs", "chars"])
        sums = table.group_by("stage").aggregate([("paragraphs", "count"), ("paragraphs", "sum"), ("chars", "sum")])
        for row in sums.to_pylist():
            book[row["stage"]] = {"documents": row["paragraphs_count"], "paragraphs": row["paragraphs_sum"],
                                  "chars": row["chars_sum"]}
    for stage, entry in book.items():
        seen = (counters or {}).get(note(stage, "chars_seen"))
        entry["share_of_text"] = round(entry["chars"] / seen, 5) if seen else None
    return book
