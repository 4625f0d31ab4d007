"""WARC reading on the real bundled files and on crafted hostile records."""
import collections
import gzip
import io

import pytest

from stages.extraction.warc import WarcConfig, read_warc
from stages.record import Document, Drop, DropReason
from tests.conftest import CC_EXCERPT, CLIPPED, WARC_DIR, WARCIO_EXAMPLE, WAYBACK, pathological_warc


def read_all(path, **kw):
    counts = collections.Counter()
    with open(path, "rb") as fh:
        results = list(read_warc(fh, source="web", filename=str(path), count=lambda n: counts.update([n]), **kw))
    return results, counts


def test_common_crawl_excerpt_yields_every_response_and_counts_other_records():
    results, counts = read_all(CC_EXCERPT)
    assert counts == {"record.warcinfo": 1, "record.request": 17, "record.response": 16, "record.metadata": 16}
    docs = [r for r in results if isinstance(r, Document)]
    assert len(results) == 16 and len(docs) == 16
    assert len({d.id for d in docs}) == 16
    for d in docs:
        assert d.html and "<" in d.html
        assert d.metadata["http_status"] == 200
        assert d.metadata["content_type"] in ("text/html", "application/xhtml+xml")
        assert d.metadata["warc_record_id"].startswith("<urn:uuid:")
    # GB2312/GBK-era Chinese pages decode as Chinese, not mojibake
    chinese = [d for d in docs if d.metadata["charset"] == "gb18030"]
    assert chinese and all(sum("\u4e00" <= ch <= "\u9fff" for ch in d.html) > 100 for d in chinese)


def test_ids_are_stable_across_reads():
    first = [r.id for r in read_all(CC_EXCERPT)[0]]
    assert first == [r.id for r in read_all(CC_EXCERPT)[0]]


def test_truncated_record_goes_to_ledger_with_byte_counts():
    results, counts = read_all(CLIPPED)
    assert counts == {"record.response": 1}
    (drop,) = results
    assert isinstance(drop, Drop)
    assert drop.stage == "warc" and drop.reason is DropReason.TRUNCATED_RECORD
    assert "of 88275 bytes" in drop.detail
    assert drop.url.startswith("http://www.houstonpress.com/")


def test_wayback_records_without_http_block_null_date_and_mixed_charsets():
    results, counts = read_all(WAYBACK)
    assert counts == {"record.warcinfo": 1, "record.response": 128}
    docs = [r for r in results if isinstance(r, Document)]
    assert len(docs) == 128
    assert all(d.metadata["warc_date"] is None for d in docs)           # "WARC-Date: null"
    assert all(d.metadata["http_status"] is None for d in docs)         # no HTTP header block
    assert len({d.id for d in docs}) == 128
    charsets = collections.Counter(d.metadata["charset"] for d in docs)
    assert {"utf-8", "cp1252", "cp1250"} <= set(charsets)
    assert collections.Counter(d.metadata["charset_source"] for d in docs)["warc"] >= 120
    # warcio's own parser takes this page's "<!DOCTYPE HTML PUBLIC ..." line for an HTTP status line and
    # silently eats the page head; ours keeps the block whole.
    jean = next(d for d in docs if d.url.endswith("calhotels.us:80/nevada/jean.html"))
    assert jean.html.startswith('<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN"')


def test_revisit_request_and_warcinfo_records_are_counted_not_emitted():
    results, counts = read_all(WARCIO_EXAMPLE)
    assert counts == {"record.warcinfo": 2, "record.request": 2, "record.response": 1, "record.revisit": 1}
    assert len(results) == 1 and isinstance(results[0], Document)


def test_every_bundled_file_reads_without_raising():
    total = 0
    for path in sorted(WARC_DIR.glob("*.warc.gz")):
        results, counts = read_all(path)
        assert len(results) == counts["record.response"]
        total += len(results)
    assert total == 185


