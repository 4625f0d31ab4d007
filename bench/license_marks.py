"""Licence marks past a page's first 100,000 characters: how many there are, and what reading them costs (issue 84,
item 2; stages/optout/signals.py).

    .venv/bin/python bench/license_marks.py [WARC ...] [--json FILE]

Every HTML response of the WARC files given (default: data/warc and shared/data/warc) goes through the
optout_signals stage twice, one core: as it reads pages now (the licence marks anywhere in the page: the head's
patterns, then an RE2 scan of the rest for the attributes that make a tag a mark) and with the head only (what it
read before). Counted: pages longer than the head, pages with a licence, and those whose licence only the scan past
the head finds (with the tag that states it); timed: microseconds a page for each, over the same pages.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.listed_site import warc_files  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.optout import signals  # noqa: E402
from stages.record import Document  # noqa: E402


def pages(paths):
    for path in paths:
        with open(path, "rb") as fh:
            for doc in read_warc(fh, source="bench", filename=path):
                if isinstance(doc, Document) and doc.html:
                    yield os.path.basename(path), doc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warcs", nargs="*")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    paths = [p for pattern in args.warcs for p in sorted(glob.glob(pattern))] if args.warcs else warc_files()
    stage = signals.PageOptOut()
    stage.count = lambda name, n=1: None
    head_only = signals.PageOptOut()
    head_only.count = stage.count
    head_only._license_past_head = lambda html: (None, None)
    table = collections.defaultdict(lambda: {"pages": 0, "longer_than_head": 0, "licensed": 0, "past_head": 0})
    found, seconds = [], {"anywhere": 0.0, "head only": 0.0}
    for name, doc in pages(paths):
        row = table[name]
        row["pages"] += 1
        row["longer_than_head"] += len(doc.html) > signals.HEAD_CHARS
        for label, judge in (("head only", head_only), ("anywhere", stage)):
            started = time.perf_counter()
            out = judge(doc)
            seconds[label] += time.perf_counter() - started
        before = head_only(doc).metadata.get("license")
        license = out.metadata.get("license")
        row["licensed"] += license is not None
        if license and not before:
            row["past_head"] += 1
            found.append({"file": name, "url": doc.url, "license": license, "chars": len(doc.html),
                          "source": out.metadata.get("license_source")})
    total = {k: sum(r[k] for r in table.values()) for k in ("pages", "longer_than_head", "licensed", "past_head")}
    for name, row in sorted(table.items()):
        print(f"{name}: {row}")
    print(f"all: {total}")
    for label, spent in seconds.items():
        print(f"{label}: {spent / max(total['pages'], 1) * 1e6:.0f} us a page")
    for item in found[:20]:
        print(f"  past the head: {item}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"files": table, "all": total, "us_per_page": {k: v / max(total["pages"], 1) * 1e6
                                                                     for k, v in seconds.items()},
                       "past_head": found}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
