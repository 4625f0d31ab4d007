"""Pre-extracted text sources (code, books, papers): JSONL[.gz] or Parquet records -> Documents.

They join the pipeline after extraction. Errors are per record: a bad line (invalid UTF-8, broken
JSON, no text, over the size cap) is one ledger row naming the file and line, and every good line
is read. The internal id is derived from (source, file, record number), so it is unique even when
several files number their records 1, 2, ...; the record's own `id` is kept as `record_id`.
"""
from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from common.settings import check
from stages.formats import JSONL, PARQUET, parse_json, sniff_jsonl, sniff_parquet
from stages.origin import iso_utc
from stages.parquet_pages import chunk_range, column_pages
from stages.record import Document, DropReason, StageResult, clean_text, stable_id
from stages.table import READ, InputFormat, StageSpec

STAGE = "read_text"
_SKIP_CHUNK = 1 << 20
_PARQUET_BATCH_ROWS = 64  # rows decoded at a time: a row group is never turned into Python objects whole ...
_PARQUET_BATCH_BYTES = 64 << 20  # ... and fewer when its largest page says one value may be this large


@dataclass(frozen=True)
class TextSourceConfig:
    """JSONL[.gz] and Parquet text sources (code, books): they skip extraction."""

    field: str = "text"                         # text field of JSONL/Parquet records
    id_field: str = "id"                        # their own id (kept as `record_id`; a Hugging Face set's id column)
    url_field: str = "url"                      # their URL, if they have one
    # their date, if they have one (FineWeb's `date`, the fetch; Dolma's is `created`): ISO 8601 text, a Parquet
    # timestamp or Unix seconds, kept as metadata.source_date (UTC) and used as evidence of origin by paragraph
    # dedup (stages/origin.py); a value that is not a date is left out
    date_field: str = "date"
    # A JSONL line (or Parquet text) larger than this is ledgered as too_large without being held.
    # Books run to a few MB (Project Gutenberg's longest are ~5 MB); every later stage holds a few
    # copies of a document, so the cap is what bounds a worker's memory for text sources.
    max_record_bytes: int = 16 * 1024 * 1024
    max_url_chars: int = 8192                   # longer `url` values are ledgered as header_too_long
    # A Parquet row group holding a page larger than this (decoded size, from the page headers) is not
    # decoded: its rows are ledgered too_large. Writers cut pages at ~1 MiB (pyarrow checks every 1,024
    # rows), so only values over max_record_bytes or pages of 1,024 book-sized rows come near it.
    max_parquet_page_bytes: int = 256 * 1024 * 1024

    def __post_init__(self):
        check(self.max_record_bytes > 0 and self.max_url_chars > 0 and self.max_parquet_page_bytes > 0,
              "size caps must be positive: max_record_bytes, max_url_chars, max_parquet_page_bytes")
        check(bool(self.field) and bool(self.id_field) and bool(self.url_field) and bool(self.date_field),
              "field, id_field, url_field and date_field must name a column")


SPEC = StageSpec(
    name=STAGE, order=2, runs=READ, config=TextSourceConfig, section="text",
    about="JSONL/Parquet text records -> documents (no extraction)",
    reasons={
        DropReason.READ_ERROR: "a JSONL line with invalid UTF-8 or JSON (detail: file and line), or the rest of "
                               "a broken file",
        DropReason.TOO_LARGE: "a line (or Parquet text) over `text.max_record_bytes`, or a row of a Parquet row "
                              "group with a page over `text.max_parquet_page_bytes` (not decoded)",
        DropReason.HEADER_TOO_LONG: "a `url` over `text.max_url_chars`",
        DropReason.NO_TEXT: "a record without text in `text.field`"})


def _reader(fmt: str):
    def read(stream: BinaryIO, *, source: str, filename: str, gzipped: bool, settings, count) -> Iterator[StageResult]:
        return read_text_records(stream, source=source, filename=filename, fmt=fmt, gzipped=gzipped,
                                 config=settings.text, count=count)
    return read


FORMATS = (InputFormat(name=JSONL, stage=STAGE, html=False, sniff=sniff_jsonl, read=_reader(JSONL), label="JSONL"),
           InputFormat(name=PARQUET, stage=STAGE, html=False, sniff=sniff_parquet, read=_reader(PARQUET),
                       label="Parquet"))


