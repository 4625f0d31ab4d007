"""Cost of the second opinion (issue 36): language-ID time per page with and without CLD2, and how many pages
ask it, on the bench WARC's extracted pages (real crawl pages in many languages).

    .venv/bin/python bench/langid_cost.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pipeline.job.config import load_config  # noqa: E402
from stages.extraction.extract import ExtractConfig, Extractor  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.record import Document  # noqa: E402
from stages.table import stage_table  # noqa: E402

BENCH = "../shared/data/warc/bench_trafilatura_pages.warc.gz"


def main() -> None:
    extractor = Extractor(ExtractConfig(timeout_s=None))
    extractor.setup()
    with open(BENCH, "rb") as fh:
        pages = [doc for doc in map(extractor, read_warc(fh, source="bench")) if isinstance(doc, Document)]
    from stages import cld2

    asked = []
    opinion = cld2.opinion
    cld2.opinion = lambda text: asked.append(1) or opinion(text)
    for label, overrides in (("with CLD2", {}), ("lid.176 alone", {"langid.second_opinion": None}),
                             ("with CLD2", {}), ("lid.176 alone", {"langid.second_opinion": None})):
        stage = next(s for s in stage_table() if s.name == "langid").make(load_config(None, overrides))
        stage.setup()
        notes = []
        stage.count = lambda name, n=1, notes=notes: notes.append(name)
        for doc in pages[:50]:  # warm up
            stage(doc)
        best = float("inf")
        asked.clear()
        for _ in range(3):
            started = time.perf_counter()
            results = [stage(doc) for doc in pages]
            best = min(best, time.perf_counter() - started)
        kept = sum(isinstance(r, Document) for r in results)
        print(f"{label}: {best / len(pages) * 1e6:.0f} us/page over {len(pages)} pages, kept {kept}, "
              f"CLD2 asked for {len(asked) / 3:.0f}")
    started = time.perf_counter()
    for doc in pages:
        opinion(doc.text)
    print(f"CLD2 alone: {(time.perf_counter() - started) / len(pages) * 1e6:.0f} us/page")


if __name__ == "__main__":
    main()
