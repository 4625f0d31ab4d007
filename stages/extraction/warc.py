"""Read WARC files into `Document`s (or `Drop`s), one response record at a time.

Reader choice: warcio, not FastWARC (measured by bench/warc_readers.py, RESULTS "WARC readers"). FastWARC
read the benchmark WARC's raw records 2x faster than warcio as shipped (0.20 vs 0.43 ms a record); warcio with
ISA-L inflating 64 KB blocks (`archive_records`) reads them as fast as FastWARC. On the quirks this reader
ledgers FastWARC loses records: a 2 MB header line or a Content-Length too short ends the file with an exception,
and a Content-Length too long silently swallows the next record. warcio yields every record there and lets us
read the raw record block. We parse the HTTP header block ourselves (`no_record_parse=True`):
warcio's own parser mistakes the first line of a header-less Wayback record
(`<!DOCTYPE HTML PUBLIC ...>`) for a status line and silently eats the top of
the page.
"""
from __future__ import annotations

import io
import logging
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator

from common.settings import check
from stages.extraction.charset import charset_from_content_type, decode_html
from stages.formats import WARC, is_gzip, sniff_warc
from stages.origin import http_date
from stages.record import Document, DropReason, StageResult, clean_text, stable_id
from stages.table import READ, InputFormat, StageSpec

# warcio logs a warning for every Target-URI with spaces (it reads them, spaces escaped): common in real crawls,
# harmless, and printed through the progress bars
logging.getLogger("warcio.recordloader").setLevel(logging.ERROR)

STAGE = "warc"
# warcio inflates 16 KB at a time through zlib; Intel's ISA-L (python-isal) inflates the same bytes ~2.3x faster,
# and larger blocks mean fewer calls (bench/warc_readers.py: ~0.5 -> ~0.3 ms a bench record, same records).
READ_BLOCK_BYTES = 64 * 1024
HTML_TYPES = ("text/html", "application/xhtml+xml")
# WARC 1.1's record types: counted by name; any other value (input data) is counted as `other`, so the
# report's keys never come from the file.
RECORD_TYPES = frozenset({"warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion",
                          "continuation"})
_BINARY_SNIFF_CHARS = 4096


@dataclass(frozen=True)
class WarcConfig:
    """Reading WARC files: memory caps per record."""

    # Memory guard: a record block larger than this is not read into memory at all (too_large).
    # Common Crawl truncates payloads at 1 MiB (5 MiB since 2025), so 64 MiB only stops pathological files.
    max_record_bytes: int = 64 * 1024 * 1024
    # A WARC header line longer than this is never held (the rest of the line is skipped in chunks);
    # its record is ledgered (header_too_long).
    max_header_line_bytes: int = 64 * 1024
    # More header bytes than this in one record: the record is ledgered (read_error) and reading resumes at the
    # next gzip member (in an uncompressed file: at the next line that starts a record).
    max_header_bytes: int = 1024 * 1024
    # Longer target URIs are ledgered as header_too_long (browsers and crawlers stop far below this).
    max_url_chars: int = 8192
    # Share of control characters in the head of a decoded page above which it is not text.
    max_control_char_fraction: float = 0.05

    def __post_init__(self):
        caps = {"max_record_bytes": self.max_record_bytes, "max_header_line_bytes": self.max_header_line_bytes,
                "max_header_bytes": self.max_header_bytes, "max_url_chars": self.max_url_chars}
        bad = [k for k, v in caps.items() if v <= 0]
        check(not bad, f"size caps must be positive: {', '.join(bad)}")
        check(self.max_url_chars <= self.max_header_line_bytes, "max_url_chars must not exceed max_header_line_bytes")
        check(0 <= self.max_control_char_fraction <= 1, "max_control_char_fraction must be in [0, 1]")


def check_decoders(run_config) -> None:
    """Content-Encoding: br pages need brotli >= 1.2 (bounded decompression)."""
    try:
        import brotli
    except ImportError as exc:
        raise OSError(f"brotli is not installed ({exc}): pip install 'brotli>=1.2'") from exc
    if not hasattr(brotli.Decompressor(), "can_accept_more_data"):
        raise OSError("brotli is too old for bounded decompression: pip install 'brotli>=1.2'")


def _read(stream: BinaryIO, *, source: str, filename: str, gzipped: bool, settings, count) -> Iterator[StageResult]:
    return read_warc(stream, source=source, filename=filename, config=settings.warc,
                     max_payload_bytes=settings.max_payload_bytes, count=count)


FORMATS = (InputFormat(name=WARC, stage=STAGE, html=True, sniff=sniff_warc, read=_read, label="WARC"),)

