"""report.json's `wet_vs_warc`: for a run given Common Crawl's WET text and the WARC files of the same pages, what
the recipe did with each page's two versions (kept from both, from one, from neither, and why), and how much text
each kept. Pages are matched by URL. A comparison run is small (a sample of a crawl): past MAX_PAGES pages the
section says it was not computed instead of holding every URL in the driver."""
from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

MAX_PAGES = 1_000_000
WET_SUFFIXES = (".wet", ".wet.gz")


def _read(path: str, columns: Sequence[str]):
    with FileSystems.open(path) as fh:
        return pq.read_table(fh, columns=list(columns))


def wet_vs_warc(shard_paths: Sequence[str], ledger_paths: Sequence[str]) -> dict[str, Any]:
    kept: dict[tuple[str, bool], int] = {}  # (url, from WET) -> characters kept
    dropped: dict[tuple[str, bool], str] = {}  # (url, from WET) -> stage:reason
    for path in shard_paths:
        table = _read(path, ["url", "text", "metadata"])
        from_wet = pc.equal(pc.struct_field(table.column("metadata"), "charset_source"), "wet").to_pylist()
        for url, chars, wet in zip(table.column("url").to_pylist(), pc.utf8_length(table.column("text")).to_pylist(),
                                   from_wet):
            kept[(url, bool(wet))] = chars
        if len(kept) > MAX_PAGES:
            return {"computed": False, "why": f"more than {MAX_PAGES:,} pages: compare on a sample of the crawl"}
    for path in ledger_paths:
        table = _read(path, ["url", "file", "stage", "reason"])
        for url, file, stage, reason in zip(*(table.column(c).to_pylist() for c in ("url", "file", "stage", "reason"))):
            if url:
                dropped[(url, str(file or "").lower().endswith(WET_SUFFIXES))] = f"{stage}:{reason}"
    urls = {url for url, wet in (*kept, *dropped) if wet} & {url for url, wet in (*kept, *dropped) if not wet}
    outcome: collections.Counter = collections.Counter()
    why_not = {"warc": collections.Counter(), "wet": collections.Counter()}
    chars = {"warc": 0, "wet": 0}
    for url in urls:
        warc_kept, wet_kept = (url, False) in kept, (url, True) in kept
        outcome[{(True, True): "kept_from_both", (True, False): "kept_from_warc_only",
                 (False, True): "kept_from_wet_only", (False, False): "kept_from_neither"}[warc_kept, wet_kept]] += 1
        if warc_kept and wet_kept:
            chars["warc"] += kept[(url, False)]
            chars["wet"] += kept[(url, True)]
        if not warc_kept and (url, False) in dropped:
            why_not["warc"][dropped[(url, False)]] += 1
        if not wet_kept and (url, True) in dropped:
            why_not["wet"][dropped[(url, True)]] += 1
    both = outcome["kept_from_both"]
    return {"computed": True, "pages_in_both": len(urls), **{k: outcome[k] for k in (
        "kept_from_both", "kept_from_warc_only", "kept_from_wet_only", "kept_from_neither")},
        "mean_chars_kept_from_both": {k: round(v / both) if both else None for k, v in chars.items()},
        "dropped_because": {k: dict(v.most_common(10)) for k, v in why_not.items()}}
