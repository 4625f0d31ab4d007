"""Token shards: the pipeline's Parquet shards tokenized once, for training that does not tokenize.

    refinery tokenize --data OUT --tokenizer bytes|tokenizer.json --out TOK

Layout (what nanoGPT, datatrove and nanotron users know: a flat binary of token ids per shard plus an
index of document boundaries):

    TOK/manifest.json            format refinery-tokens/1, tokenizer, dtype, shards with checksums
    TOK/tokenizer.json           a copy of the BPE tokenizer (none for bytes): TOK is self-contained
    TOK/data/part-*.bin          token ids of every document, one after the other (no EOS stored)
    TOK/data/part-*.idx          uint64 little-endian: where each document starts, then the total
    TOK/documents.parquet        document k of the split: its token shard, its row there and in its Parquet shard,
                                 its id, url and where it was read (WARC file and offset, or text file and line)
    TOK/valid/..., TOK/anneal/...  the run's other splits, when it has them (each with its manifest)
    TOK/megatron/{train,valid,anneal}_text_document.{bin,idx}   with `--format megatron`: Megatron-LM's indexed
                                 dataset of each split with rows (training/megatron.py), document k = row k of
                                 the split's map
    TOK/datatrove/{train,valid,anneal}/00000_tokens.ds{,.index,.metadata}   with `--format datatrove`: datatrove's
                                 tokenized files (nanotron's DatatroveFolderDataset), the same documents and order

uint16 ids when the vocabulary fits (< 65,536), else uint32. One token shard per Parquet shard, with the
Parquet row groups' document counts kept in the manifest, so `refinery train --tokens TOK` reads the very
units (and so the very batches, in the very order) that `--data OUT` would: the same rank-disjoint,
exactly resumable loader (`TokenStream` replaces only how a row group is read).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from common import files
from common.files import file_sha256
from common.settings import error_text
from stages.formats import parse_json
from training.data import MANIFEST, DataError, ShardStream, Unit, read_manifest
from training.tokenizer import load_tokenizer

FORMAT = "refinery-tokens/1"
SPLITS = ("valid", "anneal")  # besides the main data: folders of a run that hold their own manifest
TOKENIZER_FILE = "tokenizer.json"


def dtype_for(vocab_size: int) -> np.dtype:
    return np.dtype("<u2") if vocab_size <= 2**16 else np.dtype("<u4")


def is_token_dir(path: str) -> bool:
    try:
        with open(os.path.join(path, MANIFEST), encoding="utf-8") as fh:
            manifest = parse_json(fh.read())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


def read_token_manifest(path: str) -> dict[str, Any]:
    file = os.path.join(path, MANIFEST)
    if not os.path.isfile(file):
        raise DataError(f"{file} not found: point --tokens at the output folder of `refinery tokenize`")
    try:
        with open(file, encoding="utf-8") as fh:
            manifest = parse_json(fh.read())
    except ValueError as exc:
        raise DataError(f"{file} is not a token shard manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{file} is not a token shard manifest ({FORMAT})")
    return manifest


def token_tokenizer(path: str):
    """The tokenizer a token folder was written with (bytes, or its own copy of tokenizer.json)."""
    manifest = read_token_manifest(path)
    kind = manifest["tokenizer"]["kind"]
    root = manifest.get("root", ".")
    return load_tokenizer("bytes" if kind == "bytes" else os.path.join(path, root, TOKENIZER_FILE))


def read_index(folder: str, shard: dict[str, Any], verify: bool = True) -> np.ndarray:
    """A token shard's document starts (its .idx), checked against the manifest."""
    path = os.path.join(folder, shard["index"])
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise DataError(f"token index {path} cannot be read: {exc}") from exc
    if verify and hashlib.sha256(raw).hexdigest() != shard["index_sha256"]:
        raise DataError(f"token index {path} does not match the sha256 in {MANIFEST}")
    starts = np.frombuffer(raw, dtype="<u8")
    if len(starts) != shard["documents"] + 1:
        raise DataError(f"{path} does not match {MANIFEST} ({len(starts) - 1} documents, expected {shard['documents']})")
    return starts


