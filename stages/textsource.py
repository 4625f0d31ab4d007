"""Pre-extracted text sources (code, books, papers): JSONL[.gz] or Parquet records -> Documents.

They join the pipeline after extraction. The id is the record's `id` field when there is one,
else derived from (source, file name, record number), so reruns give the same ids.
"""
from __future__ import annotations

import gzip
import json
from typing import BinaryIO, Callable, Iterator

from stages.record import Document, DropReason, StageResult, stable_id

STAGE = "read_text"
TEXT_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".parquet")


def is_text_source(path: str) -> bool:
    return path.lower().endswith(TEXT_SUFFIXES)


def read_text_records(stream: BinaryIO, *, source: str, filename: str, text_field: str = "text",
                      count: Callable[[str], None] = lambda name: None) -> Iterator[StageResult]:
    """Documents (or ledger Drops for records without usable text) from one file."""
    lower = filename.lower()
    try:
        if lower.endswith(".parquet"):
            import pyarrow.parquet as pq

            records = pq.ParquetFile(stream).iter_batches()
            rows = (row for batch in records for row in batch.to_pylist())
        else:
            text_stream = gzip.open(stream, "rt", encoding="utf-8") if lower.endswith(".gz") else \
                (line.decode("utf-8") for line in stream)
            rows = (_parse_line(line) for line in text_stream)
        for n, row in enumerate(rows):
            if row is None:
                continue
            if isinstance(row, Exception):  # one broken line: ledger it, keep reading
                doc = Document(id=stable_id(source, filename, str(n)), url="", source=source)
                yield doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}#{n}: {row}"[:300])
                continue
            doc_id = str(row.get("id")) if row.get("id") is not None else stable_id(source, filename, str(n))
            doc = Document(id=doc_id, url=str(row.get("url") or ""), source=source)
            text = row.get(text_field)
            if not isinstance(text, str) or not text.strip():
                yield doc.drop(STAGE, DropReason.NO_TEXT, f"{filename}#{n}: no {text_field!r} text")
                continue
            yield doc.replace(text=text)
    except Exception as exc:  # corrupt Parquet, broken JSON line, bad gzip: ledger the rest of the file
        doc = Document(id=stable_id("read_error", filename), url="", source=source)
        yield doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}: {type(exc).__name__}: {exc}"[:500])


def _parse_line(line: str):
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return ValueError(f"bad JSON: {exc}")
    return row if isinstance(row, dict) else ValueError("not a JSON object")
