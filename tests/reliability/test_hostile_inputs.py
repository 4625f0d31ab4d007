"""One job over every hostile input a real crawl or a user's folder holds, run as a user runs it (a child
process under a 2 GiB address-space limit). Each input is built here; each must end where it belongs,
and conservation is checked by counting Parquet rows against the records we wrote, not from the report."""
import collections
import json
import os
import shutil

import pytest

from tests.reliability.hostile import (
    PARQUET_BOMB,
    big_html_record,
    brotli_bomb,
    dictionary_bomb,
    huge_url_record,
    no_filters_config,
    page,
    prose,
    read_output,
    refinery,
    warc_record_of_type,
    warc_response,
    write_jsonl,
)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    web, books, code = root / "web", root / "books", root / "code"
    for d in (web, books, code):
        d.mkdir()
    expected = collections.Counter()  # records written per source: the independent count

    # WARC: good pages around a 256 MiB header line, 80 pages of 20 MB HTML (one compressed record,
    # repeated), a brotli bomb, a brotli page, charset=undefined, a URL over the cap.
    import brotli

    big = big_html_record("http://big.example/page", 20 * 1024 * 1024)
    records = [warc_response("http://good.example/1", page(1)), huge_url_record(256 * 1024 * 1024),
               warc_response("http://good.example/2", page(2)), *([big] * 80),
               warc_response("http://bomb.example/br", brotli_bomb(1024 * 1024 * 1024),
                             extra_http=[("Content-Encoding", "br")]),
               warc_response("http://br.example/ok", brotli.compress(page(3)), extra_http=[("Content-Encoding", "br")]),
               warc_response("http://undefined.example/", page(4), content_type="text/html; charset=undefined"),
               warc_response("http://long.example/" + "u" * 9000, page(5)),
               # UTF-7 (which browsers refuse: it hides markup from filters) decodes +AGQAaQBl- as "die"
               warc_response("http://utf7.example/", page(6).replace(b"</p>", b" +AGQAaQBl-</p>", 1),
                             content_type="text/html; charset=utf-7")]
    (web / "crawl.warc.gz").write_bytes(b"".join(records) + warc_record_of_type("evil.key\u00e9"))
    expected["web"] += len(records)  # the record of an unknown type is counted, not read
    # Not files to read: a FIFO (opening it blocks forever), a symlink loop, an empty file: one `read` row each
    os.mkfifo(web / "fifo.warc.gz")
    (web / "loop.warc.gz").symlink_to("loop.warc.gz")
    (web / "empty.warc.gz").write_bytes(b"")
    expected["web"] += 3

    # JSONL books under a glob with no suffix (`books=DIR/*`): ids 1..N in two files (the usual case),
    # one real near-duplicate pair across them, an invalid UTF-8 byte on line 6 of 40, a lone surrogate
    # in id/url/text, a 100 MB line (gzip), and a file that is not text at all.
    first = [{"id": i + 1, "text": prose(i)} for i in range(5)]
    second = [{"id": i + 1, "text": prose(i + 5)} for i in range(4)]
    near_copy = prose(0).replace(" the ", " a ", 1)
    assert near_copy != prose(0)
    second.append({"id": 5, "text": near_copy})
    write_jsonl(books / "part-a", first)
    write_jsonl(books / "part-b.jsonl", second)
    expected["books"] += 10
    import gzip
    for name, offset, pack in (("bad-utf8.jsonl", 10, bytes), ("bad-utf8-gz", 50, gzip.compress)):
        lines = [json.dumps({"id": f"l{i}", "text": prose(i + offset)}).encode() for i in range(40)]
        lines[5] = lines[5][:20] + b"\xff" + lines[5][20:]
        (books / name).write_bytes(pack(b"\n".join(lines) + b"\n"))
    expected["books"] += 80
    write_jsonl(books / "surrogates.jsonl", [{"id": "x\ud83d", "url": "http://s.example/\udc00", "text": prose(90) + " \ud83d"}])
    expected["books"] += 1
    huge_line = json.dumps({"id": "huge", "text": "x" * (100 * 1024 * 1024)}).encode() + b"\n"
    (books / "huge.jsonl.gz").write_bytes(gzip.compress(huge_line + json.dumps({"id": "after", "text": prose(91)}).encode() + b"\n", 1))
    expected["books"] += 2
    (books / "notes.txt").write_text("not a record format\n")
    expected["books"] += 1  # one `read` ledger row for the file
    # a 2 KB line of 1,000 nested arrays (json.loads raises RecursionError, which is no ValueError)
    nested = b"[" * 1000 + b"]" * 1000
    (books / "nested.jsonl").write_bytes(json.dumps({"id": "n1", "text": prose(94)}).encode() + b"\n" +
                                         b'{"id": "n2", "text": "deep", "x": ' + nested + b"}\n" +
                                         json.dumps({"id": "n3", "text": prose(95)}).encode() + b"\n")
    expected["books"] += 3

    # Parquet code source without a suffix either
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"id": [1, 2], "text": [prose(92), prose(93)]}), code / "shard-0")
    expected["code"] += 2
    # Parquet that decodes to 1.9 GB each: one page of 64 x 30 MiB (62 KB on disk), and 64 rows sharing one
    # 30 MiB dictionary value (2 KB on disk; its footer says 30 MB)
    shutil.copy(PARQUET_BOMB, code / "shard-1")
    dictionary_bomb(code / "shard-2")
    expected["code"] += 128

    out = root / "out"
    config = no_filters_config(root / "cfg.yaml", "pii: {enabled: true}\n")
    proc = refinery(["run", "--input", str(web / "*"), "--source", f"books={books}/*", "--source", f"code={code}/*",
                     "--output", out, "--config", config])
    rows, drops = read_output(out)
    return proc, out, rows, drops, expected