def documents(folder: str) -> Iterator[np.ndarray]:
    """Every document's ids of a token folder, in manifest order."""
    manifest = read_token_manifest(folder)
    yield from _split_documents(folder, manifest["shards"], np.dtype(manifest["dtype"]), verify=True)


DOCUMENT_MAP = "documents.parquet"
FORMATS = ("refinery", "megatron", "datatrove")


def _provenance(row: dict[str, Any]) -> tuple[str | None, int | None, int | None]:
    """(file, byte offset, line) a document was read from, from its shard row's metadata."""
    meta = row.get("metadata") or {}
    return (meta.get("warc_filename") or meta.get("source_file"), meta.get("warc_offset"), meta.get("source_line"))


def _tokenize_split(data_dir: str, out_dir: str, tokenizer, text_field: str, dtype: np.dtype,
                    batch_rows: int = 256) -> dict[str, Any]:
    manifest = read_manifest(data_dir)
    shards, mapped = [], {name: [] for name in ("shard", "row", "token_start", "tokens", "id", "url", "file",
                                                "offset", "line")}
    for shard in manifest["shards"]:
        source = os.path.join(data_dir, shard["path"])
        stem = os.path.splitext(shard["path"])[0]
        bin_path, idx_path = os.path.join(out_dir, stem + ".bin"), os.path.join(out_dir, stem + ".idx")
        os.makedirs(os.path.dirname(bin_path), exist_ok=True)
        parquet = pq.ParquetFile(source)
        if text_field not in parquet.schema_arrow.names:
            raise DataError(f"--text-field {text_field!r}: {source} has no such column")
        digest, starts, groups, total = hashlib.sha256(), [0], [], 0
        extra = [c for c in ("id", "url", "metadata") if c in parquet.schema_arrow.names and c != text_field]
        with files.atomic_writer(bin_path) as fh:
            for g in range(parquet.metadata.num_row_groups):
                table = parquet.read_row_group(g, columns=[text_field, *extra])
                texts = table.column(text_field).to_pylist()
                rows = table.select(extra).to_pylist()
                if texts:
                    groups.append(len(texts))
                for i in range(0, len(texts), batch_rows):
                    encoded = tokenizer.encode_batch([t or "" for t in texts[i:i + batch_rows]])
                    for row, ids in zip(rows[i:i + batch_rows] if extra else [{}] * len(encoded), encoded):
                        data = np.asarray(ids, dtype=dtype).tobytes()
                        fh.write(data)
                        digest.update(data)
                        for name, value in zip(mapped, (stem + ".bin", len(starts) - 1, total, len(ids), row.get("id"),
                                                        row.get("url"), *_provenance(row))):
                            mapped[name].append(value)
                        total += len(ids)
                        starts.append(total)
        index = np.asarray(starts, dtype="<u8").tobytes()
        files.write_atomically(idx_path, index)
        shards.append({"path": stem + ".bin", "index": stem + ".idx", "from": shard["path"],
                       "from_sha256": shard.get("sha256"), "documents": len(starts) - 1, "tokens": total,
                       "row_groups": groups, "sha256": digest.hexdigest(),
                       "index_sha256": hashlib.sha256(index).hexdigest()})
    import pyarrow as pa

    table = pa.table({name: pa.array(values, type=pa.int64() if name in ("row", "token_start", "tokens", "offset",
                                                                         "line") else pa.string())
                      for name, values in mapped.items()})
    with files.atomic_writer(os.path.join(out_dir, DOCUMENT_MAP)) as fh:  # never through a link planted there
        pq.write_table(table, fh, compression="zstd")
    return {"shards": shards, "documents": sum(s["documents"] for s in shards),
            "tokens": sum(s["tokens"] for s in shards), "document_map": DOCUMENT_MAP}


