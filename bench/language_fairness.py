"""Share of clean prose dropped per language: English-shaped thresholds vs the calibrated ones; and what
the calibrated ones give up on the bench WARC (its pages the default rules drop: boilerplate, lists, junk).

    .venv/bin/python bench/language_fairness.py [--thresholds bundled] [--langs N]

Prose: FLORES-200 (Wikipedia sentences professionally translated, 1,004 per language; not used by the
calibration, which saw NTREX-128), 10 consecutive sentences a document, one a line. Rules: language ID,
Gopher repetition and Gopher quality at their defaults, as `refinery run` applies them.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))


from pipeline.job.config import load_config  # noqa: E402
from stages import reference  # noqa: E402
from stages.extraction.extract import ExtractConfig, Extractor  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.langid import model_codes  # noqa: E402
from stages.record import Document  # noqa: E402
from stages.reference import lid_code  # noqa: E402
from stages.runner import StageRunner  # noqa: E402
from stages.table import stage_table  # noqa: E402

MULTILINGUAL = "../shared/data/multilingual"
BENCH = "../shared/data/warc/bench_trafilatura_pages.warc.gz"
RULES = ("langid", "gopher_repetition", "gopher_quality")


def chain(thresholds: str | None) -> StageRunner:
    config = load_config(None, {"thresholds": thresholds})  # None: English-shaped thresholds for every language
    return StageRunner([spec.make(config) for spec in stage_table() if spec.name in RULES])


def flores_documents(per_doc: int = 10):
    """{lid code: [documents]} from FLORES-200 (one script per language: the first folder of a code)."""
    labels = model_codes()
    out: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    for folder, _, text in reference.flores_documents(MULTILINGUAL, per_doc):
        code = lid_code(folder.split("_")[0], labels)
        if code is None or seen.setdefault(code, folder) != folder:
            continue
        out.setdefault(code, []).append(text)
    return out


def drop_share(stages: StageRunner, docs: list[str], lang: str) -> tuple[float, dict[str, int]]:
    reasons: dict[str, int] = {}
    dropped = 0
    for i, text in enumerate(docs):
        result = stages(Document(id=f"{lang}/{i}", url="", source="prose", text=text))
        if not isinstance(result, Document):
            dropped += 1
            reasons[f"{result.stage}:{result.reason}"] = reasons.get(f"{result.stage}:{result.reason}", 0) + 1
    return dropped / max(len(docs), 1), reasons


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--thresholds", default="bundled")
    args = parser.parse_args()
    default, calibrated = chain(None), chain(args.thresholds)
    docs = flores_documents()
    rows = []
    with default, calibrated:
        for lang, texts in sorted(docs.items()):
            before, why_before = drop_share(default, texts, lang)
            after, why_after = drop_share(calibrated, texts, lang)
            rows.append((lang, len(texts), before, after, why_before, why_after))
        en_before, en_after = next((r[2], r[3]) for r in rows if r[0] == "en")

        def fair(share, english):
            return share <= max(2 * english, english + 0.05)

        print(f"{len(rows)} languages, FLORES-200 prose (10 sentences a document); English drops "
              f"{en_before:.1%} (default) / {en_after:.1%} (calibrated)")
        print("| language | docs | dropped, default | dropped, calibrated | main reasons, default |")
        print("|---|---|---|---|---|")
        for lang, n, before, after, why, _ in sorted(rows, key=lambda r: -r[2]):
            top = ", ".join(f"{k} {v}" for k, v in sorted(why.items(), key=lambda kv: -kv[1])[:2])
            print(f"| {lang} | {n} | {before:.1%}{'' if fair(before, en_before) else ' ✗'} | "
                  f"{after:.1%}{'' if fair(after, en_after) else ' ✗'} | {top} |")
        unfair_before = sum(not fair(r[2], en_before) for r in rows)
        unfair_after = sum(not fair(r[3], en_after) for r in rows)
        print(f"\nlanguages dropped more than max(2x English, English + 5 points): default {unfair_before}, "
              f"calibrated {unfair_after} (of {len(rows)})")

        extract = StageRunner([Extractor(ExtractConfig(timeout_s=None))])
        caught = {"default": 0, "calibrated": 0}
        released = []
        with open(BENCH, "rb") as fh, extract:
            for page in read_warc(fh, source="bench"):
                doc = extract(page)
                if not isinstance(doc, Document):
                    continue
                first, second = default(doc), calibrated(doc)
                caught["default"] += not isinstance(first, Document)
                caught["calibrated"] += not isinstance(second, Document)
                if not isinstance(first, Document) and isinstance(second, Document):
                    released.append(f"{second.lang} {first.reason} {doc.url}")
        print(f"\nbench WARC pages dropped by these rules: default {caught['default']}, calibrated "
              f"{caught['calibrated']} ({caught['calibrated'] / max(caught['default'], 1):.1%} of the default's)")
        for line in released:
            print(f"  kept by the calibrated thresholds: {line}")


if __name__ == "__main__":
    main()