SPEC = StageSpec(
    name=STAGE, order=1, runs=READ, config=WarcConfig, check=check_decoders,
    about="WARC response records -> HTML documents",
    reasons={
        DropReason.NON_HTML: "payload type is not text/html or application/xhtml+xml (detail: the type)",
        DropReason.HTTP_STATUS: "not a 2xx response (detail: the status)",
        DropReason.TRUNCATED_RECORD: "the file (or the record's gzip member) ends before the record's Content-Length",
        DropReason.EMPTY_PAYLOAD: "a response with no body",
        DropReason.BINARY_CONTENT: "labelled HTML, but more than `warc.max_control_char_fraction` control characters",
        DropReason.UNDECODABLE: "the HTTP content or transfer encoding cannot be undone",
        DropReason.TOO_LARGE: "record block over `warc.max_record_bytes` (not read into memory), or a payload "
                              "decoding to more than `extract.max_html_bytes`",
        DropReason.HEADER_TOO_LONG: "a WARC header line over `warc.max_header_line_bytes` or a URL over "
                                    "`warc.max_url_chars`",
        DropReason.READ_ERROR: "a record that cannot be read (detail: file@offset and error; a damaged gzip member "
                               "or, uncompressed, a record header or Content-Length: the bytes skipped to the next "
                               "one; a Content-Length that ends inside the record's gzip member), or the rest of a "
                               "broken file (onwards)"})


class HeaderTooLarge(ValueError):
    pass


class _HeaderGuard:
    """Bounds warcio's line reads, which parse every WARC header: a line longer than the cap is cut
    (its rest read in chunks and discarded) and remembered, so its record is ledgered, not held."""

    def __init__(self, reader, max_line: int, max_total: int):
        self._readline, self._max_line, self._max_total = reader.readline, max_line, max_total
        self.oversized: int | None = None   # length of the first over-long line since reset()
        self._total = 0

    def reset(self) -> None:
        self.oversized, self._total = None, 0

    def readline(self, length: int | None = None) -> bytes:
        if length is not None and 0 <= length <= self._max_line:
            return self._readline(length)
        parts, size = [], 0
        while size <= self._max_line:
            chunk = self._readline(self._max_line + 1 - size)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
            if chunk.endswith(b"\n"):
                break
        line = b"".join(parts)
        if size > self._max_line and not line.endswith(b"\n"):
            while True:  # skip the rest of the line without holding it
                chunk = self._readline(1 << 16)
                size += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
            self.oversized = self.oversized or size
            line = line[:self._max_line] + b"\r\n"
        self._total += min(size, self._max_line)
        if self._total > self._max_total:
            raise HeaderTooLarge(f"more than {self._max_total} header bytes in one record")
        return line


def document_id(source: str, filename: str, offset: int) -> str:
    """The internal id of the record at `offset` of a WARC file: unique by construction, even when
    two files hold the same WARC-Record-ID (the record's own id is kept as `record_id`)."""
    return stable_id(STAGE, source, filename, str(offset))


def read_warc(stream: BinaryIO, *, source: str, filename: str = "", config: WarcConfig = WarcConfig(),
              max_payload_bytes: int = 5 * 1024 * 1024,
              count: Callable[[str], None] = lambda name: None) -> Iterator[StageResult]:
    """Yield a Document or Drop for every `response` record; count the other record types.

    `count(name)` is called once per record with `record.<type>` so the caller can
    report what was skipped. A damaged gzip member (in an uncompressed file, a record whose header does not
    parse) is one READ_ERROR drop and reading resumes at the next member (record); a file that breaks otherwise
    (garbage, nothing readable after the damage) yields one READ_ERROR drop
    for the rest of the file instead of raising. A payload that
    decodes to more than `max_payload_bytes` (the extraction cap) is ledgered here, so no
    page over the cap is ever passed on.
    """
    try:
        for record, offset, oversized in guarded_records(stream, config, count):
            if record is None:  # bytes no member of which inflates (`oversized`: why)
                yield _file_drop(filename, source, offset, oversized, rest=False)
                continue
            rec_type = record.rec_type
            if not rec_type:  # malformed: we cannot tell whether it held a page, so ledger it
                count("record.malformed")
                yield _file_drop(filename, source, offset, "malformed record: no WARC-Type header", rest=False)
                continue
            count(f"record.{rec_type if rec_type in RECORD_TYPES else 'other'}")
            if rec_type != "response":
                continue
            yield _response_to_document(record, source=source, filename=filename, offset=offset, config=config,
                                        max_payload_bytes=max_payload_bytes, oversized=oversized)
    except RestUnreadable as rest:
        yield _file_drop(filename, source, rest.offset, rest.detail)