def test_the_run_succeeds_under_2_gib(hostile_run):
    proc, out, *_ = hostile_run
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr
    assert (out / "manifest.json").exists()


def test_every_record_written_is_a_row_or_a_ledger_entry(hostile_run):
    _, out, rows, drops, expected = hostile_run
    by_source = collections.Counter(r["source"] for r in rows) + collections.Counter(d["source"] for d in drops)
    assert by_source == expected
    ids = [r["id"] for r in rows] + [d["id"] for d in drops]
    assert len(ids) == len(set(ids)), "internal ids must be unique by construction"
    report = json.loads((out / "report.json").read_text())
    assert report["conservation"]["holds"] and report["documents_read"] == sum(expected.values())


def test_colliding_record_ids_remove_exactly_the_real_near_duplicate(hostile_run):
    _, _, rows, drops, _ = hostile_run
    dedup = [d for d in drops if d["stage"] in ("exact_dedup", "near_dedup")]
    assert [d["reason"] for d in dedup] == ["near_duplicate"], dedup
    kept_books = [r for r in rows if r["source"] == "books" and r["record_id"] in {"1", "2", "3", "4", "5"}]
    assert len(kept_books) == 9  # ten records with ids 1..5 twice; one of the pair removed
    texts = {r["text"] for r in kept_books}
    assert (prose(0) in texts) != (prose(0).replace(" the ", " a ", 1) in texts)


def test_a_bad_line_is_one_ledger_row_and_every_good_line_is_read(hostile_run):
    _, _, rows, drops, _ = hostile_run
    for name in ("bad-utf8.jsonl", "bad-utf8-gz"):
        bad = [d for d in drops if name in (d["detail"] or "")]
        assert len(bad) == 1 and bad[0]["reason"] == "read_error" and "line 6" in bad[0]["detail"], bad
    kept = collections.Counter(r["record_id"] for r in rows if r["record_id"] and r["record_id"].startswith("l"))
    assert kept == {f"l{i}": 2 for i in range(40) if i != 5}  # both files: 39 good lines each


def test_lone_surrogates_are_cleaned_at_reading(hostile_run):
    _, _, rows, _, _ = hostile_run
    row = next(r for r in rows if r["record_id"] and r["record_id"].startswith("x"))
    assert row["record_id"] == "x\ufffd" and row["url"] == "http://s.example/\ufffd" and row["text"].endswith("\ufffd")


def test_size_caps_ledger_oversized_records_at_reading(hostile_run):
    _, _, rows, drops, _ = hostile_run
    reasons = collections.Counter((d["stage"], d["reason"]) for d in drops)
    assert reasons[("warc", "header_too_long")] == 2    # the 256 MiB header line and the 9,000-character URL
    assert reasons[("warc", "too_large")] == 81         # 80 pages of 20 MB HTML + the brotli bomb
    assert reasons[("read_text", "too_large")] == 129   # the 100 MB JSONL line, 128 Parquet rows ...
    assert any(r["record_id"] == "after" for r in rows)  # ... and the line after it is read
    urls = {r["url"] for r in rows}
    assert {"http://good.example/1", "http://good.example/2", "http://br.example/ok"} <= urls


def test_charset_undefined_page_is_decoded(hostile_run):
    _, _, rows, drops, _ = hostile_run
    assert any(r["url"] == "http://undefined.example/" for r in rows) or \
        any(d["url"] == "http://undefined.example/" for d in drops if d["stage"] != "warc")