def _split_documents(out_dir: str, shards: list[dict[str, Any]], dtype: np.dtype,
                     verify: bool = False) -> Iterator[np.ndarray]:
    """A split's documents, shard by shard (`verify`: the index's SHA-256 against the manifest; the tokenizer
    reads the shards it has just written, before the manifest exists)."""
    for shard in shards:
        tokens = np.memmap(os.path.join(out_dir, shard["path"]), dtype=dtype, mode="r") if shard["tokens"] else \
            np.zeros(0, dtype=dtype)
        starts = read_index(out_dir, shard) if verify else np.fromfile(os.path.join(out_dir, shard["index"]),
                                                                        dtype="<u8")
        for a, b in zip(starts[:-1], starts[1:]):
            yield tokens[a:b]


def write_manifest(out_dir: str, payload: dict[str, Any]) -> None:
    # last: a manifest means every shard is complete
    files.write_atomically(os.path.join(out_dir, MANIFEST), json.dumps(payload, indent=1))


def tokenize(data_dir: str, tokenizer_spec: str, out_dir: str, text_field: str = "text",
             formats: Sequence[str] = ("refinery",)) -> dict[str, Any]:
    """Token shards of a run's data/ and its valid/ and anneal/ splits (and, with "megatron" in `formats`, each
    split as Megatron-LM's indexed dataset); returns the main manifest."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"--format {','.join(unknown)}: not one of {', '.join(FORMATS)}")
    tokenizer = load_tokenizer(tokenizer_spec)
    dtype = dtype_for(tokenizer.vocab_size)
    os.makedirs(out_dir, exist_ok=True)
    described = {"kind": tokenizer.kind, "vocab_size": tokenizer.vocab_size,
                 "eos_id": tokenizer.eos_id, "pad_id": tokenizer.pad_id}
    if tokenizer.kind != "bytes":
        shutil.copyfile(tokenizer.path, os.path.join(out_dir, TOKENIZER_FILE))
        described["sha256"] = file_sha256(os.path.join(out_dir, TOKENIZER_FILE))
    splits = [(None, data_dir, out_dir)] + [(name, os.path.join(data_dir, name), os.path.join(out_dir, name))
                                            for name in SPLITS if os.path.isfile(os.path.join(data_dir, name, MANIFEST))]
    main: dict[str, Any] = {}
    for name, source, target in reversed(splits):  # the main manifest last
        os.makedirs(target, exist_ok=True)
        body = _tokenize_split(source, target, tokenizer, text_field, dtype)
        if "megatron" in formats and body["documents"]:  # Megatron cannot map an empty .bin: no files for no rows
            from training.megatron import write_indexed_dataset

            os.makedirs(os.path.join(out_dir, "megatron"), exist_ok=True)
            prefix = os.path.join(out_dir, "megatron", f"{name or 'train'}_text_document")
            facts = write_indexed_dataset(prefix, _split_documents(target, body["shards"], dtype),
                                          tokenizer.vocab_size, tokenizer.eos_id)
            body["megatron"] = dict(facts, prefix=os.path.relpath(prefix, target))
        if "datatrove" in formats and body["documents"]:
            from training.megatron import write_datatrove_file

            folder = os.path.join(out_dir, "datatrove", name or "train")
            os.makedirs(folder, exist_ok=True)
            facts = write_datatrove_file(os.path.join(folder, "00000_tokens.ds"),
                                         _split_documents(target, body["shards"], dtype), tokenizer.vocab_size,
                                         tokenizer.eos_id, tokenizer.kind if tokenizer.kind == "bytes" else
                                         os.path.basename(tokenizer.path))
            body["datatrove"] = dict(facts, path=os.path.relpath(facts["path"], target))
        payload = {"format": FORMAT, "dtype": dtype.name, "tokenizer": described, "text_field": text_field,
                   "root": "." if name is None else "..",
                   "source": {"data": os.path.abspath(source),
                              "manifest_sha256": file_sha256(os.path.join(source, MANIFEST))},
                   **body}
        if name is None:
            payload["splits"] = {n: f"{n}/{MANIFEST}" for n, _, _ in splits if n}
            main = payload
        write_manifest(target, payload)
    return main


class TokenStream(ShardStream):
    """ShardStream over token shards: the same units, order, positions and resume; no tokenizing."""

    def read_manifest(self) -> dict[str, Any]:
        manifest = read_token_manifest(self.cfg.data_dir)
        wanted = self.tokenizer.describe()
        have = manifest["tokenizer"]
        if (have["kind"], have["vocab_size"]) != (wanted["kind"], wanted["vocab_size"]):
            raise DataError(f"{self.cfg.data_dir} was tokenized with {have['kind']} ({have['vocab_size']} ids), "
                            f"not this run's {wanted['kind']} ({wanted['vocab_size']} ids)")
        self._dtype = np.dtype(manifest["dtype"]).newbyteorder("<")
        self._index: dict[str, np.ndarray] = {}
        self._shards = {os.path.join(self.cfg.data_dir, s["path"]): s for s in manifest["shards"]}
        self._first_row = {path: np.cumsum([0] + s["row_groups"]).tolist() for path, s in self._shards.items()}
        return manifest

    def groups(self) -> list[tuple[str, int, int]]:
        return [(os.path.join(self.cfg.data_dir, s["path"]), g, n)
                for s in self.manifest["shards"] for g, n in enumerate(s["row_groups"]) if n > 0]

    def load_group(self, unit: Unit) -> list[np.ndarray]:
        if unit.shard not in self._index:
            self._index[unit.shard] = read_index(self.cfg.data_dir, self._shards[unit.shard], self.cfg.verify_checksums)
        tokens = np.memmap(unit.shard, dtype=self._dtype, mode="r")
        starts = self._index[unit.shard]
        first, last = self._first_row[unit.shard][unit.row_group], self._first_row[unit.shard][unit.row_group + 1]
        return [tokens[starts[i]:starts[i + 1]] for i in range(first, last)]

    def token_ids(self, row: np.ndarray) -> np.ndarray:
        return row


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refinery tokenize", description=(
        "Tokenize a run's shards once into token shards (flat uint16/uint32 ids + document index + manifest) "
        "for `refinery train --tokens`."))
    p.add_argument("--data", required=True, help="output folder of `refinery run` (has manifest.json)")
    p.add_argument("--out", required=True, help="folder for the token shards (a new or empty folder, or "
                   "an earlier `refinery tokenize` output, which is replaced)")
    p.add_argument("--tokenizer", default="bytes", help="'bytes' (UTF-8 bytes) or a BPE tokenizer.json "
                   "(`refinery train-tokenizer`) (default: %(default)s)")
    p.add_argument("--text-field", default="text", help="the column to tokenize (default: %(default)s)")
    p.add_argument("--format", default="refinery", help="comma-separated: refinery (for `refinery train --tokens`), "
                   "megatron (Megatron-LM's .bin/.idx, TOK/megatron/SPLIT_text_document), datatrove (its .ds files, "
                   "which nanotron reads, TOK/datatrove/SPLIT/); those two end each document with the end-of-text id "
                   "(default: %(default)s; refinery's is always written)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if os.path.isdir(a.out) and os.listdir(a.out) and not is_token_dir(a.out):
        print(f"refinery tokenize: error: --out {a.out} is a folder holding other files; choose a new one",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        manifest = tokenize(a.data, a.tokenizer, a.out, a.text_field,
                            [f.strip() for f in a.format.split(",") if f.strip()])
    except (DataError, OSError, ValueError) as exc:
        print(f"refinery tokenize: error: {error_text(exc)}", file=sys.stderr)
        return 2
    splits = "".join(f", {n}/ too" for n in manifest.get("splits", {}))
    print(f"wrote {a.out}: {manifest['tokens']:,} tokens ({manifest['dtype']}) in {manifest['documents']:,} "
          f"documents, {len(manifest['shards'])} shard(s){splits}; {time.monotonic() - started:.1f} s; "
          f"train with --tokens {a.out}")
    return 0