def test_hostile_records_end_in_the_expected_reason(tmp_path):
    expected = pathological_warc(tmp_path / "hostile.warc.gz")
    results, _ = read_all(tmp_path / "hostile.warc.gz")
    by_url = {r.url: r for r in results}
    assert set(by_url) == set(expected)
    for url, expect in expected.items():
        r = by_url[url]
        if expect is not None and expect[0] == "warc":
            assert isinstance(r, Drop) and (r.stage, str(r.reason)) == expect, url
        else:
            assert isinstance(r, Document), (url, r)
    # wget stores chunked + gzip bodies as sent: they must come out as the page itself
    assert by_url["http://t.example/wget-chunked-gzip"].html == by_url["http://t.example/good"].html


def test_record_over_the_memory_cap_is_not_read(tmp_path):
    expected = pathological_warc(tmp_path / "hostile.warc.gz")
    results, _ = read_all(tmp_path / "hostile.warc.gz", config=WarcConfig(max_record_bytes=1_000_000))
    huge = next(r for r in results if r.url.endswith("huge-20mb"))
    assert isinstance(huge, Drop) and huge.reason is DropReason.TOO_LARGE and huge.stage == "warc"
    assert len(results) == len(expected)


@pytest.mark.parametrize("garbage", [b"this is not a WARC file at all\n" * 10, gzip.compress(b"WARC/1.0\r\nnonsense", mtime=0)])
def test_unreadable_file_is_one_ledger_entry_not_a_crash(garbage):
    results = list(read_warc(io.BytesIO(garbage), source="web", filename="bad.warc.gz"))
    assert len(results) == 1
    assert isinstance(results[0], Drop) and results[0].reason is DropReason.READ_ERROR
    assert "bad.warc.gz@" in results[0].detail


def test_garbage_after_good_records_keeps_the_good_ones():
    data = CC_EXCERPT.read_bytes() + b"\x00\x01garbage tail" * 100
    results = list(read_warc(io.BytesIO(data), source="web", filename="tail.warc.gz"))
    docs = [r for r in results if isinstance(r, Document)]
    assert len(docs) == 16
    assert [r.reason for r in results if isinstance(r, Drop)] == [DropReason.READ_ERROR]


def _raw_record(url: str, body: bytes, date: str = "null") -> bytes:
    head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: {url}\r\nWARC-Date: {date}\r\n"
            f"Content-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head + body + b"\r\n\r\n"


def test_records_without_record_id_get_distinct_stable_ids():
    page = b"<html><body><p>first capture</p></body></html>"
    data = _raw_record("http://a.example/", page) + _raw_record("http://a.example/", page.replace(b"first", b"second"))
    first = list(read_warc(io.BytesIO(data), source="web"))
    again = list(read_warc(io.BytesIO(data), source="web"))
    assert [type(r) for r in first] == [Document, Document]
    assert first[0].id != first[1].id
    assert [r.id for r in first] == [r.id for r in again]
    assert first[0].metadata["warc_record_id"] is None and first[0].metadata["warc_date"] is None


def test_control_characters_are_exactly_unicode_category_cc():
    import sys
    import unicodedata

    from stages.extraction.warc import _CONTROL, _control_fraction

    whitespace = "\t\n\r\f\v"
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        expected = ch not in whitespace and unicodedata.category(ch) == "Cc"
        assert (_CONTROL.match(ch) is not None) == expected, hex(code)
    assert _control_fraction("ab\x00\x01\t\n\x85é") == 3 / 8
    assert _control_fraction("") == 0.0


def test_bench_payload_type_copy_changes_only_that_header(tmp_path):
    """bench/vs_datatrove.py --payload-types: the copy carries WARC-Identified-Payload-Type on every response
    record with an HTTP Content-Type, and reads as the same documents."""
    from warcio.archiveiterator import ArchiveIterator

    from bench.vs_datatrove import with_payload_types

    copy = tmp_path / "typed.warc.gz"
    added = with_payload_types(str(CC_EXCERPT), str(copy))
    with open(copy, "rb") as fh:
        typed = [r.rec_headers.get_header("WARC-Identified-Payload-Type") for r in ArchiveIterator(fh)
                 if r.rec_type == "response"]
    assert added == len(typed) > 10 and all(typed) and "text/html" in typed
    (before, _), (after, _) = read_all(CC_EXCERPT), read_all(copy)
    assert [(d.url, d.html) if isinstance(d, Document) else d.reason for d in before] == \
        [(d.url, d.html) if isinstance(d, Document) else d.reason for d in after]


