"""The sizes of a Parquet column chunk's pages, read from their headers before anything is decoded.

A Parquet file's footer can claim anything, and a dictionary-encoded chunk of 30 MB decodes to
rows x 30 MB; what Arrow really allocates is each page's `uncompressed_page_size` (it decompresses into
a buffer of exactly that size and fails if the data is longer). So the page headers bound what a row
group costs: no single value is longer than the page that holds it. Each header is a Thrift
compact-protocol struct (parquet.thrift `PageHeader`) in front of its page; this reads them in order
(one small read each) without decompressing anything.
"""
from __future__ import annotations

from typing import BinaryIO, NamedTuple

DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 1, 2, 3
_HEADER_READ = 4096        # bytes read at a page's start; a longer header (big statistics) reads more
_MAX_HEADER = 16 << 20     # a header longer than this is not a header
_MAX_DEPTH = 16            # nested structs in a header: PageHeader > DataPageHeader > Statistics


class Page(NamedTuple):
    kind: int               # DATA_PAGE, DICTIONARY_PAGE, ...
    uncompressed: int       # bytes Arrow allocates to decode it
    compressed: int
    values: int             # values in the page (rows, for a flat column); dictionary pages: entries


class BadPageHeader(ValueError):
    pass


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise EOFError
        self.at += 1
        return self.data[self.at - 1]

    def varint(self) -> int:
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 70:
                raise BadPageHeader("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, n: int) -> None:
        if self.at + n > len(self.data):
            raise EOFError
        self.at += n


def _skip_value(r: _Reader, kind: int, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise BadPageHeader("nested too deeply")
    if kind in (1, 2):          # booleans live in the field header
        return
    if kind == 3:               # i8
        r.skip(1)
    elif kind in (4, 5, 6):     # i16, i32, i64
        r.varint()
    elif kind == 7:             # double
        r.skip(8)
    elif kind == 8:             # binary
        r.skip(r.varint())
    elif kind in (9, 10):       # list, set
        head = r.byte()
        size, element = head >> 4, head & 0x0F
        if size == 15:
            size = r.varint()
        for _ in range(size):
            _skip_value(r, element, depth + 1)
    elif kind == 11:            # map
        size = r.varint()
        if size:
            types = r.byte()
            for _ in range(size):
                _skip_value(r, types >> 4, depth + 1)
                _skip_value(r, types & 0x0F, depth + 1)
    elif kind == 12:            # struct
        _struct(r, depth + 1)
    else:
        raise BadPageHeader(f"unknown Thrift type {kind}")


def _struct(r: _Reader, depth: int) -> dict:
    """Reads a struct: {field id: value} of its i32 fields and, at the top level, of its nested structs'."""
    fields, last = {}, 0
    while True:
        head = r.byte()
        kind = head & 0x0F
        if kind == 0:
            return fields
        delta = head >> 4
        field = last + delta if delta else r.zigzag()
        last = field
        if kind == 5:
            fields[field] = r.zigzag()
        elif kind == 12 and depth == 0:
            fields[field] = _struct(r, depth + 1)
        else:
            _skip_value(r, kind, depth)


def _header(stream: BinaryIO, offset: int) -> tuple[dict, int]:
    """(fields, header length) of the page header at `offset`."""
    size = _HEADER_READ
    while True:
        stream.seek(offset)
        data = stream.read(size)
        try:
            r = _Reader(data)
            return _struct(r, 0), r.at
        except EOFError:
            if len(data) < size or size >= _MAX_HEADER:
                raise BadPageHeader(f"page header at byte {offset} runs past the end") from None
            size *= 4


def column_pages(stream: BinaryIO, start: int, length: int, max_pages: int = 1 << 20) -> list[Page]:
    """The pages of the column chunk stored in bytes [start, start + length) of `stream`."""
    pages, at, end = [], start, start + length
    while at < end:
        fields, header_length = _header(stream, at)
        kind, uncompressed, compressed = fields.get(1), fields.get(2), fields.get(3)
        if kind is None or uncompressed is None or compressed is None or uncompressed < 0 or compressed < 0:
            raise BadPageHeader(f"page header at byte {at} lacks its sizes")
        nested = fields.get({DATA_PAGE: 5, DICTIONARY_PAGE: 7, DATA_PAGE_V2: 8}.get(kind, -1)) or {}
        pages.append(Page(kind, uncompressed, compressed, nested.get(1, 0)))
        at += header_length + compressed
        if len(pages) > max_pages:
            raise BadPageHeader(f"more than {max_pages} pages in one column chunk")
    return pages


def chunk_range(column) -> tuple[int, int]:
    """(first byte, length) of a column chunk, from its footer metadata (pyarrow ColumnChunkMetaData)."""
    start = column.data_page_offset
    if column.has_dictionary_page and column.dictionary_page_offset is not None:
        start = min(start, column.dictionary_page_offset) if column.dictionary_page_offset > 0 else start
    return start, column.total_compressed_size
