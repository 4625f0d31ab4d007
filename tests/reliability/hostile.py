"""Builders of hostile inputs (made at test time: small files, the size comes from decompression) and a
runner that executes `refinery` in a child process under a fixed address-space limit."""
from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import resource
import subprocess
import sys
import zlib
from collections.abc import Iterable, Sequence

import pyarrow.parquet as pq
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

REPO = pathlib.Path(__file__).resolve().parents[2]
# Real sentences of the languages written with spaces, pooled: documents of disjoint sentences never
# look alike by accident (random samples from one file did: they shared sentences).
SENTENCES = [line.strip() for lang in ("en", "de", "fr", "es", "nl", "pl", "ru", "ar")
             for line in (REPO / "tests" / "data" / "multilingual" / "sentences" / f"{lang}.txt")
             .read_text(encoding="utf-8").splitlines() if len(line.split()) >= 8]
MEMORY_LIMIT = 2 * 1024 ** 3  # every case must pass under this address-space limit


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def refinery(args: Sequence[str], timeout: float = 600, memory_limit: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """`refinery ARGS` as a user runs it: a child process (under the memory limit), text output captured."""
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=_limit_memory if memory_limit else None, **kwargs)


def prose(i: int, sentences: int = 5) -> str:
    """Document i: `sentences` real sentences, disjoint from every other document's (i < ~140)."""
    assert (i + 1) * sentences <= len(SENTENCES), "not enough distinct sentences"
    return " ".join(SENTENCES[i * sentences:(i + 1) * sentences])


def write_jsonl(path: pathlib.Path, rows: Iterable[dict], gz: bool = False) -> pathlib.Path:
    data = b"".join(json.dumps(r).encode("utf-8") + b"\n" for r in rows)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def gzip_member(chunks: Iterable[bytes]) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return b"".join([c.compress(chunk) for chunk in chunks] + [c.flush()])


def warc_response(url: str, body: bytes, content_type: str = "text/html; charset=utf-8", extra_http=()) -> bytes:
    """One gzipped WARC response record, written by warcio."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    http = StatusAndHeaders("200 OK", [("Content-Type", content_type), *extra_http], protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))
    return buf.getvalue()


def warc_record_of_type(warc_type: str) -> bytes:
    """One gzipped WARC record whose WARC-Type is `warc_type` (any text a file may hold)."""
    body = b"some bytes"
    head = (f"WARC/1.0\r\nWARC-Type: {warc_type}\r\nWARC-Record-ID: <urn:uuid:odd-type>\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return gzip_member([head, body, b"\r\n\r\n"])


def page(i: int) -> bytes:
    return f"<html><head><title>Page {i}</title></head><body><article><p>{prose(100 + i)}</p>" \
           f"<p>{prose(110 + i)}</p></article></body></html>".encode()


def huge_url_record(url_bytes: int) -> bytes:
    """A response record whose WARC-Target-URI line is `url_bytes` long, compressed to a few hundred KB."""
    body = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + page(7)
    head = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:huge-url>\r\n"
            b"Content-Type: application/http; msgtype=response\r\nWARC-Target-URI: http://huge.example/")
    tail = b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"\r\n\r\n"
    return gzip_member([head, *(b"a" * (1 << 20) for _ in range(url_bytes >> 20)), tail])


def big_html_record(url: str, html_bytes: int) -> bytes:
    """A record of `html_bytes` of valid HTML (under the 64 MiB record cap, over the 5 MiB HTML cap)."""
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
    block_len = len(http) + 12 + html_bytes + 14
    head = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:big>\r\n"
            b"Content-Type: application/http; msgtype=response\r\nWARC-Target-URI: " + url.encode() +
            b"\r\nContent-Length: %d\r\n\r\n" % block_len)
    paragraph = b"<p>word salad here.</p>"
    chunk = paragraph * ((1 << 20) // len(paragraph))
    n, rest = divmod(html_bytes, len(chunk))
    return gzip_member([head, http, b"<html><body>", *(chunk for _ in range(n)), paragraph[:0] + b" " * rest,
                        b"</body></html>", b"\r\n\r\n"])


def brotli_bomb(decoded_bytes: int) -> bytes:
    import brotli

    c = brotli.Compressor(quality=5)
    zeros = b"<" * (1 << 20)
    return b"".join([c.process(zeros) for _ in range(decoded_bytes >> 20)] + [c.finish()])


PARQUET_BOMB = REPO / "tests" / "data" / "hostile" / "parquet_bomb.parquet"


def parquet_bomb(path: pathlib.Path) -> None:
    """How tests/data/hostile/parquet_bomb.parquet was made (62 KB on disk; making it takes ~6 GB and ~20 s,
    so the file is kept): 64 rows of 30 MiB of text in one row group, one page of 1.9 GB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = pa.array(["x" * (30 << 20)] * 64, type=pa.large_string())
    pq.write_table(pa.table({"id": pa.array(range(64)), "text": text}), path, compression="zstd", use_dictionary=False)


def dictionary_bomb(path: pathlib.Path, rows: int = 64, value_bytes: int = 30 << 20) -> None:
    """`rows` rows sharing one dictionary value of `value_bytes` (~1 KB on disk; 64 x 30 MiB = 1.9 GB decoded):
    the footer says the text column is 30 MB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["y" * value_bytes]))
    # without the Arrow schema (as Spark and parquet-mr write): read back as plain strings, not a dictionary
    pq.write_table(pa.table({"id": pa.array(range(rows)), "text": text}), path, compression="zstd", store_schema=False)


def read_output(out: pathlib.Path) -> tuple:
    """(shard rows, ledger rows) read straight from the Parquet files, not from the run's report; shard rows
    are the training shards' and the validation split's (valid/: held out, not dropped)."""
    shards = sorted((out / "data").glob("part-*.parquet")) + sorted((out / "valid" / "data").glob("part-*.parquet"))
    ledger = sorted((out / "ledger").glob("part-*.parquet"))
    rows = [r for f in shards for r in pq.read_table(f).to_pylist()]
    drops = [r for f in ledger for r in pq.read_table(f).to_pylist()]
    return rows, drops


def no_filters_config(path: pathlib.Path, extra: str = "") -> pathlib.Path:
    """Every content filter off, so a test sees reading, dedup and writing alone."""
    path.write_text("gopher_quality: {enabled: false}\ngopher_repetition: {enabled: false}\n"
                    "quality: {enabled: false}\nlangid: {threshold: 0.0}\n" + extra)
    return path


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The error a failed run printed: exactly one line, no traceback."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def processes_with(marker: str) -> list[int]:
    """PIDs of live processes whose command line contains `marker` (from /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is `pid` (from /proc/*/stat)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
