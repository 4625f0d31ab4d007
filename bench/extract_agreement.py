"""Extraction quality and speed of trafilatura settings on trafilatura's own gold standard: 990 real
pages, each with snippets that must appear in the main text and boilerplate that must not.

    .venv/bin/python bench/extract_agreement.py [--data ../shared/data/html/trafilatura] [--repeat 3]

For each setting: recall of the `with` snippets, share of `without` snippets that leak, ms/page
(one core, in-process, median of the repeats, settings interleaved), the speed ratio against
trafilatura as shipped in the same mode (full or fast), and how many pages give exactly its text.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from stages.extraction.extract import ExtractConfig, extract_text
from stages.extraction.gold import load_pages  # (url, html, with snippets, without snippets) per page

SETTINGS = {
    "FineWeb (favor_precision), trafilatura as shipped": ExtractConfig(speedups=False),
    "FineWeb (favor_precision) + our speedups: the default": ExtractConfig(),
    "favor_precision + fast (no fallback extractors), trafilatura as shipped": ExtractConfig(fast=True, speedups=False),
    "favor_precision + fast (no fallback extractors) + speedups": ExtractConfig(fast=True),
}


def shipped_counterpart(name: str) -> str:
    """The setting with the same mode and trafilatura as shipped: what `name` is compared with."""
    fast = SETTINGS[name].fast
    return next(other for other, cfg in SETTINGS.items() if cfg.fast == fast and not cfg.speedups)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "html",
                                                  "trafilatura"))
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    pages = load_pages(args.data)
    print(f"{len(pages)} annotated pages")
    texts, seconds = {}, {name: [] for name in SETTINGS}
    for _ in range(args.repeat):
        for name, cfg in SETTINGS.items():
            options = cfg.trafilatura_options()
            started = time.perf_counter()
            texts[name] = [extract_text(html, url, options) or "" for url, html, _, _ in pages]
            seconds[name].append(time.perf_counter() - started)
    print("| setting | recall of gold snippets | boilerplate leaked | ms/page | speed vs shipped, same mode | "
          "same text as shipped, same mode |")
    print("|---|---|---|---|---|---|")
    for name in SETTINGS:
        found = sum(s in text for text, page in zip(texts[name], pages) for s in page[2])
        expected = sum(len(page[2]) for page in pages)
        leaked = sum(s in text for text, page in zip(texts[name], pages) for s in page[3])
        boilerplate = sum(len(page[3]) for page in pages)
        base = shipped_counterpart(name)
        same = sum(a == b for a, b in zip(texts[name], texts[base]))
        ms = 1000 * statistics.median(seconds[name]) / len(pages)
        ratio = statistics.median(seconds[base]) / statistics.median(seconds[name])
        print(f"| {name} | {found / expected:.3f} ({found}/{expected}) | {leaked / boilerplate:.3f} "
              f"({leaked}/{boilerplate}) | {ms:.1f} | {ratio:.2f}x | {same}/{len(pages)} |")
    print("runs (s):", {name: [round(x, 1) for x in v] for name, v in seconds.items()})


if __name__ == "__main__":
    main()
