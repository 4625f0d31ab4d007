"""Page-level opt-outs and licences on real crawls (issue 59): what `optout_signals` finds in every page of the
workspace's WARC files (the repo's data/warc, and shared/data/warc where it is here).

    .venv/bin/python bench/optout_pages.py [WARC ...]

Per file: pages read, pages with each opt-out (noai meta, agent meta, X-Robots-Tag, TDMRep), the licences stated
and where. A default run drops exactly the opted-out pages that pass the quality rules (the `optout` stage).
"""
from __future__ import annotations

import collections
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from stages.extraction.warc import read_warc  # noqa: E402
from stages.optout.signals import VERDICT, PageOptOut  # noqa: E402
from stages.record import Document  # noqa: E402


def main(paths: list[str]) -> None:
    stage = PageOptOut()
    print("| file | pages | opted out (reason) | licensed pages (licence: count) | found by |")
    print("|---|---|---|---|---|")
    totals: collections.Counter = collections.Counter()
    for path in paths:
        pages, reasons, licences, sources = 0, collections.Counter(), collections.Counter(), collections.Counter()
        with open(path, "rb") as fh:
            for doc in read_warc(fh, source="bench"):
                if not isinstance(doc, Document):
                    continue
                pages += 1
                doc = stage(doc)
                if doc.metadata.get(VERDICT):
                    reasons[doc.metadata[VERDICT][0]] += 1
                if doc.metadata.get("license"):
                    licences[doc.metadata["license"]] += 1
                    sources[doc.metadata["license_source"]] += 1
        totals.update(pages=pages, opted=sum(reasons.values()), licensed=sum(licences.values()))
        print(f"| {os.path.basename(path)} | {pages} | {sum(reasons.values())} "
              f"{dict(reasons) if reasons else ''} | {sum(licences.values())} "
              f"{', '.join(f'{k}: {v}' for k, v in licences.most_common())} | "
              f"{', '.join(f'{k}: {v}' for k, v in sources.most_common())} |")
    print(f"| all | {totals['pages']} | {totals['opted']} | {totals['licensed']} | |")


if __name__ == "__main__":
    found = sys.argv[1:] or sorted(glob.glob("data/warc/*.warc*") + glob.glob(shared_data.path("warc", "*.warc*")))
    unique = {os.path.basename(p): p for p in reversed(found) if ".wet" not in p}  # the repo's copy where both are
    main(sorted(unique.values(), key=os.path.basename))
