"""Common Crawl's WET files: the `conversion` records (the crawler's own plain text of each page) read as text
documents, which skip extraction and take the same path as any text source from language ID on.

Provenance: the document's `url` is `WARC-Target-URI`; `record_id` is the conversion record's own
`WARC-Record-ID`; `metadata.warc_record_id` is its `WARC-Refers-To`, the id of the page's `response` record in the
crawl's WARC files (what Common Crawl's index and a WARC run of the same pages name it by); `warc_date` the capture
date; `warc_filename` and `warc_offset` place the record in the WET file, so a ledger row points into it.
The WARC reader's caps apply (`warc.max_record_bytes`, `max_url_chars`, header lines): a WET file is a WARC file.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from stages.extraction.warc import RestUnreadable, WarcConfig, block_length_error, guarded_records, int_or_none
from stages.formats import _WARC_SUFFIXES
from stages.record import Document, DropReason, StageResult, clean_text, stable_id
from stages.table import READ, InputFormat, StageSpec

STAGE = "wet"
WET_SUFFIXES = (".wet", ".wet.gz")


def read_wet(stream: BinaryIO, *, source: str, filename: str = "", config: WarcConfig = WarcConfig(),
             count: Callable[[str], None] = lambda name: None) -> Iterator[StageResult]:
    """A Document (or Drop) for every `conversion` record; other record types are counted (`record.<type>`). A file
    that breaks mid-way yields one read_error drop for each damaged gzip member (reading resumes at the next) or
    for the rest of it."""
    try:
        for record, offset, oversized in guarded_records(stream, config, count):
            if record is None:  # bytes no member of which inflates (`oversized`: why)
                doc = Document(id=stable_id(STAGE, source, filename, str(offset), "skipped"), url="", source=source)
                yield doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}@{offset}: {oversized}")
                continue
            if not record.rec_type:
                count("record.malformed")
                doc = Document(id=stable_id(STAGE, source, filename, str(offset)), url="", source=source)
                yield doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}@{offset}: malformed record: no WARC-Type")
                continue
            count(f"record.{record.rec_type if record.rec_type in ('warcinfo', 'conversion') else 'other'}")
            if record.rec_type == "conversion":
                yield _document(record, source, filename, offset, config, oversized)
    except RestUnreadable as rest:
        yield _rest_dropped(filename, source, rest.offset, rest.detail)


def _document(record, source: str, filename: str, offset: int, config: WarcConfig,
              oversized: int | None) -> StageResult:
    headers = record.rec_headers
    url = clean_text((headers.get_header("WARC-Target-URI") or "").strip().strip("<>"))
    date, own_id = headers.get_header("WARC-Date"), headers.get_header("WARC-Record-ID")
    refers_to = headers.get_header("WARC-Refers-To")
    metadata = {"warc_filename": filename, "warc_offset": offset, "warc_date": date and clean_text(date),
                "warc_record_id": refers_to and clean_text(refers_to), "content_type": "text/plain",
                "charset": "utf-8", "charset_source": "wet"}
    doc = Document(id=stable_id(STAGE, source, filename, str(offset)), url=url[:config.max_url_chars], source=source,
                   record_id=own_id and clean_text(own_id), metadata=metadata)
    if oversized is not None:
        return doc.drop(STAGE, DropReason.HEADER_TOO_LONG,
                        f"a header line of {oversized} bytes > {config.max_header_line_bytes}")
    if len(url) > config.max_url_chars:
        return doc.drop(STAGE, DropReason.HEADER_TOO_LONG, f"URL of {len(url)} characters > {config.max_url_chars}")
    try:
        block = record.raw_stream.read(config.max_record_bytes + 1)
    except Exception as exc:  # a record we cannot read: ledger it, keep going
        return doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}@{offset}: {type(exc).__name__}: {exc}"[:500])
    if len(block) > config.max_record_bytes:
        return doc.drop(STAGE, DropReason.TOO_LARGE, f"record block > {config.max_record_bytes} bytes")
    wrong = block_length_error(record, block, int_or_none(headers.get_header("Content-Length")))
    if wrong is not None:
        return doc.drop(STAGE, *wrong)
    text = clean_text(block.decode("utf-8", errors="replace")).strip()
    if not text:
        return doc.drop(STAGE, DropReason.NO_TEXT, "a conversion record without text")
    return doc.replace(text=text)


def _rest_dropped(filename: str, source: str, offset: int, detail: str) -> StageResult:
    doc = Document(id=stable_id(STAGE, source, filename, str(offset), "rest"), url="", source=source)
    return doc.drop(STAGE, DropReason.READ_ERROR, f"{filename}@{offset} onwards: {detail}"[:500])


def sniff(path: str, head: bytes, inner: bytes) -> int:
    """Surer than the WARC reader's 2 (both start with `WARC/`): a conversion record in the first bytes, or a WET
    name; a damaged file named .wet[.gz] is still ours (1)."""
    named = path.lower().endswith(WET_SUFFIXES) and not path.lower().endswith(_WARC_SUFFIXES)
    if inner.startswith(b"WARC/"):
        return 3 if named or b"\nWARC-Type: conversion" in inner else 0
    return 1 if named else 0


def _read(stream: BinaryIO, *, source: str, filename: str, gzipped: bool, settings, count) -> Iterator[StageResult]:
    return read_wet(stream, source=source, filename=filename, config=settings.warc, count=count)


FORMATS = (InputFormat(name="wet", stage=STAGE, html=False, sniff=sniff, read=_read, label="WET"),)

SPEC = StageSpec(
    name=STAGE, order=3, runs=READ, about="Common Crawl WET conversion records -> text documents (no extraction)",
    reasons={
        DropReason.HEADER_TOO_LONG: "a WARC header line over `warc.max_header_line_bytes` or a URL over "
                                    "`warc.max_url_chars`",
        DropReason.TOO_LARGE: "a record block over `warc.max_record_bytes` (not read into memory)",
        DropReason.NO_TEXT: "a conversion record without text",
        DropReason.TRUNCATED_RECORD: "the file (or the record's gzip member) ends before the record's Content-Length",
        DropReason.READ_ERROR: "a record that cannot be read (detail: file@offset and error; a Content-Length that "
                               "ends inside the record's gzip member), or the rest of a broken file"})
