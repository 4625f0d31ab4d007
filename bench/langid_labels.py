"""Are the kept pages' language labels right, and does every language keep its prose? (issue 36)

    .venv/bin/python bench/langid_labels.py [--thresholds bundled|none|FILE] [--set KEY=VALUE ...] [--json OUT]

1. Labels (only language ID on): FLORES-200 `test.tsv` of every folder (205 languages; never used to fit a
   threshold), 8 consecutive sentences a page. For the languages lid.176 names: the share of pages kept under
   the right label (recall) and kept under a wrong one; for the languages it cannot name, every kept page is a
   wrong label. Also: wrong labels kept at a score below 0.5, as a share of all pages.
2. Prose kept per language (every default document stage, dedup off): NTREX-128's first 25 news documents in
   each language lid.176 names, one document a page; a language is "unfair" when dropped at more than
   max(2x English's rate, English + 5 points).
3. Labels on a third source (lingua-py's Leipzig sentences, 8 to a page): right and wrong labels kept.
"""
import argparse
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.settings import set_values  # noqa: E402
from pipeline.job.config import load_config  # noqa: E402
from stages import reference  # noqa: E402
from stages.langid import model_codes  # noqa: E402
from stages.record import Document  # noqa: E402
from stages.runner import StageRunner  # noqa: E402
from stages.table import DOCUMENT, stage_table  # noqa: E402

MULTILINGUAL = "../shared/data/multilingual"
# lid.176's `bh` (Bihari, a collective code) names each Bihari language rightly; of them it has a label of its own
# only for Maithili, so Bhojpuri and Magahi count as known languages whose right label is `bh`
BIHARI = ("bho", "mag", "mai")


def flores_test_pages(per_page: int = 8):
    """{folder: [page text]} from every folder's test.tsv, sentences in index order."""
    out: dict[str, list[str]] = {}
    for folder, _, text in reference.flores_documents(MULTILINGUAL, per_page, splits=("test",)):
        out.setdefault(folder, []).append(text)
    return out


def chain(overrides: dict, names) -> StageRunner:
    config = load_config(None, overrides)
    return StageRunner([spec.make(config) for spec in stage_table()
                       if spec.runs == DOCUMENT and spec.name in names and spec.is_enabled(config)])


def labels(overrides: dict) -> dict:
    known = model_codes()
    rows = {}
    with chain(overrides, {"langid"}) as stages:
        for folder, pages in flores_test_pages().items():
            code = folder.split("_")[0]
            truth = reference.lid_code(code, known) or ("bh" if code in BIHARI else None)
            rights = {truth, "bh"} if code in BIHARI else {truth}
            right = wrong = wrong_low = 0
            wrong_as: dict[str, int] = {}
            for i, text in enumerate(pages):
                doc = stages(Document(id=f"{folder}/{i}", url="", source="flores", text=text))
                if not isinstance(doc, Document):
                    continue
                if doc.lang in rights:
                    right += 1
                else:
                    wrong += 1
                    wrong_low += doc.lang_score < 0.5
                    wrong_as[doc.lang] = wrong_as.get(doc.lang, 0) + 1
            rows[folder] = {"truth": truth, "pages": len(pages), "right": right, "wrong": wrong,
                            "wrong_below_0.5": wrong_low, "wrong_as": wrong_as}
    return rows


