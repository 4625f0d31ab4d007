"""The toxicity classifier judged across data sets: every figure comes from text of another source than the
model's training data (issue 35). Successor of bench/harmful_by_language.py's toxicity columns.

    .venv/bin/python bench/toxicity_cross.py [--model PATH] [--json FILE]
    .venv/bin/python bench/toxicity_cross.py --lodo civil_comments davidson mlma_en   (the recipe, leave one out)

Without --lodo: the model (default: the bundled one) on
  * every labeled set of shared/data/harmful (toxicity/ and toxicity_multilingual/) its card does not list as
    training data (for the bundled model: the non-commercial sets, which may measure but not train it):
    precision, recall, F1 at 0.5/0.7/0.9 and the best recall at precision >= 0.8;
  * held-out reference sentences (NTREX-128 news, FLORES-200 Wikipedia; the same documents held out in every
    language), all of them and those whose English original names a group, religion, nation or party:
    the share scoring >= 0.5/0.7/0.9 (false positives) per language;
  * the held-out half of the bench WARC's pages (extracted, lid.176), scored as the stage scores pages
    (highest paragraph): the share of ordinary pages at >= 0.5/0.7/0.9 per language.
With --lodo D...: for each D, a model of the recipe (scripts/build_toxicity_model.py: its data and settings)
trained without D, then measured on D: leave-one-data-set-out.
Prints Markdown; `--json FILE` also writes the figures.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from scripts.build_toxicity_model import (  # noqa: E402
    MULTILINGUAL,
    SETTINGS,
    bench_pages,
    examples,
    labeled_sets,
    lid_labels,
    training_examples,
)
from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer  # noqa: E402
from stages.harmful.toxicity_train import TOXICITY, read_parallel  # noqa: E402
from stages.quality_train import train  # noqa: E402

THRESHOLDS = (0.5, 0.7, 0.9)
LANGS = ("en", "de", "fr", "es", "it", "nl", "pl", "pt", "hi", "zh", "ar", "ko", "ru", "tr", "id", "ja", "uk", "vi")


def rates(scores, truth) -> dict:
    """Precision, recall and F1 at each threshold, and the best recall at precision >= 0.8 (with its threshold)."""
    out = {}
    for t in THRESHOLDS:
        tp = sum(s >= t and y for s, y in zip(scores, truth))
        fp = sum(s >= t and not y for s, y in zip(scores, truth))
        fn = sum(s < t and y for s, y in zip(scores, truth))
        p, r = (tp / (tp + fp) if tp + fp else 0.0), (tp / (tp + fn) if tp + fn else 0.0)
        out[str(t)] = {"precision": round(p, 3), "recall": round(r, 3), "f1": round(2 * p * r / (p + r) if p + r else 0, 3)}
    best = (0.0, None)
    for step in range(1, 20):
        t = step / 20
        tp = sum(s >= t and y for s, y in zip(scores, truth))
        fp = sum(s >= t and not y for s, y in zip(scores, truth))
        if tp + fp and tp / (tp + fp) >= 0.8 and tp / max(sum(truth), 1) > best[0]:
            best = (round(tp / max(sum(truth), 1), 3), t)
    out["recall_at_precision_0.8"] = {"recall": best[0], "threshold": best[1]}
    return out


def flagged(scores) -> dict:
    return {str(t): round(sum(s >= t for s in scores) / max(len(scores), 1), 4) for t in THRESHOLDS}


def measure(scorer: ToxicityScorer, labeled: dict, reference: list, pages: list) -> dict:
    score = lambda text: scorer.score(text)[0]  # noqa: E731  (as the stage scores a page)
    out = {"labeled": {}, "reference": {}, "identity": {}, "pages": {}}
    for name, items in sorted(labeled.items()):
        out["labeled"][name] = dict(lang=items[0].lang, n=len(items), toxic=sum(e.toxic for e in items),
                                    **rates([score(e.text) for e in items], [e.toxic for e in items]))
    for lang in LANGS:
        part = [e for e in reference if e.lang == lang]
        if part:
            scores = [score(e.text) for e in part]
            out["reference"][lang] = dict(n=len(part), **flagged(scores))
            ident = [s for s, e in zip(scores, part) if e.identity]
            out["identity"][lang] = dict(n=len(ident), **flagged(ident))
    by_lang = collections.defaultdict(list)
    for lang, text in pages:
        by_lang[lang].append(score(text))
    out["pages"]["all"] = dict(n=len(pages), **flagged([s for v in by_lang.values() for s in v]))
    for lang, scores in sorted(by_lang.items(), key=lambda kv: -len(kv[1])):
        out["pages"][lang] = dict(n=len(scores), **flagged(scores))
    return out


def markdown(result: dict) -> str:
    lines = ["| data set | lang | n (toxic) | P / R at 0.5 | P / R at 0.7 | P / R at 0.9 | R at P >= 0.8 (threshold) |",
             "|---|---|---|---|---|---|---|"]
    for name, m in result["labeled"].items():
        cells = [f"{m[str(t)]['precision']:.2f} / {m[str(t)]['recall']:.2f}" for t in THRESHOLDS]
        best = m["recall_at_precision_0.8"]
        lines.append(f"| {name} | {m['lang']} | {m['n']} ({m['toxic']}) | " + " | ".join(cells)
                     + f" | {best['recall']:.2f} ({best['threshold']}) |")
    lines += ["", "| lang | reference sentences >= 0.5 / 0.7 / 0.9 | naming a group >= 0.5 / 0.7 / 0.9 | "
                  "bench pages >= 0.5 / 0.7 / 0.9 |", "|---|---|---|---|"]
    for lang in sorted(set(result["reference"]) | set(result["pages"]) - {"all"},
                       key=lambda lang: (lang not in LANGS, LANGS.index(lang) if lang in LANGS else lang)):
        cells = []
        for part in ("reference", "identity", "pages"):
            m = result[part].get(lang)
            cells.append(f"{m['0.5']:.3f} / {m['0.7']:.3f} / {m['0.9']:.3f} (n={m['n']})" if m else "")
        lines.append(f"| {lang} | " + " | ".join(cells) + " |")
    p = result["pages"]["all"]
    lines.append(f"| all pages | | | {p['0.5']:.3f} / {p['0.7']:.3f} / {p['0.9']:.3f} (n={p['n']}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a toxicity model (default: the bundled one)")
    p.add_argument("--lodo", nargs="*", default=None, metavar="DATASET",
                   help="leave-one-data-set-out: train the recipe without each DATASET and measure it there")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    labels = lid_labels()
    sets = labeled_sets()
    reference = [e for e in read_parallel(MULTILINGUAL, labels) if e.held_out]
    if args.lodo is not None:
        results, every = {}, list(examples())
        for dataset in args.lodo:
            positives, negatives = training_examples(exclude=(dataset,), every=every)
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "m.ftz")
                train([e.text for e in positives], [e.text for e in negatives], path, SETTINGS,
                      held_out=([e.text for e in sets[dataset] if e.toxic], [e.text for e in sets[dataset] if not e.toxic]),
                      labels=TOXICITY)
                scorer = ToxicityScorer(ToxicityConfig(model=path))
                scorer.setup()
                results[dataset] = measure(scorer, {dataset: sets[dataset]}, [], [])["labeled"][dataset]
            print(f"{dataset}: {json.dumps(results[dataset])}", flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(results, fh, indent=1)
        return 0
    scorer = ToxicityScorer(ToxicityConfig(model=args.model))
    scorer.setup()
    card_path = (args.model or os.path.join(os.path.dirname(__file__), "..", "stages", "models", "toxicity.ftz")) \
        + ".card.json"
    trained_on = set()
    if os.path.exists(card_path):
        with open(card_path, encoding="utf-8") as fh:
            trained_on = set(json.load(fh).get("training_datasets", []))
    independent = {name: examples for name, examples in sets.items() if name not in trained_on}
    result = measure(scorer, independent, reference, list(bench_pages()))
    result["trained_on"] = sorted(trained_on)
    print(markdown(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