@pytest.mark.parametrize("path", [CC_EXCERPT, CLIPPED, WAYBACK, WARCIO_EXAMPLE], ids=lambda p: p.name)
def test_isal_inflating_reads_the_same_records_as_warcio_as_shipped(path):
    """The reader inflates gzip members with ISA-L in 64 KB blocks: every record's type, offset and raw block is
    what warcio with zlib and its own block size gives, on each bundled file."""
    from warcio.archiveiterator import ArchiveIterator

    from stages.extraction.warc import BoundedInflater, archive_records

    def records(fast: bool):
        with open(path, "rb") as fh:
            it = archive_records(fh) if fast else ArchiveIterator(fh, no_record_parse=True)
            if fast:
                assert type(it.reader.decompressor) is BoundedInflater
            return [(r.rec_type, it.offset, r.content_stream().read()) for r in it]

    shipped = records(fast=False)
    assert shipped and records(fast=True) == shipped


def test_a_member_of_one_repeated_byte_is_inflated_a_few_megabytes_at_a_time(tmp_path):
    """A 64 MiB header line of one byte compresses to ~64 KB: warcio inflated each 64 KB block whole (~65 MB at
    once, held twice), which under an address-space limit failed inside ISA-L and ended the file. Now no inflate
    call gives more than INFLATE_OUT_BYTES: the records around it, offsets included, are what warcio reads, and
    Python's allocations stay a fraction of the line."""
    import tracemalloc

    from warcio.archiveiterator import ArchiveIterator

    from stages.extraction.warc import INFLATE_OUT_BYTES, archive_records
    from tests.reliability.hostile import huge_url_record, page, warc_response

    path = tmp_path / "bomb.warc.gz"
    path.write_bytes(warc_response("http://good.example/1", page(1)) + huge_url_record(64 << 20) +
                     warc_response("http://good.example/2", page(2)))

    def offsets(it):
        return [(r.rec_type, it.offset) for r in it]

    with open(path, "rb") as fh:
        shipped = offsets(ArchiveIterator(fh, no_record_parse=True))
    tracemalloc.start()
    try:
        with open(path, "rb") as fh:
            read = [(d.url, d.reason if isinstance(d, Drop) else None) for d in read_warc(fh, source="web")]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    with open(path, "rb") as fh:
        assert offsets(archive_records(fh)) == shipped and len(shipped) == 3
    assert [url for url, _ in read][::2] == ["http://good.example/1", "http://good.example/2"]
    assert read[1][1] == DropReason.HEADER_TOO_LONG
    assert peak < 4 * INFLATE_OUT_BYTES, peak  # was > 128 MB


@pytest.mark.parametrize("path", [WAYBACK, CC_EXCERPT], ids=lambda p: p.name)
def test_a_damaged_gzip_member_costs_its_own_record_not_the_rest_of_the_file(path):
    """One byte flipped in the first member, in a member's body, in a member's gzip header and in a member's CRC
    (a cut download glued to the next, a bad disk block): each damaged record is one read_error row, and reading
    resumes at the next member, so every other record is read as from the sound file, with the same id. It was
    one row for the rest of the file: a bit in record 5 of the 1,033-page bench WARC lost 1,027 pages."""
    from stages.extraction.warc import document_id, record_spans

    with open(path, "rb") as fh:
        sound = list(read_warc(fh, source="web", filename=path.name))
    spans = record_spans(str(path))
    data = bytearray(path.read_bytes())
    damage = {0: 0.3, 13: 0.5, 27: 0.0, 41: 0.999}  # record -> where in its member (0: the gzip magic, 0.999: the CRC)
    for k, where in damage.items():
        offset, length = spans[k]
        data[offset + int(length * where)] ^= 0xFF
    read = list(read_warc(io.BytesIO(bytes(data)), source="web", filename=path.name))
    damaged = {spans[k][0] for k in damage}
    lost = {document_id("web", path.name, offset) for offset in damaged}
    rows = [d for d in read if isinstance(d, Drop) and d.reason == DropReason.READ_ERROR and d.id not in
            {s.id for s in sound if s.id not in lost}]
    assert sorted(int(d.detail.split("@")[1].split(":")[0]) for d in rows) == sorted(damaged)
    assert all("onwards" not in d.detail for d in rows)
    assert [d for d in read if d not in rows] == [d for d in sound if d.id not in lost]