def test_a_file_that_is_no_record_file_is_one_read_row(hostile_run):
    """No known format, empty, a FIFO (never opened: it would block forever), a symlink loop: one `read` row each,
    naming the file."""
    _, _, _, drops, _ = hostile_run
    unknown = {d["detail"].split(":", 1)[0]: d for d in drops if d["stage"] == "read"}
    assert set(unknown) == {"books/notes.txt", "web/empty.warc.gz", "web/fifo.warc.gz", "web/loop.warc.gz"}, unknown
    assert all(d["reason"] == "read_error" for d in unknown.values())
    assert "not a WARC, WET, JSONL or Parquet file" in unknown["books/notes.txt"]["detail"]
    assert "empty file" in unknown["web/empty.warc.gz"]["detail"]
    assert "not a regular file (a FIFO)" in unknown["web/fifo.warc.gz"]["detail"]
    assert "symbolic link" in unknown["web/loop.warc.gz"]["detail"]


def test_a_deeply_nested_json_line_is_one_ledger_row(hostile_run):
    _, _, rows, drops, _ = hostile_run
    nested = [d for d in drops if "nested.jsonl" in (d["detail"] or "")]
    assert len(nested) == 1 and nested[0]["reason"] == "read_error" and "line 2" in nested[0]["detail"]
    assert "nested too deeply" in nested[0]["detail"]
    assert {r["record_id"] for r in rows} >= {"n1", "n3"}


def test_parquet_that_decodes_to_gigabytes_is_ledgered_from_page_headers_and_lengths(hostile_run):
    _, _, _, drops, _ = hostile_run
    bomb = [d for d in drops if (d["detail"] or "").startswith("code/shard-1 ")]
    shared = [d for d in drops if (d["detail"] or "").startswith("code/shard-2 ")]
    assert len(bomb) == 64 and all(d["reason"] == "too_large" and "holds a page of 2013266183 bytes" in d["detail"]
                                   for d in bomb), bomb[:2]
    assert len(shared) == 64 and all(d["reason"] == "too_large" and "31457280 bytes > 16777216" in d["detail"]
                                     for d in shared), shared[:2]


def test_input_values_do_not_become_report_keys_and_utf7_is_not_honoured(hostile_run):
    _, out, rows, _, _ = hostile_run
    report = json.loads((out / "report.json").read_text())
    assert report["warc_records_by_type"].get("other") == 1 and not any("evil" in k for k in report["warc_records_by_type"])
    utf7 = next(r for r in rows if r["url"] == "http://utf7.example/")
    assert "+AGQAaQBl-" in utf7["text"] and " die" not in utf7["text"]


PEAK_SCRIPT = """
import resource, sys
import pyarrow as pa
from stages.formats import PARQUET
from stages.textsource import read_text_records
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open(sys.argv[1], "rb") as fh:
    reasons = [getattr(r, "reason", "kept") for r in read_text_records(fh, source="s", filename="f", fmt=PARQUET)]
print(len(reasons), reasons.count("too_large"), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024,
      pa.default_memory_pool().max_memory() // 2**20)
"""


@pytest.mark.parametrize("bomb", ["one-page", "dictionary"])
def test_reading_a_parquet_bomb_stays_small(tmp_path, bomb):
    """Peak memory of reading each 1.9 GB-when-decoded file, measured in a process of its own: under 300 MB
    more than before reading (it was 4-5 GB, decoded 64 rows at a time)."""
    import subprocess
    import sys

    path = PARQUET_BOMB if bomb == "one-page" else tmp_path / "dictionary.parquet"
    if bomb == "dictionary":
        dictionary_bomb(path)
    proc = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(path)], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, too_large, rss_mb, arrow_mb = map(int, proc.stdout.split())
    assert rows == too_large == 64
    assert rss_mb < 300 and arrow_mb < 300, (rss_mb, arrow_mb)


def test_every_reader_of_json_and_yaml_input_refuses_deep_nesting_in_one_line(tmp_path):
    """json.loads and PyYAML raise RecursionError (no ValueError) on 1,000 nested brackets; each reader of
    user-supplied JSON or YAML turns that into its usual error."""
    from pipeline.job.config import ConfigError, load_config
    from stages.formats import parse_json, read_records

    deep = "[" * 1000 + "]" * 1000
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json(deep)
    (tmp_path / "b.jsonl").write_text('{"question": "q"}\n' + deep + "\n")
    with pytest.raises(ValueError, match="b.jsonl:2: not JSON"):
        list(read_records(str(tmp_path / "b.jsonl")))
    (tmp_path / "b.json").write_text(deep)
    with pytest.raises(ValueError, match="b.json: not JSON"):
        list(read_records(str(tmp_path / "b.json")))
    (tmp_path / "c.yaml").write_text("langid: " + deep + "\n")
    with pytest.raises(ConfigError, match="not valid YAML: nested too deeply"):
        load_config(str(tmp_path / "c.yaml"), {})
