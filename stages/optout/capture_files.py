"""Reading robots.txt captures from files (`--robots`) with the page input's caps and refusals. Beam-free.

A capture file is input like any WARC or Parquet file of pages, and as hostile: the same WARC reader guards
(stages/extraction/warc.py `guarded_records`: header lines over `warc.max_header_line_bytes`, headers over
`max_header_bytes`, a damaged gzip member costing its own record and reading resuming at the next), Parquet row
groups bounded from their page headers before anything is decoded (a page over MAX_PARQUET_PAGE_BYTES is skipped
undecoded; batches of at most _BATCH_BYTES), a robots.txt body read to RFC 9309's 500 KiB and no further. What
cannot be read is an `Unreadable` (the file, where, why): the job counts it and names it in the report
(report.json `optout.robots_unreadable`); it is never an internal error of the run.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from stages.extraction.warc import RestUnreadable, WarcConfig, _decode_transfer, _split_http, guarded_records
from stages.optout.captures import Capture, _date, capture_from_response
from stages.optout.robots import MAX_BYTES
from stages.parquet_pages import chunk_range, column_pages

HTTP_HEAD_BYTES = 64 << 10  # of a record's block, read besides the 500 KiB of body: its HTTP status line and headers
MAX_PARQUET_PAGE_BYTES = 64 << 20  # a page of a robots table larger than this is not decoded (a body is 500 KiB)
_BATCH_BYTES = 64 << 20
_BATCH_ROWS = 256
COLUMNS = ("host", "fetch_date", "status", "body", "scheme", "location")


class Unreadable(NamedTuple):
    """Part of a capture file that could not be read: the file, where (a byte offset or a row), and why."""

    file: str
    where: str
    why: str


def read_capture_warc(fh: BinaryIO, path: str = "", config: WarcConfig = WarcConfig()) -> Iterator[Capture | Unreadable]:
    """The robots.txt captures of a WARC file (Common Crawl's robotstxt/ files: its response records), read as
    stored (`fh` not decompressed: the reader sniffs gzip itself and resumes after a damaged member)."""
    try:
        for record, offset, oversized in guarded_records(fh, config, lambda _name: None):
            if record is None:
                yield Unreadable(path, f"byte {offset}", oversized)
                continue
            if oversized is not None:
                yield Unreadable(path, f"byte {offset}", f"a header line of {oversized} bytes > "
                                                          f"warc.max_header_line_bytes {config.max_header_line_bytes}")
                continue
            if record.rec_type != "response":
                continue
            url = (record.rec_headers.get_header("WARC-Target-URI") or "").strip().strip("<>")
            if len(url) > config.max_url_chars:
                yield Unreadable(path, f"byte {offset}", f"a URL of {len(url)} characters > warc.max_url_chars")
                continue
            block = record.raw_stream.read(MAX_BYTES + HTTP_HEAD_BYTES)  # the rest is skipped, never held
            status, http, body = _split_http(block)
            if http is not None and (http.get("transfer-encoding") or http.get("content-encoding")):
                try:
                    body = _decode_transfer(body, http, MAX_BYTES)
                except ValueError as exc:
                    yield Unreadable(path, f"byte {offset}", f"a body that cannot be decoded: {exc}"[:500])
                    continue
            capture = capture_from_response(url, _date(record.rec_headers.get_header("WARC-Date")), status,
                                            body[:MAX_BYTES], (http or {}).get("location"))
            if capture is not None:
                yield capture
    except RestUnreadable as rest:
        yield Unreadable(path, f"byte {rest.offset} onwards", rest.detail)
    except Exception as exc:  # what the guarded reader does not know: the rest of the file, named
        yield Unreadable(path, "the rest of the file", f"{type(exc).__name__}: {exc}"[:500])


def read_capture_text(path: str, fh: BinaryIO, date: str = "") -> Iterator[Capture]:
    """A robots.txt a team fetched itself, in a folder: `<host>.txt` or `<host>/robots.txt` (status 200; the date,
    when known, is the file's modification time)."""
    name = path.replace("\\", "/").rstrip("/").split("/")
    host = name[-2] if name[-1] == "robots.txt" and len(name) > 1 else name[-1].removesuffix(".txt")
    capture = capture_from_response(f"https://{host.lower()}/robots.txt", date, 200, fh.read(MAX_BYTES), None)
    if capture is not None:
        yield capture


def read_capture_table(fh: BinaryIO, path: str = "") -> Iterator[Capture | Unreadable]:
    """Captures from a Parquet table with columns host, fetch_date, status, body (and optionally scheme, location),
    each row group bounded from its page headers before it is decoded (as text input's Parquet: a footer can claim
    anything, a dictionary page of 30 MB decodes to rows x 30 MB)."""
    yield from _read_table(fh, path)


def _read_table(fh: BinaryIO, path: str) -> Iterator[Capture | Unreadable]:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(fh, read_dictionary=["body"])  # a value shared by rows stays one value
        names = set(table.schema_arrow.names)
        meta = table.metadata
    except Exception as exc:
        yield Unreadable(path, "the file", f"not a readable Parquet file: {type(exc).__name__}: {exc}"[:500])
        return
    missing = {"host", "fetch_date", "status", "body"} - names
    if missing:
        raise ValueError(f"a robots table needs the columns host, fetch_date, status, body "
                         f"(missing: {', '.join(sorted(missing))})")
    columns = [c for c in COLUMNS if c in names]
    leaves = [j for j in range(meta.num_columns) if meta.schema.column(j).path.split(".")[0] in columns]
    row = 0
    try:
        for group in range(meta.num_row_groups):
            rows = meta.row_group(group).num_rows
            largest = max((page.uncompressed for j in leaves
                           for page in column_pages(fh, *chunk_range(meta.row_group(group).column(j)))), default=0)
            if largest > MAX_PARQUET_PAGE_BYTES:
                yield Unreadable(path, f"rows {row + 1}-{row + rows}", f"row group {group} holds a page of {largest} "
                                 f"bytes > {MAX_PARQUET_PAGE_BYTES} (not decoded)")
                row += rows
                continue
            size = max(1, min(_BATCH_ROWS, _BATCH_BYTES // max(largest, 1)))
            for batch in table.iter_batches(batch_size=size, row_groups=[group], columns=columns, use_threads=False):
                batch = _bodies_cut(batch)
                for values in batch.to_pylist():
                    row += 1
                    body = values["body"] or b""
                    if not isinstance(body, (bytes, str)):
                        yield Unreadable(path, f"row {row}", f"body is {type(body).__name__}, not text or bytes")
                        continue
                    body = (body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body)[:MAX_BYTES]
                    capture = _table_capture(values, body)
                    if capture is not None:
                        yield capture
    except Exception as exc:  # a damaged row group: the rest of the table, named
        yield Unreadable(path, f"row {row + 1} onwards", f"{type(exc).__name__}: {exc}"[:500])


def _bodies_cut(batch):
    """The batch with its bodies cut to MAX_BYTES in Arrow, before any becomes a Python object (a dictionary value
    shared by many rows is cut once)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index = batch.schema.get_field_index("body")
    body = batch.column(index)
    if pa.types.is_dictionary(body.type):
        body = pa.DictionaryArray.from_arrays(body.indices, _cut(body.dictionary, pa, pc))
    else:
        body = _cut(body, pa, pc)
    return batch.set_column(index, "body", body)


def _cut(values, pa, pc):
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        values = values.cast(pa.large_binary())
    if pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
        return pc.binary_slice(values, 0, MAX_BYTES)
    return values


def _table_capture(values: dict, body: bytes) -> Capture | None:
    host = values.get("host")
    if not isinstance(host, str) or not host or len(host) > 255:
        return None
    scheme = values.get("scheme") or "https"
    location = values.get("location")
    status = values.get("status")
    return capture_from_response(f"{str(scheme).lower()[:16]}://{host}/robots.txt", _date(values.get("fetch_date")),
                                 status if isinstance(status, int) else None, body,
                                 location[:8192] if isinstance(location, str) else None)