class RestUnreadable(Exception):
    """The rest of a WARC file from `offset` on cannot be read (`detail` says why)."""

    def __init__(self, offset: int, detail: str):
        super().__init__(detail)
        self.offset, self.detail = offset, detail[:500]


def guarded_records(stream: BinaryIO, config: WarcConfig, count: Callable[[str], None]) -> Iterator[tuple]:
    """(record, offset, the length of a header line over the cap or None) of every record of a WARC (or WET) file,
    read under the header caps. A gzip member that does not inflate (a flipped bit, a cut download glued to the
    next) costs its own record, not the rest of the file: the reading resumes at the next member that inflates to a
    WARC record, and the bytes skipped, unless they were a record already given, come as (None, offset, why) and
    count `record.unreadable`; in an uncompressed file, the same for a record whose header does not parse or whose
    Content-Length does not end at a record boundary (reading resumes at the next line that starts a record). A
    file that breaks otherwise (garbage, no record after the damage, a stream that cannot seek) or holds what
    warcio reads as another format (legacy ARC) counts `record.unreadable` and raises RestUnreadable for the rest."""
    given = resumed = -1  # the offsets of the last record given and of the last member reading resumed at
    gzipped = _starts_gzipped(stream)  # warcio reads a file whose first block does not inflate as uncompressed
    while True:
        records = archive_records(stream)
        guard = _HeaderGuard(records.reader, config.max_header_line_bytes, config.max_header_bytes)
        records.reader.readline = guard.readline
        while True:
            guard.reset()
            try:
                record = next(records)
            except StopIteration:
                return
            except Exception as exc:  # warcio raises ArchiveLoadFailed, zlib.error, EOFError, ValueError...
                at, why = getattr(records, "offset", -1), f"{type(exc).__name__}: {exc}"
                # warcio reads ahead, so `at` need not be where the damage is. The damaged member is the one reading
                # last resumed at (broken again before it gave a record), the one after the last record given when
                # that record's member inflates to its end, or else that record's own (whose row is written)
                if not gzipped:  # uncompressed: the record whose header did not parse, unless it was given already
                    damaged = at if at > given else None
                    resume = _next_plain_record(stream, max(at, given, 0))
                else:
                    if resumed > given:
                        damaged = resumed
                    else:
                        damaged = _member_end(stream, given) if given >= 0 else 0
                    resume = _next_member(stream, given if damaged is None else damaged)
                if resume is None:
                    count("record.unreadable")
                    raise RestUnreadable(at if damaged is None else damaged, why) from None
                if damaged is not None:
                    count("record.unreadable")
                    at_next = "the next gzip member" if gzipped else "the next record"
                    yield None, damaged, f"bytes {damaged}-{resume} skipped, reading resumed at {at_next}: {why}"[:500]
                stream.seek(resume)
                resumed = resume
                break
            if record.format != "warc":  # warcio reads any line-based text as a legacy ARC record
                count("record.unreadable")
                raise RestUnreadable(records.offset, f"not a WARC record ({record.format} format)")
            wrong = _plain_length_error(stream, records.offset, record) if gzipped is False else None
            if wrong is not None:  # its block would swallow the records after it, or stop inside its own
                resume = _next_plain_record(stream, records.offset)
                count("record.unreadable")
                if resume is None:
                    raise RestUnreadable(records.offset, wrong)
                yield None, records.offset, (f"bytes {records.offset}-{resume} skipped, reading resumed at the next "
                                             f"record: {wrong}")[:500]
                stream.seek(resume)
                given = resumed = records.offset
                break
            given = records.offset
            _watch_block_end(records, record, gzipped)
            yield record, records.offset, guard.oversized
            end = _after_short_block(stream, records, given) if gzipped else None
            if end is not None:
                stream.seek(end)
                resumed = end
                break


class _Member:
    """What the reader of a record in a gzip member may ask about that member (`block_length_error`)."""

    def __init__(self, records):
        self._records = records

    def ended(self) -> bool:
        """Whether the member inflated to its end (else the file ended inside it)."""
        return bool(getattr(self._records.reader.decompressor, "eof", False))

    def overrun(self) -> tuple[int, bytes] | None:
        """(offset, line) where the member goes on after the record's block and its blank lines, or None."""
        self._records.read_to_end()
        return self._records.block_overrun


def _watch_block_end(records, record, gzipped: bool | None) -> None:
    """Let the record's reader ask whether its block ends with its gzip member (`block_length_error`)."""
    if gzipped:
        record.gzip_member = _Member(records)


def _after_short_block(stream: BinaryIO, records, given: int) -> int | None:
    """Where reading resumes after the record at `given` when its gzip member goes on after its block (the reader
    ledgered the record for it): the member's end, since the rest of the member is that record's, not a damaged
    next one. None when the block ended with the member, or the member holds more records (a file gzipped whole)."""
    records.read_to_end()
    if records.block_overrun is None:
        return None
    end, more_records = _scan_member(stream, given)
    return None if more_records else end


