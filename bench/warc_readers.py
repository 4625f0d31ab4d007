"""warcio (what stages/extraction/warc.py builds on) vs FastWARC, same files, same run: speed, and what each
does with the WARC quirks our reader ledgers.

    taskset -c 0 .venv/bin/python bench/warc_readers.py [--warc ../shared/data/warc/bench_trafilatura_pages.warc.gz]

Speed: every record's raw block read (warcio `no_record_parse=True`, as shipped and with ISA-L inflating 64 KB blocks
as our reader runs it; FastWARC `parse_http=False`), and our whole
reader (records -> Documents: HTTP headers, charset, caps), median of 3. Quirks: hostile files built as
tests/reliability/hostile.py builds them; per reader, the records it yields or the error that ends the file.
"""
from __future__ import annotations

import argparse
import gzip
import io
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests", "reliability"))

DEFAULT_WARC = os.path.join(REPO, "..", "shared", "data", "warc", "bench_trafilatura_pages.warc.gz")


def warcio_records(stream) -> list[tuple[str, int]]:
    from warcio.archiveiterator import ArchiveIterator

    return [(r.rec_type, len(r.content_stream().read())) for r in ArchiveIterator(stream, no_record_parse=True)]


def warcio_isal_records(stream) -> list[tuple[str, int]]:
    """warcio as stages/extraction/warc.py runs it: ISA-L inflating, 64 KB blocks."""
    from stages.extraction.warc import archive_records

    return [(r.rec_type, len(r.content_stream().read())) for r in archive_records(stream)]


def fastwarc_records(stream) -> list[tuple[str, int]]:
    from fastwarc.warc import ArchiveIterator

    return [(str(r.record_type).rsplit(".", 1)[-1], len(r.reader.read()))
            for r in ArchiveIterator(stream, parse_http=False)]


def our_reader(stream) -> list[str]:
    from stages.extraction.warc import read_warc

    return [getattr(d, "reason", None) and f"ledger: {d.reason.value}" or "document"
            for d in read_warc(stream, source="bench")]


def hostile_files() -> dict[str, bytes]:
    from hostile import huge_url_record, warc_response

    good = [warc_response(f"http://example.com/{i}", b"<html><body><p>" + b"text " * 80 + b"</p></body></html>")
            for i in range(3)]
    middle = gzip.decompress(good[1])
    declared = middle.split(b"Content-Length: ")[1].split(b"\r\n")[0]
    return {
        "three good records": b"".join(good),
        "file cut inside the last record": b"".join(good)[:-len(good[2]) // 2],
        "2 MB WARC-Target-URI line between two good records": good[0] + huge_url_record(2_000_000) + good[2],
        "middle record's Content-Length 9x too long": good[0] + gzip.compress(
            middle.replace(b"Content-Length: ", b"Content-Length: 9", 1)) + good[2],
        "middle record's Content-Length too short": good[0] + gzip.compress(
            middle.replace(b"Content-Length: " + declared, b"Content-Length: 10", 1)) + good[2],
    }


def outcome(read, data: bytes) -> str:
    try:
        records = read(io.BytesIO(data))
    except Exception as exc:  # what a reader raises ends the file: the records after it are lost
        return f"stops: {type(exc).__name__}: {str(exc)[:50]}"
    return f"{len(records)}: " + ", ".join(str(r if isinstance(r, str) else r[0]) for r in records)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warc", default=DEFAULT_WARC)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    seconds: dict[str, list[float]] = {"warcio, raw records": [], "warcio + ISA-L inflate, 64 KB blocks, raw records": [],
                                       "FastWARC, raw records": [],
                                       "ours (warcio + HTTP, charset, caps -> Documents)": []}
    readers = dict(zip(seconds, (warcio_records, warcio_isal_records, fastwarc_records, our_reader)))
    counts = {}
    for _ in range(args.repeat):
        for name, read in readers.items():
            with open(args.warc, "rb") as fh:
                started = time.perf_counter()
                counts[name] = len(read(fh))
                seconds[name].append(time.perf_counter() - started)
    print(f"{os.path.basename(args.warc)}, median of {args.repeat}")
    print("| reader | records | s | ms/record |\n|---|---|---|---|")
    for name, runs in seconds.items():
        s = statistics.median(runs)
        print(f"| {name} | {counts[name]} | {s:.2f} | {1000 * s / counts[name]:.2f} |")
    print("\n| hostile file | warcio (raw) | warcio + ISA-L (raw) | FastWARC (raw) | ours |\n|---|---|---|---|---|")
    for name, data in hostile_files().items():
        print(f"| {name} | {outcome(warcio_records, data)} | {outcome(warcio_isal_records, data)} | "
              f"{outcome(fastwarc_records, data)} | {outcome(our_reader, data)} |")


if __name__ == "__main__":
    main()
