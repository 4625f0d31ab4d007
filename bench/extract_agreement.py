"""Extraction quality and speed of trafilatura settings on trafilatura's own gold standard: 990 real
pages, each with snippets that must appear in the main text and boilerplate that must not.

    .venv/bin/python bench/extract_agreement.py [--data ../shared/data/html/trafilatura]

For each setting: recall of the `with` snippets, share of `without` snippets that leak, ms/page
(one core, in-process), and how many pages give exactly the text of the default setting.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import time

from stages.extract import ExtractConfig, extract_text

SETTINGS = {
    "FineWeb (favor_precision)": ExtractConfig(),
    "favor_precision + fast (no fallback extractors)": ExtractConfig(fast=True),
}


def load_pages(root: str):
    with open(os.path.join(root, "evaldata.json"), encoding="utf-8") as fh:
        gold = json.load(fh)
    pages = []
    for url, entry in sorted(gold.items()):
        for path, opener in ((os.path.join(root, "eval_gz", entry["file"] + ".gz"), gzip.open),
                             (os.path.join(root, "eval_gz", entry["file"].rsplit(".", 1)[0] + ".gz"), gzip.open),
                             (os.path.join(root, "cache", entry["file"]), open)):
            if os.path.isfile(path):
                with opener(path, "rb") as fh:
                    html = fh.read().decode("utf-8", errors="replace")
                pages.append((url, html, entry.get("with", []), entry.get("without", [])))
                break
    return pages


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "html",
                                                  "trafilatura"))
    args = p.parse_args()
    pages = load_pages(args.data)
    texts = {}
    print(f"{len(pages)} annotated pages")
    print("| setting | recall of gold snippets | boilerplate leaked | ms/page | same text as FineWeb setting |")
    print("|---|---|---|---|---|")
    for name, cfg in SETTINGS.items():
        options = cfg.trafilatura_options()
        found = expected = leaked = boilerplate = 0
        out = []
        started = time.perf_counter()
        for url, html, with_snippets, without_snippets in pages:
            text = extract_text(html, url, options) or ""
            out.append(text)
            found += sum(s in text for s in with_snippets)
            expected += len(with_snippets)
            leaked += sum(s in text for s in without_snippets)
            boilerplate += len(without_snippets)
        ms = 1000 * (time.perf_counter() - started) / len(pages)
        texts[name] = out
        base = texts[next(iter(SETTINGS))]
        same = sum(a == b for a, b in zip(out, base))
        print(f"| {name} | {found / expected:.3f} ({found}/{expected}) | {leaked / boilerplate:.3f} "
              f"({leaked}/{boilerplate}) | {ms:.1f} | {same}/{len(pages)} |")


if __name__ == "__main__":
    main()