_GZIP_MAGIC = b"\x1f\x8b\x08"
_SCAN_BYTES = 1 << 20


def _next_member(stream: BinaryIO, after: int) -> int | None:
    """The offset of the first gzip member after `after` that inflates to a WARC record's first line, or None
    (the end of the file, or a stream that cannot seek)."""
    return _scan(stream, after + 1, _GZIP_MAGIC, lambda chunk, i, offset: _starts_a_record(stream, offset))


def _scan(stream: BinaryIO, start: int, needle: bytes, accept, stop: int | None = None, tail: int = 0) -> int | None:
    """The offset of the first `needle` in bytes start..stop (or the end) that `accept(chunk, index, offset)` takes
    (`tail` bytes after the needle are in the chunk for it to look at), or None (none, or a stream that cannot
    seek). Linear: read a megabyte at a time, each occurrence looked at once."""
    try:
        if not stream.seekable():
            return None
        position = start
        while stop is None or position < stop:
            stream.seek(position)
            chunk = stream.read(_SCAN_BYTES + len(needle) + tail - 1)
            limit = _SCAN_BYTES if stop is None else min(_SCAN_BYTES, stop - position)
            found = chunk.find(needle)
            while found != -1 and found < limit:
                if accept(chunk, found, position + found):
                    return position + found
                found = chunk.find(needle, found + 1)
            if len(chunk) <= _SCAN_BYTES:
                return None
            position += _SCAN_BYTES
        return None
    except (OSError, ValueError):
        return None


def _starts_gzipped(stream: BinaryIO) -> bool | None:
    """Whether the stream's next bytes are a gzip member's magic (None: it cannot seek, so it is not looked at)."""
    try:
        if not stream.seekable():
            return None
        start = stream.tell()
        head = stream.read(2)
        stream.seek(start)
        return is_gzip(head)
    except (OSError, ValueError):
        return None


_PLAIN_RECORD = b"\nWARC/1."
_HEADER_END = b"\r\n\r\n"


def _starts_plain_record(chunk: bytes, index: int, offset: int) -> bool:
    """Whether the `\nWARC/1.` at `index` of `chunk` begins a record's first line ("WARC/1.0" or "WARC/1.1")."""
    return chunk[index + len(_PLAIN_RECORD):index + len(_PLAIN_RECORD) + 2] in (b"0\r", b"1\r", b"0\n", b"1\n")


def _plain_length_error(stream: BinaryIO, offset: int, record) -> str | None:
    """Why the uncompressed record at `offset` cannot be what its Content-Length says (its block does not end where a
    record or the file does: a length too long swallows the records after it, one too short leaves the rest of the
    block to be read as a record), or None. The stream is left where it was (warcio reads on from there)."""
    try:
        length = int(record.rec_headers.get_header("Content-Length") or "")
    except ValueError:
        return None  # warcio's own error, or none: not this check's to judge
    position = stream.tell()
    try:
        stream.seek(offset)
        head, end = bytearray(), -1
        while end < 0 and len(head) < (1 << 20):  # the header caps bound it before this does
            chunk = stream.read(8192)
            if not chunk:
                return None
            head += chunk
            end = head.find(_HEADER_END, max(0, len(head) - len(chunk) - len(_HEADER_END)))
        if end < 0:
            return None
        block = offset + end + len(_HEADER_END)
        stream.seek(block + length)
        after = stream.read(64)
        rest = after.lstrip(b"\r\n")
        if not after or (after.startswith(b"\r\n") and (not rest or rest.startswith(b"WARC/"))):
            return None  # a record or the file's end follows (a clipped last record is ledgered as such)
        if (after.startswith(b"\r\n") and _looks_like_a_record_header(stream, block + length)
                and _scan(stream, block, _PLAIN_RECORD, _starts_plain_record, stop=block + length, tail=2) is None):
            return None  # the next record's own first line is damaged: its own row
        return f"Content-Length {length} does not end at a record boundary (then {after[:16]!r})"
    except (OSError, ValueError):
        return None
    finally:
        stream.seek(position)


def _looks_like_a_record_header(stream: BinaryIO, at: int) -> bool:
    """Whether the lines after `at` (a block's end) are a WARC header whose first line may be damaged: a `WARC-`
    field before the first blank line. A too-short Content-Length that happens to end on a line break is followed by
    the rest of its own block instead (HTTP headers or the page), which has none."""
    stream.seek(at)
    head = stream.read(4096).lstrip(b"\r\n")
    end = head.find(_HEADER_END)
    return b"\nWARC-" in (head if end < 0 else head[:end])


