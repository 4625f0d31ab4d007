"""Common Crawl's WET files as input: conversion records are text documents with their provenance, the file goes
to the WET reader by its content (WET and WARC files both start with `WARC/`), and a broken file is ledgered."""
import gzip
import io

import pyarrow.parquet as pq

import refinery
from stages.extraction.warc import WarcConfig
from stages.extraction.wet import read_wet
from stages.formats import SNIFF_BYTES, sniff_format
from stages.record import Document, Drop
from tests.conftest import SHARED_DATA, WARC_DIR, needs_shared

WET = WARC_DIR / "cc_whirlwind_CC-MAIN-2024-22.warc.wet.gz"
WARC = WARC_DIR / "cc_whirlwind_CC-MAIN-2024-22.warc.gz"


def test_conversion_records_are_text_documents_with_their_provenance():
    counted = []
    with open(WET, "rb") as fh:
        (doc,) = list(read_wet(fh, source="cc", filename=WET.name, count=counted.append))
    assert isinstance(doc, Document) and doc.html is None
    assert doc.url == "https://an.wikipedia.org/wiki/Escopete" and doc.text.startswith("Escopete - Biquipedia")
    assert doc.record_id == "<urn:uuid:ba729a40-ff84-4085-8d48-0a5b2ee0c42d>"  # the conversion record's own id
    assert doc.metadata["warc_record_id"] == "<urn:uuid:2aabeff2-67f5-4608-8466-e87c6296e2b6>"  # WARC-Refers-To
    assert doc.metadata["warc_date"] == "2024-05-18T01:58:10Z" and doc.metadata["warc_filename"] == WET.name
    assert doc.metadata["warc_offset"] > 0 and sorted(counted) == ["record.conversion", "record.warcinfo"]


def test_the_reader_is_chosen_by_content_then_name():
    wet_head, warc_head = WET.read_bytes()[:SNIFF_BYTES], WARC.read_bytes()[:SNIFF_BYTES]
    assert sniff_format("pages.warc.wet.gz", wet_head) == "wet"
    assert sniff_format("renamed.warc.gz", wet_head) == "wet"      # its first record after warcinfo is a conversion
    assert sniff_format("renamed.wet.gz", warc_head) == "wet"      # a WARC named as WET: the name decides ...
    assert sniff_format("x.warc.gz", warc_head) == "warc"
    assert sniff_format("damaged.warc.wet.gz", b"\x1f\x8b garbage") == "wet"  # ... and a damaged one is ledgered there


def test_a_broken_wet_file_is_one_ledger_row_for_the_rest_and_caps_apply(tmp_path):
    raw = gzip.decompress(WET.read_bytes())
    cut = raw[:raw.index(b"Escopete") + 200]  # the conversion record ends before its Content-Length
    results = list(read_wet(io.BytesIO(cut), source="cc", filename="cut.wet"))
    assert len(results) == 1 and isinstance(results[0], Drop) and results[0].stage == "wet"
    capped = list(read_wet(io.BytesIO(raw), source="cc", filename="x.wet",
                           config=WarcConfig(max_record_bytes=100)))
    assert [d.reason for d in capped] == ["too_large"]


def test_a_wet_file_runs_end_to_end_beside_its_warc(tmp_path):
    result = refinery.run(inputs=[str(WET), str(WARC)], output=str(tmp_path / "out"), settings={"langid.threshold": 0.2})
    funnel = {row["stage"]: row for row in result.funnel}
    assert funnel["wet"]["in"] == 1 and funnel["warc"]["in"] == 1 and result.conservation["holds"]
    run = refinery.open_run(result.output)
    rows = run.table("train", columns=["url", "record_id", "metadata"]).to_pylist()
    from_wet = [r for r in rows if r["metadata"]["charset_source"] == "wet"]
    from_warc = [r for r in rows if r["metadata"]["charset_source"] != "wet"]
    assert from_wet and from_warc  # the same page twice: exact dedup does not fold them (the texts differ)
    assert from_wet[0]["metadata"]["warc_record_id"] == from_warc[0]["record_id"]  # WARC-Refers-To joins them
    compared = result.report["wet_vs_warc"]  # the report sets the two versions of each page side by side
    assert (compared["pages_in_both"], compared["kept_from_both"]) == (1, 1)
    chars = compared["mean_chars_kept_from_both"]
    assert chars["wet"] > chars["warc"] > 1000  # WET keeps the menus and footers extraction leaves out
    strict = refinery.run(inputs=[str(WET), str(WARC)], output=str(tmp_path / "strict")).report["wet_vs_warc"]
    assert strict["kept_from_neither"] == 1 and strict["dropped_because"] == {
        "warc": {"langid:lang_below_threshold": 1}, "wet": {"langid:lang_below_threshold": 1}}


@needs_shared
def test_an_older_wet_file_reads_every_conversion_record(tmp_path):
    path = SHARED_DATA / "warc" / "eugeneware_CC-MAIN-2014-35_3docs.warc.wet"
    with open(path, "rb") as fh:
        docs = list(read_wet(fh, source="cc", filename=path.name))
    assert len(docs) == 3 and all(isinstance(d, Document) and d.url.startswith("http") and d.text for d in docs)
    result = refinery.run(inputs=str(path), output=str(tmp_path / "out"))
    ledger = pq.read_table(tmp_path / "out" / "ledger").to_pylist()
    assert all(r["file"].endswith(".warc.wet") and r["offset"] is not None for r in ledger if r["stage"] != "read")
    assert result.conservation["read"] == 3


def test_a_conversion_record_whose_content_length_lies_is_one_row():
    """In its gzip member: too long, the text was kept shortened at the member's end; too short, the rest of the
    member was read as a damaged record. Now each is one row for the record, in the wet stage's terms."""
    import re

    plain = gzip.decompress(WET.read_bytes())
    at = plain.index(b"WARC-Type: conversion")
    members = [gzip.compress(part, mtime=0) for part in (plain[:plain.rindex(b"WARC/1.0", 0, at)],
                                                           plain[plain.rindex(b"WARC/1.0", 0, at):])]
    sound = list(read_wet(io.BytesIO(b"".join(members)), source="cc", filename="x.wet.gz"))
    assert [type(d) for d in sound] == [Document]
    for delta, reason in ((500, "truncated_record"), (-500, "read_error")):
        record = plain[plain.rindex(b"WARC/1.0", 0, at):]
        found = re.compile(rb"\r\nContent-Length: (\d+)\r\n").search(record)
        lied = record[:found.start(1)] + str(int(found.group(1)) + delta).encode() + record[found.end(1):]
        read = list(read_wet(io.BytesIO(members[0] + gzip.compress(lied, mtime=0)), source="cc", filename="x.wet.gz"))
        assert [(type(d), d.id, d.reason) for d in read] == [(Drop, sound[0].id, reason)]
        assert "gzip member" in read[0].detail
