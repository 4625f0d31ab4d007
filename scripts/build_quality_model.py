"""Recipe for the bundled quality classifier, stages/models/quality.ftz (run: `make quality-model`).

Data (real pages, all available in the workspace's shared/data, none downloaded):
  * the 1,033-page benchmark WARC (trafilatura's evaluation pages: news, blogs, shops, government; mostly de/en)
  * the WARC files bundled in data/warc (Common Crawl excerpt, wget crawls, Wayback captures)
Labels:
  * positive (hq): main text (trafilatura, favor_precision) of pages that pass language ID and the
    Gopher repetition and quality filters at their defaults
  * negative (lq): main text of pages those filters drop, and the boilerplate of every page: its
    visible text nodes that are not part of its main text (stages.quality_train.boilerplate_lines:
    menus, footers, cookie and login notices, link lists), when there are >= 30 words of it
Split: by page (hash of the URL), 20 % held out, so a page's main text and its boilerplate are
never on both sides of the split.
"""
import glob
import hashlib
import json
import os
import sys

from stages.chain import StageChain
from stages.extraction.extract import ExtractConfig, Extractor
from stages.extraction.warc import read_warc
from stages.gopher import GopherQuality, GopherRepetition
from stages.langid import LanguageIdentifier
from stages.quality_train import QualityTrainConfig, boilerplate_lines, train
from stages.record import Document

BENCH = os.environ.get("REFINERY_BENCH_WARC", "../shared/data/warc/bench_trafilatura_pages.warc.gz")
OUTPUT = "stages/models/quality.ftz"


def held_out(url: str) -> bool:
    return int(hashlib.blake2b(url.encode(), digest_size=8).hexdigest(), 16) / 2**64 < 0.2


def collect(paths):
    chain = StageChain([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    repetition, quality = GopherRepetition(), GopherQuality()
    for path in paths:
        with open(path, "rb") as fh, chain:
            for page in read_warc(fh, source="recipe"):
                doc = chain(page)
                if not isinstance(page, Document) or not isinstance(doc, Document):
                    continue
                dropped = repetition.evaluate(doc.text, doc.lang) or quality.evaluate(doc.text, doc.lang)
                yield page.url or page.id, ("lq" if dropped else "hq"), doc.text
                boilerplate = boilerplate_lines(page.html, doc.text)
                if len(" ".join(boilerplate).split()) >= 30:
                    yield page.url or page.id, "lq", "\n".join(boilerplate)


def main() -> int:
    paths = [BENCH] + sorted(glob.glob("data/warc/*.warc.gz"))
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        print(f"missing input: {missing} (set REFINERY_BENCH_WARC)", file=sys.stderr)
        return 2
    split = {"train": {"hq": [], "lq": []}, "test": {"hq": [], "lq": []}}
    for url, label, text in collect(paths):
        split["test" if held_out(url) else "train"][label].append(text)
    sizes = {part: {label: len(texts) for label, texts in labels.items()} for part, labels in split.items()}
    print(json.dumps(sizes))
    card = train(split["train"]["hq"], split["train"]["lq"], OUTPUT, QualityTrainConfig(),
                 description=__doc__.split("Split:")[0].strip(), held_out=(split["test"]["hq"], split["test"]["lq"]))
    print(json.dumps(card["held_out_metrics"]), card["model_bytes"], "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
