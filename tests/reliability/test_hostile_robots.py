"""`--robots` input as hostile as page input, in one real run under the 2 GiB address-space limit: a Parquet table
of huge body cells (a 30 MiB and an 80 MiB dictionary value shared by 64 rows), a capture WARC with a 200 MB
header line, a capture WARC with a flipped byte and random bytes after its records, fifty parked hosts whose
robots.txt redirects to one host with twenty 400 KiB captures, and a 500 KiB robots.txt of wildcard rules naming
every AI agent, judged for pages with 2,000-character paths. The run succeeds, every page is kept or ledgered,
each unreadable part is named in the report, and the decisions are right; a FIFO named like a capture file is
refused in one line."""
from __future__ import annotations

import json
import os
import random
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stages.optout.agents import TRAINING_AGENTS
from tests.reliability.hostile import SENTENCES, read_output, refinery
from tests.robots_warcs import page_warc, robots_warc

DATE = "2024-02-01T00:00:00Z"
PAGE_DATE = "2024-03-01T10:00:00Z"
PARKED = 50


def page(i: int) -> bytes:
    """Page i: seven real sentences no other page has."""
    body = "".join(f"<p>{s}</p>" for s in SENTENCES[7 * i:7 * i + 7])
    return f"<html><head><title>Page {i}</title></head><body><article>{body}</article></body></html>".encode()


def dictionary_table(path, rows: int, value_bytes: int, host: str) -> None:
    body = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()),
                                          pa.array([b"User-agent: GPTBot\nDisallow: /\n" + b"#" * value_bytes]))
    pq.write_table(pa.table({"host": [f"{host}{i}.example" for i in range(rows)], "fetch_date": [DATE] * rows,
                             "status": [200] * rows, "body": body}), path, compression="zstd", store_schema=False)


def header_bomb(path, line_bytes: int = 200 << 20) -> None:
    """One gzip member: a WARC response record whose header has one line of `line_bytes` (~200 KB on disk)."""
    head = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: https://bomb.example/robots.txt\r\n"
            b"WARC-Date: 2024-02-01T00:00:00Z\r\nX-Pad: ")
    body = b"HTTP/1.1 200 OK\r\n\r\nUser-agent: *\nDisallow: /\n"
    tail = b"\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n" % (len(body), body)
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    chunk = b"a" * (1 << 20)
    with open(path, "wb") as fh:
        fh.write(gz.compress(head))
        for _ in range(line_bytes >> 20):
            fh.write(gz.compress(chunk))
        fh.write(gz.compress(tail) + gz.flush())


@pytest.fixture(scope="module")
def hostile_robots(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile_robots")
    robots = root / "robots"
    robots.mkdir()
    rng = random.Random(0)
    wild = "".join(f"User-agent: {a}\n" for a in TRAINING_AGENTS) + "Disallow: /*secret*draft$\n" + "".join(
        f"Disallow: /*a{rng.randrange(10**6)}*b{rng.randrange(10**6)}*c$\n" for _ in range(17_000))
    good = [("https://news.example/robots.txt", DATE, "200 OK", "User-agent: GPTBot\nDisallow: /\n", ()),
            ("https://wild.example/robots.txt", DATE, "200 OK", wild[:500 * 1024], ())]
    good += [(f"https://parked{i}.example/robots.txt", DATE, "301 Moved Permanently", "",
              (("Location", "https://target.example/robots.txt"),)) for i in range(PARKED)]
    good += [("https://target.example/robots.txt", f"2024-02-01T00:00:{i:02d}Z", "200 OK",
              "User-agent: CCBot\nDisallow: /\n" + "#" * (400 << 10), ()) for i in range(20)]
    robots_warc(robots / "good.warc.gz", good)
    damaged = robots_warc(root / "damaged.warc.gz", [
        (f"https://d{i}.example/robots.txt", DATE, "200 OK", "User-agent: GPTBot\nDisallow: /\n" + "#" * 3000, ())
        for i in range(6)]).read_bytes()
    flipped = bytearray(damaged)
    flipped[len(flipped) // 2] ^= 0xFF
    (robots / "damaged.warc.gz").write_bytes(bytes(flipped) + rng.randbytes(5000))
    header_bomb(robots / "header-bomb.warc.gz")
    dictionary_table(robots / "cells-30mib.parquet", 64, 30 << 20, "cells")
    dictionary_table(robots / "cells-80mib.parquet", 64, 80 << 20, "huge")

    pages = [("https://news.example/story", PAGE_DATE, page(0)), ("https://cells3.example/a", PAGE_DATE, page(1)),
             ("https://huge3.example/a", PAGE_DATE, page(2))]
    pages += [(f"https://parked{i}.example/p", PAGE_DATE, page(3 + i)) for i in range(PARKED)]
    long_paths = ["/".join(f"a{rng.randrange(10**6)}" for _ in range(250)) for _ in range(20)]
    pages += [(f"https://wild.example/{p}", PAGE_DATE, page(53 + i)) for i, p in enumerate(long_paths)]
    pages += [("https://wild.example/x/secret/y/draft", PAGE_DATE, page(73))]
    page_warc(root / "pages.warc.gz", pages)
    out = root / "out"
    proc = refinery(["run", "--input", root / "pages.warc.gz", "--robots", robots, "--output", out, "--quiet"],
                    timeout=600)
    return proc, out, {url for url, _, _ in pages}


def test_hostile_captures_end_the_run_well_and_are_named(hostile_robots):
    proc, out, urls = hostile_robots
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["conservation"]["holds"]
    rows, drops = read_output(out)
    assert {r["url"] for r in rows} | {d["url"] for d in drops} == urls  # every page kept or ledgered
    unreadable = report["optout"]["robots_unreadable"]
    named = {os.path.basename(u["file"]) for u in unreadable}
    assert {"damaged.warc.gz", "header-bomb.warc.gz", "cells-80mib.parquet"} <= named, unreadable
    assert "cells-30mib.parquet" not in named  # read, each body cut at 500 KiB


def test_the_decisions_through_hostile_captures_are_right(hostile_robots):
    _, out, _ = hostile_robots
    rows, drops = read_output(out)
    robots = {d["url"]: d for d in drops if d["stage"] == "robots"}
    parked = {f"https://parked{i}.example/p" for i in range(PARKED)}
    assert parked <= set(robots)  # each parked host's robots.txt redirects to target.example, which bars CCBot
    assert all("via https://parked" in robots[u]["detail"] and "target.example" in robots[u]["detail"] for u in parked)
    assert {"https://news.example/story", "https://cells3.example/a", "https://wild.example/x/secret/y/draft"} \
        <= set(robots)
    assert "https://huge3.example/a" not in robots  # its capture was in the table's undecoded row group
    assert not any(u.startswith("https://wild.example/a") for u in robots)  # no wildcard rule matches those paths


def test_a_fifo_named_like_a_capture_file_is_refused_in_one_line(tmp_path):
    pages = page_warc(tmp_path / "pages.warc.gz", [("https://news.example/story", PAGE_DATE, page(0))])
    os.mkfifo(tmp_path / "captures.warc.gz")
    proc = refinery(["run", "--input", pages, "--robots", tmp_path / "captures.warc.gz", "--output", tmp_path / "o"],
                    timeout=120)
    assert proc.returncode == 2 and "FIFO" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