def _next_plain_record(stream: BinaryIO, after: int) -> int | None:
    """The offset of the first line after `after` of an uncompressed WARC that starts a record ("WARC/1.0" or
    "WARC/1.1"), or None (the end of the file, or a stream that cannot seek)."""
    found = _scan(stream, after, _PLAIN_RECORD, _starts_plain_record, tail=2)
    return None if found is None else found + 1


def _member_end(stream: BinaryIO, start: int) -> int | None:
    """Where the gzip member at `start` ends, or None when it does not inflate to its end."""
    return _scan_member(stream, start)[0]


def _scan_member(stream: BinaryIO, start: int) -> tuple[int | None, bool]:
    """(where the gzip member at `start` ends, or None when it does not inflate to its end; whether it inflates to
    more than one WARC record, a file gzipped whole: a line that starts a record after its first). Inflated 1 MB at a
    time, so a bomb costs time, not memory."""
    more = False
    try:
        stream.seek(start)
        inflater, fed, data, tail = isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS), 0, b"", b"\n"
        while not inflater.eof:
            if not data:
                data = stream.read(1 << 16)
                if not data:
                    return None, more
                fed += len(data)
            out = inflater.decompress(data, 1 << 20)
            data = inflater.unconsumed_tail
            more = more or (tail + out).find(b"\nWARC/1.", 1) != -1  # `tail` starts with the line break before
            tail = (tail + out)[-9:]                                   # the member's own first line: not counted
        return start + fed - len(inflater.unused_data) - len(data), more
    except (OSError, ValueError, isal_zlib.error):
        return None, more


def _starts_a_record(stream: BinaryIO, offset: int) -> bool:
    stream.seek(offset)
    try:
        return isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS).decompress(stream.read(1 << 16), 16).startswith(b"WARC/")
    except isal_zlib.error:
        return False


class _Records(ArchiveIterator):
    """warcio's iterator, but a record block followed by a line that neither is blank nor starts a record (its
    Content-Length stops short) is remembered in `block_overrun` (the offset and that line), not printed to stderr."""

    block_overrun: tuple[int, bytes] | None = None

    def _next_record(self, next_line):
        self.block_overrun = None
        return super()._next_record(next_line)

    def _consume_blanklines(self):
        empty_size, first_line = 0, True
        while True:
            line = self.reader.readline()
            if not line:
                return None, empty_size
            if not line.rstrip() or first_line:
                empty_size += len(line)
                if line.rstrip() and self.block_overrun is None:
                    self.block_overrun = (self.fh.tell() - self.reader.rem_length() - empty_size, line[:80])
                first_line = False
                continue
            if not line.startswith(b"WARC/") and self.block_overrun is None:  # blank lines, then more: it stopped short
                self.block_overrun = (self.fh.tell() - self.reader.rem_length() - len(line), line[:80])
            return line, empty_size


def archive_records(stream: BinaryIO) -> ArchiveIterator:
    """warcio's records of a WARC as this reader takes them: raw blocks (`no_record_parse`), gzip members inflated
    by ISA-L in READ_BLOCK_BYTES blocks."""
    records = _Records(stream, no_record_parse=True, block_size=READ_BLOCK_BYTES)
    _inflate_with_isal(records.reader)
    return records


def block_length_error(record, block: bytes, declared_length: int | None) -> tuple[DropReason, str] | None:
    """Why a record's block (read whole) is not what its Content-Length says, or None. In a gzip member the block
    must end where the member does (after its blank lines): a Content-Length too long stops at the member's end, one
    too short leaves the rest of the member after it, which was kept as a shortened page (and the rest read as a
    damaged next record)."""
    member = getattr(record, "gzip_member", None)
    if declared_length is not None and len(block) < declared_length:
        where = "its gzip member" if member is not None and member.ended() else "file"
        return DropReason.TRUNCATED_RECORD, f"{where} ends after {len(block)} of {declared_length} bytes"
    overrun = member.overrun() if member is not None else None
    if overrun is not None:
        return DropReason.READ_ERROR, (f"Content-Length {declared_length} ends before its gzip member does (the member "
                                       f"goes on with {overrun[1]!r})")[:500]
    return None


# The most one inflate call gives. warcio inflates each block it reads whole: a 64 KB block of a gzip member of
# one repeated byte (a 256 MiB header line, a bomb payload) is ~65 MB at once, held twice while warcio buffers it,
# and under an address-space limit the allocation failed inside ISA-L, which warcio reports on stderr and reads
# as the end of the data: the rest of the file became one read_error row (tests/reliability/test_hostile_inputs.py).
INFLATE_OUT_BYTES = 4 * 1024 * 1024


