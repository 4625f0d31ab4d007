"""Output shards with a seeded global shuffle, and the manifest written last.

Each document gets a shard from hash(seed, id, epoch), so every shard mixes all sources and a
rerun puts the same rows in the same shards in the same order. One GroupByKey per shard
gathers only that shard's rows (its target size), which one worker writes with pyarrow:
zstd, fixed-size row groups for streaming readers, written to a temporary name and renamed.
Each writer reports rows, tokens per source and the SHA-256 of the file; the driver turns
those into `manifest.json`, written atomically after every shard exists: a manifest means
the output is complete.
"""
from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipeline.faults import kill_point
from pipeline.schema import DOCUMENT_SCHEMA, document_row
from stages.mix import approx_tokens, num_shards_for, shard_of
from stages.record import Document

MANIFEST = "manifest.json"
STATS_DIR = "_shard_stats"


def shard_name(index: int, count: int) -> str:
    return f"part-{index:05d}-of-{count:05d}.parquet"


def write_atomically(path: str, data: bytes, temp_name: str | None = None) -> None:
    """`data` to `path` all or nothing: written to a temporary name beside it (default `.NAME.tmp`), then
    renamed over any earlier file (a retried attempt replaces its own earlier output)."""
    folder, name = path.rsplit("/", 1) if "/" in path else ("", path)
    temp = temp_name or f".{name}.tmp"
    temp = FileSystems.join(folder, temp) if folder else temp
    with FileSystems.create(temp) as fh:
        fh.write(data)
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temp], [path])


class _WriteShard(beam.DoFn):
    def __init__(self, folder: str, row_group_rows: int):
        self._folder, self._row_group_rows = folder, row_group_rows

    def process(self, shard_rows, num_shards: int):
        index, keyed = shard_rows
        rows = [row for _, row in sorted(keyed, key=lambda kv: (kv[0], kv[1]["id"]))]
        table = pa.Table.from_pylist(rows, schema=DOCUMENT_SCHEMA)
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd", row_group_size=self._row_group_rows)
        data = buffer.getvalue()
        write_atomically(FileSystems.join(self._folder, shard_name(index, num_shards)), data)
        kill_point("shard")
        tokens: dict[str, int] = {}
        for row in rows:
            tokens[row["source"]] = tokens.get(row["source"], 0) + approx_tokens(row["text"])
        yield json.dumps({"path": shard_name(index, num_shards), "rows": len(rows), "bytes": len(data),
                          "sha256": hashlib.sha256(data).hexdigest(),
                          "row_groups": pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups,
                          "tokens_by_source": tokens,
                          "rows_by_source": _count_by(rows, "source"),
                          "originals": sum(1 for row in rows if row["epoch"] == 0)})


def _count_by(rows: list[dict[str, Any]], field: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows:
        out[row[field]] = out.get(row[field], 0) + 1
    return out


class WriteShards(beam.PTransform):
    """documents -> Parquet shards in `folder`, plus per-shard stats lines in `stats_prefix`*."""

    def __init__(self, folder: str, stats_prefix: str, shard_size_mb: float, seed: int, row_group_rows: int):
        super().__init__()
        self._folder, self._stats_prefix = folder, stats_prefix
        self._shard_size_mb, self._seed, self._row_group_rows = shard_size_mb, seed, row_group_rows

    def expand(self, documents):
        size_mb, seed = self._shard_size_mb, self._seed
        total = (documents
                 | "TextBytes" >> beam.Map(lambda d: len(d.text.encode("utf-8", "surrogatepass")))
                 | "TotalBytes" >> beam.CombineGlobally(sum))
        num_shards = total | "NumShards" >> beam.Map(lambda b: num_shards_for(b, size_mb))
        shards = beam.pvalue.AsSingleton(num_shards)

        def assign(doc: Document, n: int):
            index, key = shard_of(doc.id, doc.epoch, n, seed)
            return index, (key, document_row(doc))

        return (documents
                | "AssignShard" >> beam.Map(assign, shards)
                | "GroupShard" >> beam.GroupByKey()
                | "WriteShard" >> beam.ParDo(_WriteShard(self._folder, self._row_group_rows), shards)
                | "Stats" >> beam.io.WriteToText(self._stats_prefix, shard_name_template="-SSSSS"))


def collect_shards(output: str, data_dir: str) -> list[dict[str, Any]]:
    """The shard writers' stats (path relative to `output`, rows, bytes, sha256, tokens per source);
    an empty shard is written when no document survived, so readers still find a dataset."""
    stats_glob = FileSystems.join(output, STATS_DIR, "stats*")
    stat_files = [m.path for r in FileSystems.match([stats_glob]) for m in r.metadata_list]
    shards = []
    for path in stat_files:
        with FileSystems.open(path) as fh:
            shards += [json.loads(line) for line in fh.read().decode("utf-8").splitlines() if line.strip()]
    shards.sort(key=lambda s: s["path"])
    if not shards:
        empty = shard_name(0, 1)
        buffer = io.BytesIO()
        pq.write_table(DOCUMENT_SCHEMA.empty_table(), buffer, compression="zstd")
        with FileSystems.create(FileSystems.join(output, data_dir, empty)) as fh:
            fh.write(buffer.getvalue())
        shards = [{"path": empty, "rows": 0, "originals": 0, "bytes": len(buffer.getvalue()), "row_groups": 0,
                   "sha256": hashlib.sha256(buffer.getvalue()).hexdigest(), "tokens_by_source": {},
                   "rows_by_source": {}}]
    for s in shards:
        s["path"] = f"{data_dir}/{s['path']}"
        s["tokens"] = sum(s["tokens_by_source"].values())
    return shards


def write_manifest(output: str, shards: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """manifest.json from the shards' stats (temp file + rename: all or nothing). The commit point of a
    run: called last, only after every check passed."""
    tokens: dict[str, int] = {}
    rows: dict[str, int] = {}
    for s in shards:
        for k, v in s["tokens_by_source"].items():
            tokens[k] = tokens.get(k, 0) + v
        for k, v in s["rows_by_source"].items():
            rows[k] = rows.get(k, 0) + v
    manifest = {"format": "refinery-shards/1", "schema": DOCUMENT_SCHEMA.metadata[b"refinery.schema"].decode(),
                "token_estimate": "UTF-8 bytes / 4", "shards": shards,
                "rows": sum(s["rows"] for s in shards), "tokens": sum(tokens.values()),
                "sources": {k: {"rows": rows.get(k, 0), "tokens": tokens.get(k, 0)} for k in sorted(tokens)},
                **extra}
    write_atomically(FileSystems.join(output, MANIFEST),
                     json.dumps(manifest, indent=2, ensure_ascii=False, default=str).encode("utf-8"))
    stats = FileSystems.join(output, STATS_DIR)
    if FileSystems.exists(stats):  # absent when the shards were not written by WriteShards (refinery ablate)
        FileSystems.delete([stats])
    return manifest
