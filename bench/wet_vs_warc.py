"""Common Crawl's WET text against our extraction of the same pages from the WARC files, page by page: how much text
each has, how much they share, how many of the WET text's words our extraction leaves out (menus, footers), and what the recipe's
per-document stages decide on each.

    .venv/bin/python bench/wet_vs_warc.py [WARC WET]...   (default: the bundled whirlwind pair and, with ../shared,
                                                           the 2014 pair)

Pages are joined by WARC-Refers-To (the WET record's `metadata.warc_record_id`) = the WARC response's record id.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAIRS = [(REPO / "data/warc/cc_whirlwind_CC-MAIN-2024-22.warc.gz", REPO / "data/warc/cc_whirlwind_CC-MAIN-2024-22.warc.wet.gz"),
         (REPO.parent / "shared/data/warc/eugeneware_CC-MAIN-2014-35_4pages.warc",
          REPO.parent / "shared/data/warc/eugeneware_CC-MAIN-2014-35_3docs.warc.wet")]


def pages(warc: pathlib.Path, wet: pathlib.Path):
    from stages.extraction.warc import read_warc
    from stages.extraction.wet import read_wet
    from stages.record import Document

    with open(warc, "rb") as fh:
        html = {d.record_id: d for d in read_warc(fh, source="web", filename=warc.name) if isinstance(d, Document)}
    with open(wet, "rb") as fh:
        text = {d.metadata["warc_record_id"]: d for d in read_wet(fh, source="wet", filename=wet.name)
                if isinstance(d, Document)}
    return [(html[key], text[key]) for key in sorted(html.keys() & text.keys())]


def verdicts(docs):
    import refinery

    return [("kept" if kept else f"{drop.stage}:{drop.reason}") for kept, drop in refinery.apply(docs)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="WARC WET [WARC WET ...]")
    args = ap.parse_args()
    pairs = list(zip(map(pathlib.Path, args.files[::2]), map(pathlib.Path, args.files[1::2]))) or \
        [p for p in PAIRS if p[0].exists() and p[1].exists()]
    import refinery

    rows = []
    for warc, wet in pairs:
        joined = pages(warc, wet)
        extracted = [kept for kept, _ in refinery.apply([w for w, _ in joined], stages=["extract"])]
        ours = verdicts([w for w, _ in joined])
        theirs = verdicts([t for _, t in joined])
        for (page, wet_doc), mine, v_ours, v_theirs in zip(joined, extracted, ours, theirs):
            mine_text = mine.text if mine else ""
            a, b = set(mine_text.split()), set(wet_doc.text.split())
            left_out = len(b - a) / max(len(b), 1)
            rows.append((page.url[:60], len(mine_text), len(wet_doc.text), len(a & b) / max(len(a | b), 1), left_out,
                         v_ours, v_theirs))
    print("| page | our text (chars) | WET text (chars) | word-set Jaccard | WET words not in ours | recipe on ours | "
          "recipe on WET |")
    print("|---|---:|---:|---:|---:|---|---|")
    for url, mine, theirs, jaccard, left_out, v1, v2 in rows:
        print(f"| {url} | {mine:,} | {theirs:,} | {jaccard:.2f} | {left_out:.0%} | {v1} | {v2} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