class BoundedInflater:
    """A gzip member's ISA-L inflater that gives at most INFLATE_OUT_BYTES a call; the compressed input it has not
    used yet (`pending`) is inflated before any new input, by `drain` when warcio's buffer runs empty."""

    def __init__(self):
        self._inflater = isal_zlib.decompressobj(16 + isal_zlib.MAX_WBITS)
        self._pending, self._full = b"", False

    @property
    def pending(self) -> bool:
        """Output is still due from input already given (a capped call may also end with the input used up)."""
        return bool(self._pending) or (self._full and not self._inflater.eof)

    def decompress(self, data: bytes) -> bytes:
        out = self._inflater.decompress(self._pending + data if self._pending else data, INFLATE_OUT_BYTES)
        self._pending, self._full = self._inflater.unconsumed_tail, len(out) >= INFLATE_OUT_BYTES
        return out

    def drain(self) -> bytes:
        return self.decompress(b"")

    @property
    def unused_data(self) -> bytes:
        return self._inflater.unused_data

    @property
    def eof(self) -> bool:
        return self._inflater.eof

    def flush(self) -> bytes:
        return self._inflater.flush()


def _inflate_with_isal(reader) -> None:
    """warcio's reader, inflating gzip members with ISA-L instead of zlib (same output; a corrupt member raises
    isal_zlib.error where zlib raised zlib.error, and warcio and read_warc catch both as errors), at most
    INFLATE_OUT_BYTES at a time: warcio refills its buffer from the inflater's pending input before it reads more."""
    reader.DECOMPRESSORS = {**reader.DECOMPRESSORS, "gzip": BoundedInflater}
    if reader.decomp_type == "gzip":  # the first member's inflater was made in the constructor, before any read
        reader._init_decomp("gzip")
    refill = reader._fillbuff

    def fillbuff(block_size=None):
        inflater = reader.decompressor
        exhausted = not reader.buff or reader.buff.tell() >= reader.buff_size
        if exhausted and isinstance(inflater, BoundedInflater) and inflater.pending:
            out = inflater.drain()
            reader.buff, reader.buff_size = io.BytesIO(out), len(out)
            reader.num_read += len(out)
            reader.num_block_read += len(out)
            if out:
                return
        refill(block_size)

    reader._fillbuff = fillbuff
    inflate = reader._decompress

    def decompress(data):
        # past a member's first block (where warcio tells an uncompressed file by the error), warcio prints an
        # inflate error and reads it as the end of the data; raised, it ends the record and guarded_records moves on
        if data and reader.num_block_read and isinstance(reader.decompressor, BoundedInflater):
            return reader.decompressor.decompress(data)
        return inflate(data)

    reader._decompress = decompress


def _file_drop(filename: str, source: str, offset: int, detail: str, rest: bool = True) -> StageResult:
    doc = Document(id=stable_id(STAGE, source, filename, str(offset), "rest"), url="", source=source)
    return doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}@{offset}{' onwards' if rest else ''}: {detail}")


def _response_to_document(record, *, source: str, filename: str, offset: int, config: WarcConfig,
                          max_payload_bytes: int, oversized: int | None) -> StageResult:
    """The record as a Document with decoded HTML, or its Drop; never raises (the drop keeps id and URL)."""
    doc = Document(id=document_id(source, filename, offset), url="", source=source,
                   metadata={"warc_filename": filename, "warc_offset": offset})
    try:
        return _read_response(doc, record, config, max_payload_bytes, oversized)
    except Exception as exc:  # a record we cannot read: ledger it, keep going
        return doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}@{offset}: {type(exc).__name__}: {exc}"[:500])


def _read_response(doc: Document, record, config: WarcConfig, max_payload_bytes: int,
                   oversized: int | None) -> StageResult:
    headers = record.rec_headers
    doc = _with_warc_headers(doc, headers, config, oversized)
    if not isinstance(doc, Document):
        return doc
    metadata = dict(doc.metadata)
    declared_length = int_or_none(headers.get_header("Content-Length"))
    block = record.raw_stream.read(config.max_record_bytes + 1)
    if len(block) <= config.max_record_bytes:
        wrong = block_length_error(record, block, declared_length)
        if wrong is not None:
            return doc.drop(STAGE, *wrong)
    return _read_payload(doc, metadata, block, headers, config, max_payload_bytes)


