"""bench/crawl_warc.py, small: a crawl-like WARC from the bundled real pages has Common Crawl's layout, every kind of
record the bench asks for, the same bytes from the same seed, and every response accounted for by the WARC reader."""
from __future__ import annotations

import hashlib

from warcio.archiveiterator import ArchiveIterator

from bench.crawl_warc import SHARES, TRUNCATE_AT, generate
from stages.extraction.warc import read_warc
from stages.record import Document
from tests.conftest import WARC_DIR

PAGES = [str(WARC_DIR / "*.warc.gz")]
# every kind often enough to show in 150 responses
SHARES_SMALL = {kind: 0.06 for kind in SHARES}


def _make(tmp_path, name: str, seed: int) -> tuple[str, dict]:
    path = str(tmp_path / name)
    return path, generate(path, 150, seed, PAGES, level=1, shares=SHARES_SMALL)


def test_layout_kinds_and_the_same_bytes_from_the_same_seed(tmp_path):
    path, found = _make(tmp_path, "a.warc.gz", 7)
    again, _ = _make(tmp_path, "b.warc.gz", 7)
    other, _ = _make(tmp_path, "c.warc.gz", 8)
    digest = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in (path, again, other)]
    assert digest[0] == digest[1] != digest[2]
    assert found["templates"] >= 40 and found["records"]["response"] + found["records"]["revisit"] == 150
    assert set(found["responses_by_kind"]) == set(SHARES) | {"article"}

    with open(path, "rb") as fh:
        records = [(r.rec_type, r.rec_headers, r.http_headers, r.content_stream().read())
                   for r in ArchiveIterator(fh)]
    assert records[0][0] == "warcinfo"
    triplets = [r for r in records[1:] if r[0] != "revisit"]
    for request, response, metadata in zip(triplets[0::3], triplets[1::3], triplets[2::3]):
        assert (request[0], response[0], metadata[0]) == ("request", "response", "metadata")
        rid = response[1].get_header("WARC-Record-ID")
        assert request[1].get_header("WARC-Concurrent-To") == rid == metadata[1].get_header("WARC-Concurrent-To")
        assert response[1].get_header("WARC-Identified-Payload-Type")
    responses = [r for r in records if r[0] == "response"]
    statuses = {r[2].get_statuscode() for r in responses}
    assert {"200", "301", "404"} <= statuses
    truncated = [r for r in responses if r[1].get_header("WARC-Truncated") == "length"]
    assert truncated and all(len(r[3]) == TRUNCATE_AT for r in truncated)
    assert all(len(r[3]) <= TRUNCATE_AT for r in responses)
    types = {r[1].get_header("WARC-Identified-Payload-Type") for r in responses}
    assert "text/html" in types and len(types) >= 3  # feeds, JSON, PDF or plain text besides pages
    revisits = [r for r in records if r[0] == "revisit"]
    ids = {r[1].get_header("WARC-Record-ID") for r in responses}
    assert revisits and all(r[1].get_header("WARC-Refers-To") in ids for r in revisits)
    payloads = [hashlib.sha1(r[3]).digest() for r in responses if r[2].get_statuscode() == "200"]
    assert len(set(payloads)) < len(payloads)  # exact copies: one payload at several URLs

    with open(path, "rb") as fh:
        read = list(read_warc(fh, source="crawl", filename="a.warc.gz"))
    assert len(read) == sum(1 for r in responses)  # every response read once: a page or a ledgered drop
    drops = {d.reason for d in read if not isinstance(d, Document)}
    assert {"non_html", "http_status"} <= {str(getattr(r, "value", r)) for r in drops}
    pages = [d for d in read if isinstance(d, Document)]
    assert any(d.metadata.get("warc_truncated") == "length" for d in pages)