def document_id(source: str, filename: str, n: int) -> str:
    """The internal id of record `n` (0-based) of a text file."""
    return stable_id(STAGE, source, filename, str(n))


def read_text_records(stream: BinaryIO, *, source: str, filename: str, fmt: str, gzipped: bool = False,
                      config: TextSourceConfig = TextSourceConfig(),
                      count: Callable[[str], None] = lambda name: None) -> Iterator[StageResult]:
    """Documents (or ledger Drops) for every record of one JSONL (`gzipped` or not) or Parquet file."""
    if fmt == PARQUET:
        yield from _read_parquet(stream, source, filename, config)
    else:
        yield from _read_jsonl(gzip.GzipFile(fileobj=stream, mode="rb") if gzipped else stream,
                               source, filename, config)


def _read_jsonl(lines: BinaryIO, source: str, filename: str, config: TextSourceConfig) -> Iterator[StageResult]:
    n = 0
    while True:
        try:
            line, size = _bounded_line(lines, config.max_record_bytes)
        except Exception as exc:  # corrupt gzip from here on: what was read stays read
            doc = Document(id=stable_id(STAGE, source, filename, "rest", str(n)), url="", source=source)
            yield doc.drop(STAGE, DropReason.READ_ERROR,
                           f"{filename} line {n + 1} onwards: {type(exc).__name__}: {exc}"[:500])
            return
        if size == 0:
            return
        n += 1
        if line is not None and not line.strip():
            continue  # a blank line holds no record
        yield _line_record(line, size, n, source, filename, config)


def _line_record(line: bytes | None, size: int, n: int, source: str, filename: str,
                 config: TextSourceConfig) -> StageResult:
    doc = Document(id=document_id(source, filename, n - 1), url="", source=source,
                   metadata={"source_file": filename, "source_line": n})
    where = f"{filename} line {n}"
    if line is None:
        return doc.drop(STAGE, DropReason.TOO_LARGE, f"{where}: {size} bytes > {config.max_record_bytes}")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return doc.drop(STAGE, DropReason.READ_ERROR, f"{where}: invalid UTF-8 at byte {exc.start}")
    try:
        row = parse_json(text)
    except ValueError as exc:
        return doc.drop(STAGE, DropReason.READ_ERROR, f"{where}: bad JSON: {exc}"[:500])
    if not isinstance(row, dict):
        return doc.drop(STAGE, DropReason.READ_ERROR, f"{where}: not a JSON object")
    return _row_document(doc, row, where, config)


def _row_document(doc: Document, row: dict, where: str, config: TextSourceConfig) -> StageResult:
    """Validate and clean one record's id, url and text (no lone surrogates leave reading)."""
    own_id = row.get(config.id_field)
    url = row.get(config.url_field)
    stamp = iso_utc(row.get(config.date_field))
    doc = doc.replace(record_id=None if own_id is None else clean_text(str(own_id))[:1024],
                      url=clean_text(url) if isinstance(url, str) else "",
                      metadata={**doc.metadata, "source_date": stamp} if stamp else doc.metadata)
    if len(doc.url) > config.max_url_chars:
        return doc.replace(url=doc.url[:config.max_url_chars]).drop(
            STAGE, DropReason.HEADER_TOO_LONG, f"{where}: url of {len(url)} characters > {config.max_url_chars}")
    text = row.get(config.field)
    if not isinstance(text, str) or not text.strip():
        return doc.drop(STAGE, DropReason.NO_TEXT, f"{where}: no {config.field!r} text")
    if len(text) > config.max_record_bytes:  # Parquet cells arrive whole; JSONL lines were capped already
        return doc.drop(STAGE, DropReason.TOO_LARGE, f"{where}: {len(text)} characters > {config.max_record_bytes}")
    return doc.replace(text=clean_text(text))


def _bounded_line(stream, limit: int):
    """(line, bytes) of the next line; (None, bytes) when it is longer than `limit`, which is skipped
    in chunks and never held whole; (b"", 0) at the end."""
    line = stream.readline(limit + 1)
    if len(line) <= limit or line.endswith(b"\n"):
        return line, len(line)
    size = len(line)
    while True:
        chunk = stream.readline(_SKIP_CHUNK)
        size += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return None, size