def _with_warc_headers(doc: Document, headers, config: WarcConfig, oversized: int | None) -> StageResult:
    """The document with what its WARC header says (URL, date, record id), or a Drop if a header is too long."""
    url = clean_text((headers.get_header("WARC-Target-URI") or "").strip().strip("<>"))
    doc = doc.replace(url=url[:config.max_url_chars])
    if oversized is not None:
        return doc.drop(STAGE, DropReason.HEADER_TOO_LONG,
                        f"a header line of {oversized} bytes > {config.max_header_line_bytes}")
    if len(url) > config.max_url_chars:
        return doc.drop(STAGE, DropReason.HEADER_TOO_LONG, f"URL of {len(url)} characters > {config.max_url_chars}")
    date = headers.get_header("WARC-Date")
    if date and date.strip().lower() in ("null", "none", ""):
        date = None  # Wayback exports write the literal "null"
    own_id = headers.get_header("WARC-Record-ID")
    metadata = dict(doc.metadata, warc_record_id=own_id and clean_text(own_id), warc_date=date and clean_text(date),
                    warc_truncated=headers.get_header("WARC-Truncated"))
    return doc.replace(record_id=metadata["warc_record_id"], metadata=metadata)


def _read_payload(doc: Document, metadata: dict, block: bytes, headers, config: WarcConfig,
                  max_payload_bytes: int) -> StageResult:
    """The record's HTML page from its block (HTTP head, transfer and content encodings, charset)."""
    if len(block) > config.max_record_bytes:
        return doc.drop(STAGE, DropReason.TOO_LARGE, f"record block > {config.max_record_bytes} bytes")

    status, http_headers, body = _split_http(block)
    warc_type = headers.get_header("Content-Type")
    if http_headers is None:
        # Header-less archives (Wayback exports) put the payload type on the WARC record itself.
        content_type, declared = warc_type, [("warc", charset_from_content_type(warc_type))]
    else:
        content_type = http_headers.get("content-type")
        declared = [("http", charset_from_content_type(content_type))]
    if not content_type:
        content_type = headers.get_header("WARC-Identified-Payload-Type")  # Common Crawl's sniffed type
    mime = (content_type or "").split(";")[0].strip().lower()
    metadata.update(http_status=status, content_type=mime or None)

    if status is not None and not 200 <= status < 300:
        return doc.drop(STAGE, DropReason.HTTP_STATUS, str(status))
    if mime and mime not in HTML_TYPES:
        return doc.drop(STAGE, DropReason.NON_HTML, mime)
    if http_headers is not None:
        try:
            body = _decode_transfer(body, http_headers, max_payload_bytes)
        except PayloadTooLarge as exc:
            return doc.drop(STAGE, DropReason.TOO_LARGE, str(exc))
        except Exception as exc:
            return doc.drop(STAGE, DropReason.UNDECODABLE, f"{type(exc).__name__}: {exc}"[:300])
    if len(body) > max_payload_bytes:
        return doc.drop(STAGE, DropReason.TOO_LARGE, f"{len(body)} bytes of HTML > {max_payload_bytes}")
    if not body.strip():
        return doc.drop(STAGE, DropReason.EMPTY_PAYLOAD)
    if not mime and not _looks_like_html(body):
        return doc.drop(STAGE, DropReason.NON_HTML, "no content type and no HTML markup")

    if http_headers is not None:
        _header_facts(metadata, http_headers)
    html, charset, charset_source = decode_html(body, declared)
    metadata.update(charset=charset, charset_source=charset_source)
    control = _control_fraction(html[:_BINARY_SNIFF_CHARS])
    if control > config.max_control_char_fraction:
        return doc.drop(STAGE, DropReason.BINARY_CONTENT, f"{control:.0%} control characters")
    return doc.replace(html=html, metadata=metadata)


def _header_facts(metadata: dict, http_headers: dict[str, str]) -> None:
    metadata.update(last_modified=http_date(http_headers.get("last-modified")))
    optout = {name: http_headers[name][:OPTOUT_HEADER_CHARS] for name in OPTOUT_HEADERS if name in http_headers}
    if optout:  # read by the optout stage, which removes them: they are not a column
        metadata[OPTOUT_KEY] = optout


# HTTP headers by which a site reserves its pages from AI training or text and data mining (stages/optout/signals.py)
OPTOUT_HEADERS = ("x-robots-tag", "tdm-reservation", "tdm-policy")
OPTOUT_KEY = "http_optout"
OPTOUT_HEADER_CHARS = 1000
_REPEATABLE = frozenset({"x-robots-tag"})  # sent once per user agent: `X-Robots-Tag: GPTBot: noindex` then `... noai`


