"""Which reader a file needs, decided per file from its first bytes (then its name), over the readers' table
(each reader module's `FORMATS`, stages/table.py `InputFormat`).

A source glob such as `books=dir/*` may match WARC, JSONL and Parquet files alike; deciding by
the glob's suffix read every JSONL file as WARC (0 documents, exit 0). Content wins over the name:
`.gz` is opened and the inner bytes are looked at.
"""
from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Iterator
from typing import Any, NamedTuple

from stages.table import READ, InputFormat, StageSpec, format_table

SPEC = StageSpec(name="read", order=0, runs=READ, about="opening input files, choosing each one's reader", reasons={
    "read_error": "a file that is empty, is no WARC, WET, JSONL or Parquet file (nor a format of an installed stage package), is not a regular file (a FIFO, a "
                  "device), or cannot be opened (a symlink loop): one row per file"})

WARC, JSONL, PARQUET = "warc", "jsonl", "parquet"
SNIFF_BYTES = 4096
_WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")
_JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson", ".ndjson.gz")


def is_gzip(head: bytes) -> bool:
    return head[:2] == b"\x1f\x8b"


def _inner_head(head: bytes) -> bytes:
    """The first decompressed bytes of a gzip file (as many as the head holds, across members: a WARC file is one
    member per record), else the head itself."""
    if not is_gzip(head):
        return head
    out, rest = b"", head
    try:
        while rest[:2] == b"\x1f\x8b" and len(out) < SNIFF_BYTES:
            member = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += member.decompress(rest, SNIFF_BYTES - len(out))
            if not member.eof:
                break
            rest = member.unused_data
    except zlib.error:
        pass
    return out


class ReadSettings(NamedTuple):
    """What the readers are told (`InputFormat.read`'s `settings`)."""

    warc: Any                 # WarcConfig
    text: Any                 # TextSourceConfig
    max_payload_bytes: int    # the extraction cap: a WARC payload over it is ledgered by the reader


def input_format(path: str, head: bytes) -> InputFormat | None:
    """The reader of a file starting with `head` (the readers' table: stages/table.py `InputFormat`): the
    format whose sniff is surest, content over name, ties in table order; None when none knows it."""
    inner = _inner_head(head)
    best, best_score = None, 0
    for fmt in format_table():
        score = fmt.sniff(path, head, inner)
        if score > best_score:
            best, best_score = fmt, score
    return best


def sniff_format(path: str, head: bytes) -> str | None:
    """The name of the format of a file starting with `head` (warc, jsonl, parquet, ...), or None."""
    found = input_format(path, head)
    return found.name if found else None


def format_names() -> str:
    """"WARC, JSONL or Parquet": the formats a file can be, for an error line."""
    names = [f.label or f.name for f in format_table()]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)




def sniff_warc(path: str, head: bytes, inner: bytes) -> int:
    if inner.startswith(b"WARC/"):
        return 2
    return 1 if path.lower().endswith(_WARC_SUFFIXES) else 0  # damaged from the first byte: its reader ledgers it


def sniff_jsonl(path: str, head: bytes, inner: bytes) -> int:
    if inner.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):  # a UTF-8 BOM or blank lines before the first record
        return 2
    return 1 if path.lower().endswith(_JSONL_SUFFIXES) else 0  # empty, or every bad line a ledger row


def sniff_parquet(path: str, head: bytes, inner: bytes) -> int:
    return 2 if head[:4] == b"PAR1" else 0


def parse_json(text: str | bytes):
    """json.loads for input data: nesting deeper than Python's recursion limit (a 2 KB line of 1,000 `[`)
    raises RecursionError, which is no ValueError; here every failure to parse is a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to parse") from None


def read_records(path: str) -> Iterator[Any]:
    """Every record of a small local file, by its name: Parquet rows and JSONL[.gz] lines as dicts, a
    JSON file's list (or its "data" list), CSV rows as dicts, and other text one line each. For the
    driver's inputs (benchmarks, classifier training data); the job's own readers stream instead
    (stages/textsource.py, stages/extraction/warc.py)."""
    lower = path.lower()
    if lower.endswith(".parquet"):
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
        return
    opener = gzip.open if lower.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as fh:
        if lower.endswith((".json", ".json.gz")):
            try:
                data = parse_json(fh.read())
            except ValueError as exc:
                raise ValueError(f"{path}: not JSON ({getattr(exc, 'msg', exc)})") from None
            yield from (data if isinstance(data, list) else data.get("data", []))
        elif any(s in lower for s in (".jsonl", ".ndjson")):
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield parse_json(line)
                    except ValueError as exc:
                        raise ValueError(f"{path}:{n}: not JSON ({getattr(exc, 'msg', exc)})") from None
        elif ".csv" in lower:
            yield from csv.DictReader(fh)
        else:
            yield from (line.rstrip("\r\n") for line in fh if line.strip())
