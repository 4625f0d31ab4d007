"""trafilatura's evaluation corpus (990 real pages, each with snippets that must appear in the main text and
boilerplate that must not) and its scoring: a `with` snippet found is a true positive, one missing a false
negative; a `without` snippet found is a false positive. Whitespace is collapsed on both sides, so engines
that break lines differently are scored alike."""
from __future__ import annotations

import gzip
import json
import os
import zlib
from typing import NamedTuple
from urllib.parse import urlsplit

DEFAULT_ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "html", "trafilatura")


class GoldPage(NamedTuple):
    url: str
    html: str
    with_snippets: list[str]
    without_snippets: list[str]

    @property
    def fold(self) -> int:
        """0 or 1 by the site's host name: fitting on one fold and scoring on the other never shares a site."""
        return zlib.crc32((urlsplit(self.url).hostname or "").encode()) % 2


def load_pages(root: str = DEFAULT_ROOT) -> list[GoldPage]:
    """The annotated pages, sorted by URL (pages whose file is missing are skipped)."""
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
                pages.append(GoldPage(url, html, entry.get("with", []), entry.get("without", [])))
                break
    return pages


def _collapse(text: str | None) -> str:
    return " ".join((text or "").split())


def snippet_counts(text: str | None, page: GoldPage) -> tuple[int, int, int]:
    """(true positives, false negatives, false positives) of one extracted text."""
    flat = _collapse(text)
    found = sum(_collapse(s) in flat for s in page.with_snippets)
    leaked = sum(_collapse(s) in flat for s in page.without_snippets)
    return found, len(page.with_snippets) - found, leaked


def precision_recall_f1(counts: list[tuple[int, int, int]]) -> tuple[float, float, float]:
    tp = sum(c[0] for c in counts)
    fn = sum(c[1] for c in counts)
    fp = sum(c[2] for c in counts)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)