def test_a_record_without_a_warc_type_is_one_row_and_the_next_record_is_read():
    from tests.reliability.hostile import gzip_member, page, warc_response

    untyped = gzip_member([b"WARC/1.0\r\nWARC-Record-ID: <urn:uuid:untyped>\r\nContent-Length: 0\r\n\r\n\r\n\r\n"])
    data = untyped + warc_response("http://good.example/1", page(1))
    read = list(read_warc(io.BytesIO(data), source="web", filename="f.warc.gz"))
    assert [type(d).__name__ for d in read] == ["Drop", "Document"] and read[1].url == "http://good.example/1"
    assert read[0].reason == DropReason.READ_ERROR and read[0].detail == "f.warc.gz@0: malformed record: no WARC-Type header"


@pytest.mark.parametrize("path", [WAYBACK, CC_EXCERPT], ids=lambda p: p.name)
def test_a_damaged_record_header_in_an_uncompressed_warc_costs_that_record(path, tmp_path):
    """An uncompressed WARC (a `.warc`, as some crawlers write it) whose first record, a middle one and the last
    have a damaged first line: each is one read_error row (the last one's says "onwards": no record follows) and
    reading resumes at the next line that starts a record, every other record read with its sound id. It was one
    row for the rest of the file."""
    from stages.extraction.warc import document_id, record_spans

    plain = tmp_path / path.name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    spans = record_spans(str(plain))
    with open(plain, "rb") as fh:
        sound = list(read_warc(fh, source="web", filename=plain.name))
    data = bytearray(plain.read_bytes())
    damaged = sorted(spans[k][0] for k in (0, len(spans) // 2, len(spans) - 1))
    for offset in damaged:
        assert data[offset:offset + 5] == b"WARC/"
        data[offset:offset + 4] = b"XARC"
    read = list(read_warc(io.BytesIO(bytes(data)), source="web", filename=plain.name))
    lost = {document_id("web", plain.name, offset) for offset in damaged}
    rows = [d for d in read if isinstance(d, Drop) and d.reason == DropReason.READ_ERROR and d.id not in
            {s.id for s in sound}]
    assert [d.detail.split(":")[0] for d in rows] == [f"{plain.name}@{damaged[0]}", f"{plain.name}@{damaged[1]}",
                                                       f"{plain.name}@{damaged[2]} onwards"]
    assert "reading resumed at the next record" in rows[0].detail
    assert [d for d in read if d not in rows] == [d for d in sound if d.id not in lost]


@pytest.mark.parametrize("delta", [200_000, 3_000, -3_000, "line-break"],
                         ids=["swallows-records", "too-long", "too-short", "too-short-at-a-line-break"])
def test_an_uncompressed_record_whose_content_length_lies_is_one_row(delta, tmp_path):
    """An uncompressed record whose Content-Length runs past its block swallowed the records after it into its page
    (+200 KB on one record of the Common Crawl excerpt: 6 of its 16 responses gone, one row for the bytes after);
    one that stops inside its block left a shortened page, also where it stops on a line break (the end of the
    HTTP headers here), which looked like the end of a block followed by a damaged record header.
    Now the block must end where a record or the file does: the record is one row, reading resumes at the next
    record, and every other record is read as from the sound file."""
    import re

    from stages.extraction.warc import document_id, record_spans

    plain = tmp_path / "cc.warc"
    plain.write_bytes(gzip.decompress(CC_EXCERPT.read_bytes()))
    with open(plain, "rb") as fh:
        sound = list(read_warc(fh, source="web", filename=plain.name))
    spans = record_spans(str(plain))
    data = bytearray(plain.read_bytes())
    offset = next(o for o, length in spans[3:] if length > 20_000 and data[o:o + 200].find(b"WARC-Type: response") > 0)
    found = re.compile(rb"\r\nContent-Length: (\d+)\r\n").search(bytes(data), offset)
    if delta == "line-break":  # the block ends where the HTTP headers' blank line starts
        block = data.find(b"\r\n\r\n", offset) + 4
        delta = data.find(b"\r\n\r\n", block) - block - int(found.group(1))
        assert delta < 0
    # zero-padded to the same width: the records after it keep their offsets, so their ids
    data[found.start(1):found.end(1)] = str(int(found.group(1)) + delta).zfill(len(found.group(1))).encode()
    read = list(read_warc(io.BytesIO(bytes(data)), source="web", filename=plain.name))
    rows = [d for d in read if isinstance(d, Drop) and d.reason == DropReason.READ_ERROR]
    assert len(rows) == 1 and rows[0].detail.startswith(f"{plain.name}@{offset}: bytes {offset}-")
    assert "does not end at a record boundary" in rows[0].detail
    assert [d for d in read if d not in rows] == [d for d in sound if d.id != document_id("web", plain.name, offset)]


@pytest.mark.parametrize("delta", [200_000, 3_000, -3_000, "line-break"],
                         ids=["far-too-long", "too-long", "too-short", "too-short-at-a-line-break"])
def test_a_gzip_members_record_whose_content_length_lies_is_one_row(delta):
    """A record's gzip member is where its block must end. One whose Content-Length stops short of it was kept as a
    shortened page, the rest of the member read as a damaged next record, and the sound member after it skipped as
    that damage (one more row, warcio's warning on stderr); stopping at the HTTP headers' blank line, it was
    `non_html`. One that runs past it said "file ends". Now the record is one row that names the member, reading
    goes on at the next member, and every other record is read as from the sound file (same URLs, same HTML)."""
    import re

    from stages.extraction.warc import document_id, record_spans

    raw = CC_EXCERPT.read_bytes()
    members = [raw[o:o + n] for o, n in record_spans(str(CC_EXCERPT))]
    sound = list(read_warc(io.BytesIO(raw), source="web", filename="cc.warc.gz"))
    index = next(i for i, m in enumerate(members) if i >= 3 and len(gzip.decompress(m)) > 20_000
                 and b"WARC-Type: response" in gzip.decompress(m)[:300])
    plain = bytearray(gzip.decompress(members[index]))
    found = re.compile(rb"\r\nContent-Length: (\d+)\r\n").search(bytes(plain))
    if delta == "line-break":  # the block ends where the HTTP headers' blank line starts
        block = plain.find(b"\r\n\r\n") + 4
        delta = plain.find(b"\r\n\r\n", block) - block - int(found.group(1))
    plain[found.start(1):found.end(1)] = str(int(found.group(1)) + delta).zfill(len(found.group(1))).encode()
    data = b"".join(members[:index]) + gzip.compress(bytes(plain), mtime=0) + b"".join(members[index + 1:])
    read = list(read_warc(io.BytesIO(data), source="web", filename="cc.warc.gz"))
    lied = document_id("web", "cc.warc.gz", sum(len(m) for m in members[:index]))
    rows = [d for d in read if d.id == lied]
    assert len(rows) == 1 and isinstance(rows[0], Drop) and "gzip member" in rows[0].detail
    assert rows[0].reason == (DropReason.TRUNCATED_RECORD if delta > 0 else DropReason.READ_ERROR)
    as_read = [(type(d).__name__, d.url, getattr(d, "html", None), getattr(d, "reason", None)) for d in read
               if d is not rows[0]]
    assert as_read == [(type(d).__name__, d.url, getattr(d, "html", None), getattr(d, "reason", None)) for d in sound
                       if d.id != lied]
