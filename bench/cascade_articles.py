"""Good articles each extraction engine loses after the filters, on pages of sites the cascade's check was not
fitted on (no gold text: a page counts as a good article lost by an engine when the default rules keep the page
with the other engine's text and drop it with this one's).

    .venv/bin/python bench/cascade_articles.py [WARC ...]   (default: the workspace's crawl WARCs, not the
                                                            bench WARC whose pages the check was fitted on)

Rules: text repair, language ID and the Gopher rules at their defaults (`refinery run`'s document stages up
to the quality score). Prints, per engine, pages with text, pages kept, pages lost that the other engine keeps,
and the reasons; and the cascade's notes (why it fell back).
"""
from __future__ import annotations

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from pipeline.job.config import load_config  # noqa: E402
from stages.extraction.extract import ExtractConfig, extract_page  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.record import Document  # noqa: E402
from stages.runner import StageRunner  # noqa: E402
from stages.table import stage_table  # noqa: E402

ENGINES = ("trafilatura", "cascade", "cascade without guard")  # the guard: engines.fast_text_is_broken
RULES = ("text_repair", "langid", "gopher_repetition", "gopher_quality")
DEFAULT_WARCS = [shared_data.path("warc", name) for name in (
    "resiliparse_CC-MAIN-2020-34_warcfile.warc.gz", "cc_whirlwind_CC-MAIN-2024-22.warc.gz",
    "dolma_sample-0000.warc.gz", "dolma_sample-0001.warc.gz", "jwarc_cc.warc.gz")]


def pages(paths):
    for path in paths:
        with open(path, "rb") as fh:
            for doc in read_warc(fh, source="web", filename=os.path.basename(path)):
                if isinstance(doc, Document) and doc.html:
                    yield doc


def main() -> int:
    paths = [a for a in sys.argv[1:] if a != "-v"]
    if not paths:
        shared_data.require("bench/cascade_articles.py", {DEFAULT_WARCS[0]: "the Common Crawl excerpt and the other "
                                                                            "crawl WARCs of the workspace"})
        paths = [p for p in DEFAULT_WARCS if os.path.exists(p)]
    config = load_config(None, {})
    runner = StageRunner([spec.make(config) for spec in stage_table() if spec.name in RULES])
    verdicts: dict[str, dict[str, str]] = collections.defaultdict(dict)  # engine -> url -> "kept" or reason
    notes = collections.Counter()
    paths_of: dict[str, tuple[str, ...]] = {}  # the cascade's notes of each page
    with runner:
        for doc in pages(paths):
            for engine in ENGINES:
                options = ExtractConfig(engine=engine.split()[0]).engine_options()
                options["cascade_guard"] = engine == "cascade"
                text, found = extract_page(doc.html, doc.url, options)
                if engine == "cascade":
                    notes.update(found)
                    paths_of[doc.id] = (doc.url, *found)
                if not text or not text.strip():
                    verdicts[engine][doc.id] = "no_text"
                    continue
                kept, drops = runner.run([doc.replace(text=text.strip(), html=None)])
                verdicts[engine][doc.id] = "kept" if kept else f"{drops[0].stage}:{drops[0].reason}"
    for engine, other in (("trafilatura", "cascade"), ("cascade", "trafilatura"),
                          ("cascade without guard", "trafilatura")):
        mine, theirs = verdicts[engine], verdicts[other]
        lost = [d for d in mine if mine[d] != "kept" and theirs.get(d) == "kept"]
        print(f"{engine}: {len(mine)} pages, {sum(v == 'kept' for v in mine.values())} kept; lost where "
              f"{other} keeps them: {len(lost)} {dict(collections.Counter(mine[d] for d in lost))}")
    print("cascade notes:", dict(notes))
    if "-v" in sys.argv:
        for d, verdict in verdicts["cascade"].items():
            if verdict != "kept" and verdicts["trafilatura"].get(d) == "kept":
                print("  cascade lost:", verdict, *paths_of[d])
    return 0


if __name__ == "__main__":
    sys.exit(main())