def _split_http(block: bytes) -> tuple[int | None, dict[str, str] | None, bytes]:
    """(status, lower-cased headers, body) if the block starts with an HTTP response head."""
    if not block.startswith(b"HTTP/"):
        return None, None, block
    ends = [i for i in (block.find(b"\r\n\r\n"), block.find(b"\n\n")) if i >= 0]
    if not ends:
        return None, None, block
    end = min(ends)
    sep = 4 if block[end:end + 4] == b"\r\n\r\n" else 2
    head, body = block[:end].decode("iso-8859-1"), block[end + sep:]
    lines = head.splitlines()
    parts = lines[0].split(None, 2)
    status = int_or_none(parts[1]) if len(parts) > 1 else None
    fields: dict[str, str] = {}
    repeated: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            name = name.strip().lower()
            fields[name] = value.strip()
            if name in _REPEATABLE:  # each repeat of a directive header counts: one per line
                repeated.setdefault(name, []).append(value.strip())
    fields.update((name, "\n".join(values)) for name, values in repeated.items())
    return status, fields, body


def _decode_transfer(body: bytes, http_headers: dict[str, str], limit: int) -> bytes:
    """Undo chunked transfer and gzip/deflate/br content encodings (wget stores bodies as sent;
    Common Crawl stores them decoded and renames the header). Raises ValueError when they cannot be undone."""
    if "chunked" in (http_headers.get("transfer-encoding") or "").lower():
        body = _dechunk(body)
    encoding = (http_headers.get("content-encoding") or "").strip().lower()
    if encoding in ("gzip", "x-gzip") and body.startswith(b"\x1f\x8b"):
        return _inflate(zlib.decompressobj(16 + zlib.MAX_WBITS), body, limit)
    if encoding == "deflate" and body:
        # "deflate" is zlib-wrapped per the RFC, raw deflate on many servers: try both
        wbits = zlib.MAX_WBITS if (body[0] & 0x0F) == 8 and int.from_bytes(body[:2], "big") % 31 == 0 else -zlib.MAX_WBITS
        return _inflate(zlib.decompressobj(wbits), body, limit)
    if encoding == "br":
        return _unbrotli(body, limit)
    return body  # identity, an unknown coding, or a body that was already decoded


class PayloadTooLarge(ValueError):
    pass


def _inflate(decompressor, body: bytes, limit: int) -> bytes:
    try:
        out = decompressor.decompress(body, limit + 1)  # a decompression bomb stops at the cap
    except zlib.error as exc:
        raise ValueError(f"zlib: {exc}") from exc
    if len(out) > limit:
        raise PayloadTooLarge(f"decoded payload > {limit} bytes")
    return out


def _unbrotli(body: bytes, limit: int) -> bytes:
    """Brotli in bounded steps: a 1 KB body can expand to gigabytes, so output stops at the cap."""
    import brotli  # declared in setup.py (>= 1.2 for output_buffer_limit); checked before a run

    decompressor, parts, size = brotli.Decompressor(), [], 0
    try:
        data = body
        while True:
            chunk = decompressor.process(data, output_buffer_limit=min(1 << 20, limit + 1 - size))
            data = b""
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"decoded payload > {limit} bytes")
            if decompressor.is_finished() or (not chunk and decompressor.can_accept_more_data()):
                break
    except brotli.error as exc:
        raise ValueError(f"brotli: {exc}") from exc
    if not decompressor.is_finished():
        raise ValueError("brotli: truncated stream")
    return b"".join(parts)


def _dechunk(body: bytes) -> bytes:
    out, pos = [], 0
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            raise ValueError("chunked body: missing chunk size line")
        size_field = body[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(size_field, 16)
        except ValueError:
            raise ValueError(f"chunked body: bad chunk size {size_field[:20]!r}") from None
        if size == 0:
            return b"".join(out)
        start = eol + 2
        if start + size > len(body):
            raise ValueError("chunked body: chunk runs past the end of the record")
        out.append(body[start:start + size])
        pos = start + size + 2  # skip the CRLF after the chunk


def _looks_like_html(body: bytes) -> bool:
    head = body[:2048].lower()
    return any(tag in head for tag in (b"<html", b"<!doctype html", b"<head", b"<body", b"<p>", b"<div"))


# Unicode category Cc is exactly U+0000-001F and U+007F-009F (stable by policy); the whitespace
# controls \t \n \v \f \r (U+0009-000D) are normal in text and not counted.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")


def _control_fraction(text: str) -> float:
    if not text:
        return 0.0
    return len(_CONTROL.findall(text)) / len(text)


def int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def record_spans(path: str) -> list[tuple[int, int]]:
    """(byte offset, length) of each record of a WARC file as stored (a gzip member each in a .warc.gz): the
    spans to copy to split a file or take some of its records, byte for byte."""
    spans = []
    with open(path, "rb") as fh:
        records = ArchiveIterator(fh)
        for record in records:
            _ = record.content_stream().read()
            spans.append((records.get_record_offset(), records.get_record_length()))
    return spans