def lingua(overrides: dict, per_page: int = 8) -> dict:
    """A third source, for language ID only: lingua-py's test sentences (Leipzig news/web text, 75 languages;
    CC BY-NC: measured here, never fitted on), 8 sentences a page, the languages lid.176 names."""
    known = model_codes()
    rows = {}
    with chain(overrides, {"langid"}) as stages:
        for path in sorted(glob.glob(os.path.join(MULTILINGUAL, "lingua_testdata", "sentences", "*.txt"))):
            lang = os.path.basename(path)[:-4]
            if lang not in known:
                continue
            with open(path, encoding="utf-8") as fh:
                sentences = [line.strip() for line in fh if line.strip()]
            right = wrong = 0
            for i in range(0, len(sentences) - per_page + 1, per_page):
                doc = stages(Document(id=f"{lang}/{i}", url="", source="lingua", text="\n".join(sentences[i:i + per_page])))
                if isinstance(doc, Document):
                    right += doc.lang == lang
                    wrong += doc.lang != lang
            rows[lang] = {"pages": len(sentences) // per_page, "right": right, "wrong": wrong}
    pages = sum(r["pages"] for r in rows.values())
    return {"languages": len(rows), "with_recall_0.9": sum(r["right"] / r["pages"] >= 0.9 for r in rows.values()),
            "right": round(sum(r["right"] for r in rows.values()) / pages, 4),
            "wrong": round(sum(r["wrong"] for r in rows.values()) / pages, 4),
            "lowest": sorted((round(r["right"] / r["pages"], 2), lang) for lang, r in rows.items())[:6]}


def ntrex(overrides: dict, docs_per_language: int = 25) -> dict:
    known = model_codes()
    names = {spec.name for spec in stage_table() if spec.runs == DOCUMENT}
    out: dict[str, dict] = {}
    with chain(overrides, names) as stages:
        for code, number, text in reference.ntrex_documents(MULTILINGUAL):
            lang = reference.lid_code(code, known)
            if lang is None or number >= docs_per_language or lang in out and out[lang]["code"] != code:
                continue
            row = out.setdefault(lang, {"code": code, "pages": 0, "dropped": 0, "why": {}})
            row["pages"] += 1
            result = stages(Document(id=f"{code}/{number}", url="", source="ntrex", text=text))
            if not isinstance(result, Document):
                row["dropped"] += 1
                key = f"{result.stage}:{result.reason}"
                row["why"][key] = row["why"].get(key, 0) + 1
    return out


def summary(label_rows: dict, ntrex_rows: dict) -> dict:
    known = {f: r for f, r in label_rows.items() if r["truth"]}
    unknown = {f: r for f, r in label_rows.items() if not r["truth"]}
    pages = sum(r["pages"] for r in label_rows.values())
    en = ntrex_rows["en"]["dropped"] / ntrex_rows["en"]["pages"]
    unfair = sorted((lang for lang, r in ntrex_rows.items()
                     if r["dropped"] / r["pages"] > max(2 * en, en + 0.05)),
                    key=lambda lang: -ntrex_rows[lang]["dropped"])
    return {
        "flores_folders": len(label_rows), "known": len(known), "unknown": len(unknown),
        "known_with_recall_0.9": sum(r["right"] / r["pages"] >= 0.9 for r in known.values()),
        "known_wrong_kept": sum(r["wrong"] for r in known.values()) / sum(r["pages"] for r in known.values()),
        "unknown_kept": sum(r["wrong"] for r in unknown.values()) / sum(r["pages"] for r in unknown.values()),
        "wrong_below_0.5_of_all": sum(r["wrong_below_0.5"] for r in label_rows.values()) / pages,
        "ntrex_languages": len(ntrex_rows), "ntrex_en_dropped": en,
        "ntrex_unfair": {lang: round(ntrex_rows[lang]["dropped"] / ntrex_rows[lang]["pages"], 2) for lang in unfair},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--thresholds", default="bundled")
    parser.add_argument("--set", action="append", default=[], dest="set_values")
    parser.add_argument("--json", help="write every row here")
    args = parser.parse_args()
    overrides = set_values(args.set_values, type(load_config()))
    overrides["thresholds"] = None if args.thresholds == "none" else args.thresholds
    label_rows, ntrex_rows = labels(overrides), ntrex(overrides)
    result = summary(label_rows, ntrex_rows)
    result["lingua"] = lingua(overrides)
    print(json.dumps(result, indent=1))
    worst = sorted(((r["wrong"] / r["pages"], f, r["wrong_as"]) for f, r in label_rows.items() if r["wrong"]),
                   reverse=True)[:15]
    print("most wrong labels kept:", "; ".join(f"{f} {share:.0%} as {as_}" for share, f, as_ in worst))
    low = sorted((r["right"] / r["pages"], f) for f, r in label_rows.items() if r["truth"])[:15]
    print("lowest recall:", ", ".join(f"{f} {share:.0%}" for share, f in low))
    for lang, share in result["ntrex_unfair"].items():
        print(f"ntrex unfair {lang} {share}: {ntrex_rows[lang]['why']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"summary": result, "labels": label_rows, "ntrex": ntrex_rows}, fh, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