def _read_parquet(stream: BinaryIO, source: str, filename: str, config: TextSourceConfig) -> Iterator[StageResult]:
    """Rows of a Parquet file, each row group bounded before it is decoded: its pages' sizes (read from their
    headers: the footer can claim anything, and a dictionary page of 30 MB decodes to rows x 30 MB) bound any
    one value, so a group with a page over `max_parquet_page_bytes` is ledgered from the headers alone, and the
    others are read in batches of at most _PARQUET_BATCH_BYTES (one row when a page is larger). Texts over
    `max_record_bytes` are found from Arrow's lengths and never become Python strings."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(stream)
        names = set(parquet.schema_arrow.names)
        columns = [c for c in (config.field, config.id_field, config.url_field, config.date_field) if c in names]
        meta = parquet.metadata
        leaves = [j for j in range(meta.num_columns) if meta.schema.column(j).path.split(".")[0] in columns]
    except Exception as exc:  # not readable at all: one row for the file
        doc = Document(id=stable_id(STAGE, source, filename, "file"), url="", source=source)
        yield doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}: {type(exc).__name__}: {exc}"[:500])
        return
    n = 0
    try:
        for group in range(meta.num_row_groups):
            rows = meta.row_group(group).num_rows
            largest = max((page.uncompressed for j in leaves for page in
                           column_pages(stream, *chunk_range(meta.row_group(group).column(j)))), default=0)
            if largest > config.max_parquet_page_bytes:
                for _ in range(rows):
                    n += 1
                    yield _parquet_doc(source, filename, n).drop(
                        STAGE, DropReason.TOO_LARGE, f"{filename} row {n}: row group {group} holds a page of "
                        f"{largest} bytes > text.max_parquet_page_bytes {config.max_parquet_page_bytes} (not decoded)")
                continue
            batch_rows = max(1, min(_PARQUET_BATCH_ROWS, _PARQUET_BATCH_BYTES // max(largest, 1)))
            for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[group], columns=columns,
                                              use_threads=False):
                for row, size in _batch_rows(batch, config):
                    n += 1
                    doc = _parquet_doc(source, filename, n)
                    if size is not None:
                        yield doc.drop(STAGE, DropReason.TOO_LARGE,
                                       f"{filename} row {n}: {size} bytes > {config.max_record_bytes}")
                    else:
                        yield _row_document(doc, row, f"{filename} row {n}", config)
    except Exception as exc:  # a damaged row group: the rows from it on are counted in one ledger row
        doc = Document(id=stable_id(STAGE, source, filename, "rest", str(n)), url="", source=source)
        yield doc.drop(STAGE, DropReason.READ_ERROR, f"{filename} row {n + 1} onwards: {type(exc).__name__}: {exc}"[:500])


def _parquet_doc(source: str, filename: str, n: int) -> Document:
    return Document(id=document_id(source, filename, n - 1), url="", source=source,
                    metadata={"source_file": filename, "source_line": n})


def _batch_rows(batch, config: TextSourceConfig) -> Iterator[tuple[dict, int | None]]:
    """(row, None) for each row of an Arrow batch, or ({}, its text's size) when the text is over the cap:
    sizes come from Arrow, and an oversized text is nulled before the batch becomes Python objects."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if config.field not in batch.schema.names:
        yield from ((row, None) for row in batch.to_pylist())
        return
    index = batch.schema.get_field_index(config.field)
    text = batch.column(index)
    values = text.dictionary if pa.types.is_dictionary(text.type) else text
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
            or pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        yield from ((row, None) for row in batch.to_pylist())  # not text: _row_document says so
        return
    sizes = pc.binary_length(values)
    if pa.types.is_dictionary(text.type):
        sizes = pc.take(sizes, text.indices)
    over = pc.fill_null(pc.greater(sizes, config.max_record_bytes), False)
    if not pc.any(over).as_py():
        yield from ((row, None) for row in batch.to_pylist())
        return
    kept = pc.if_else(over, pa.scalar(None, type=text.type), text)
    rows = batch.set_column(index, config.field, kept).to_pylist()
    for row, size, too_big in zip(rows, sizes.to_pylist(), over.to_pylist()):
        yield (row, size) if too_big else (row, None)
