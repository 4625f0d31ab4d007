"""The quality classifier on the recipe's held-out data: ROC AUC of prose vs junk, per kind of junk and per
language, the score deciles of kept benchmark pages, and scoring speed; one model or two side by side.

    python bench/quality_model.py [--old OLD.ftz --old-normalization plain] [--new stages/models/quality.ftz]
                                  [--examples FILE.jsonl]

Held-out data (scripts/build_quality_model.py): reference prose of held-out document numbers and the
machine-made negatives made from them (listings, keyword stuffing), in every reference language; held-out sites'
main-text snippets vs boilerplate snippets (trafilatura's evaluation), main text vs boilerplate pieces of
the same held-out pages, and the main text of held-out benchmark pages the filters keep (deciles). The
old bundled model read text without line breaks (`--old-normalization plain`).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

from common.ranking import auc  # noqa: E402
from stages.quality import load_model, normalize, normalize_page, page_signals, predict_hq  # noqa: E402
from stages.quality_signals import RAMPS, cap, combine  # noqa: E402
from stages.reference_lm import ReferenceModels  # noqa: E402
from stages.text_repair import damage, repair  # noqa: E402

PAIRS = {  # what is told apart: (positive kinds, negative kinds)
    "reference prose vs machine-made": (("ntrex", "flores"), ("listing", "keywords")),
    "main-text vs boilerplate snippets (same pages)": (("with_snippets",), ("without_snippets",)),
    "main text vs boilerplate (same pages)": (("main_text",), ("boilerplate",)),
    "reference prose vs crawl junk": (("ntrex", "flores"), ("boilerplate", "without_snippets", "dropped_page")),
    "main text vs menus as tables (same pages)": (("main_text",), ("chrome_table",)),
    "reference prose vs broken text": (("ntrex", "flores"), ("garbled",)),
}


def load_examples(path: str | None) -> list[dict]:
    if path:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh]
    import dataclasses

    import shared_data
    from build_quality_model import BENCH, EVALDATA, MULTILINGUAL, collect

    shared_data.require("bench/quality_model.py", {BENCH: "the 1,033-page benchmark WARC",
                                                   EVALDATA: "trafilatura's annotated pages",
                                                   MULTILINGUAL: "NTREX-128 and FLORES-200 reference text"})
    return [dataclasses.asdict(e) for e in collect()]


def measure(model_path: str | None, normalization: str, examples: list[dict], judgment: bool = False) -> dict:
    model = load_model(model_path)
    norm = normalize_page if normalization == "lines" else normalize
    held = [e for e in examples if e["held_out"]]
    started = time.perf_counter()
    scores = predict_hq(model, [norm(e["text"]) for e in held])
    speed = len(held) / (time.perf_counter() - started)
    if judgment:  # the quality judgment: the model's score times each signal's cap (stages/quality_signals.py)
        repaired = [repair(e["text"])[0] for e in held]  # as the pipeline does before judging
        reference = ReferenceModels()
        measured = [{**page_signals(t, e["lang"], reference), "encoding_damage": damage(t)} for e, t in zip(held, repaired)]
        per_signal = {name: [cap(name, m[name]) for m in measured] for name in RAMPS}
        scores = [combine(s, m) for s, m in zip(scores, measured)]
    by_kind = collections.defaultdict(list)
    by_kind_lang = collections.defaultdict(list)
    for e, s in zip(held, scores):
        by_kind[e["kind"]].append(s)
        by_kind_lang[(e["kind"], e["lang"])].append(s)
    result = {"docs_per_s": round(speed), "auc": {}, "per_language": {}}
    for name, (pos_kinds, neg_kinds) in PAIRS.items():
        result["auc"][name] = round(auc([s for k in pos_kinds for s in by_kind[k]],
                                        [s for k in neg_kinds for s in by_kind[k]]) or 0, 4)
    langs = sorted({lang for kind, lang in by_kind_lang if kind in ("ntrex", "flores") and lang})
    for lang in langs:
        pos = [s for k in ("ntrex", "flores") for s in by_kind_lang[(k, lang)]]
        neg = [s for k in ("listing", "keywords") for s in by_kind_lang[(k, lang)]]
        page_pos, page_neg = by_kind_lang[("main_text", lang)], by_kind_lang[("boilerplate", lang)]
        result["per_language"][lang] = {"prose_vs_machine_made": auc(pos, neg),
                                        "main_vs_boilerplate": auc(page_pos, page_neg) if len(page_pos) >= 5
                                        and len(page_neg) >= 5 else None}
    if judgment:  # each signal alone, as a score (its cap: 1 = reads as prose, 0 = junk)
        result["auc_per_signal"] = {}
        for signal, caps in per_signal.items():
            kinds = collections.defaultdict(list)
            for e, c in zip(held, caps):
                kinds[e["kind"]].append(c)
            result["auc_per_signal"][signal] = {name: round(auc([c for k in pos for c in kinds[k]],
                                                                 [c for k in neg for c in kinds[k]]) or 0, 4)
                                                for name, (pos, neg) in PAIRS.items()}
    kept = sorted(by_kind["main_text"])
    result["kept_page_deciles"] = [round(kept[min(int(q / 10 * len(kept)), len(kept) - 1)], 3) for q in range(1, 10)]
    result["mean_score"] = {k: round(sum(v) / len(v), 3) for k, v in sorted(by_kind.items())}
    result["held_out"] = {k: len(v) for k, v in sorted(by_kind.items())}
    return result


LABELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "quality_demo_labels.tsv")


def measure_pages(run: str, model_path: str | None) -> dict:
    """On pages of other sites than any the model trained on (the demo WARCs' pages in a run's shards, labelled
    by eye in bench/data/quality_demo_labels.tsv): AUC of prose vs junk for the model, the judgment and each
    signal's cap, and where the menu/table and mojibake pages land."""
    import glob

    import pyarrow.parquet as pq

    labels = {}
    with open(LABELS, encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("#") and line.strip():
                url, label, _ = line.rstrip("\n").split("\t")
                labels[url] = int(label)
    files = glob.glob(os.path.join(run, "data", "*.parquet")) + glob.glob(os.path.join(run, "valid", "data", "*.parquet"))
    rows = [r for f in files for r in pq.read_table(f, columns=["url", "text", "epoch", "lang"]).to_pylist()
            if r["epoch"] == 0 and r["url"] in labels]
    model = load_model(model_path)
    model_scores = predict_hq(model, [normalize_page(r["text"]) for r in rows])
    reference = ReferenceModels()
    measured = [{**page_signals(t, r["lang"], reference), "encoding_damage": damage(t)}
                for r, t in zip(rows, (repair(r["text"])[0] for r in rows))]
    columns = {"model": model_scores, "judgment": [combine(s, m) for s, m in zip(model_scores, measured)],
               **{f"{name} (cap)": [cap(name, m[name]) for m in measured] for name in RAMPS},
               # the signal's value itself, lower read as better (a cap fires only in the tail it is set for)
               **{f"{name} (value)": [-(m[name] or 0.0) for m in measured] for name in RAMPS}}
    result = {"pages": len(rows), "junk": sum(1 for r in rows if not labels[r["url"]]), "auc": {}}
    for name, scores in columns.items():
        pos = [s for r, s in zip(rows, scores) if labels[r["url"]]]
        neg = [s for r, s in zip(rows, scores) if not labels[r["url"]]]
        result["auc"][name] = round(auc(pos, neg), 4)
    result["junk_above_0.5"] = {name: sum(1 for r, s in zip(rows, scores) if not labels[r["url"]] and s >= 0.5)
                                for name, scores in columns.items() if name in ("model", "judgment")}
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--new", default=None, help="model to measure (default: the bundled one)")
    p.add_argument("--old", help="a second model, side by side")
    p.add_argument("--old-normalization", choices=("plain", "lines"), default="plain")
    p.add_argument("--pages", metavar="RUN", help="also measure on the labelled demo pages in RUN's shards "
                   "(bench/data/quality_demo_labels.tsv; RUN: make ablate-demo's out/pool)")
    p.add_argument("--examples", help="the recipe's examples as JSONL (default: collect them now, ~1 min)")
    args = p.parse_args()
    examples = load_examples(args.examples)
    out = {"new": measure(args.new, "lines", examples)}
    out["judgment"] = measure(args.new, "lines", examples, judgment=True)
    if args.old:
        out["old"] = measure(args.old, args.old_normalization, examples)
    for name, r in out.items():
        weak = sorted(k for k, v in r["per_language"].items() if (v["prose_vs_machine_made"] or 0) < 0.9)
        print(f"{name}: {r['docs_per_s']:,} docs/s; " + "; ".join(f"{k} AUC {v}" for k, v in r["auc"].items()))
        print(f"  kept benchmark pages, score deciles: {r['kept_page_deciles']}")
        print(f"  {len(r['per_language'])} languages; prose vs machine-made AUC < 0.9 in: {', '.join(weak) or 'none'}")
        pages = {k: round(v["main_vs_boilerplate"], 3) for k, v in r["per_language"].items() if v["main_vs_boilerplate"]}
        print(f"  main text vs boilerplate AUC by page language: {pages}")
        print(f"  mean score by kind: {r['mean_score']}")
        for signal, aucs in r.get("auc_per_signal", {}).items():
            print(f"  {signal} alone: " + "; ".join(f"{k} AUC {v}" for k, v in aucs.items()))
    if args.pages:
        pages = measure_pages(args.pages, args.new)
        print(f"demo pages of other sites ({pages['pages']}, {pages['junk']} junk), prose vs junk AUC: "
              + "; ".join(f"{k} {v}" for k, v in pages["auc"].items()))
        print(f"  junk pages scored >= 0.5: {pages['junk_above_0.5']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
