"""The toxicity classifier judged across data sets: every figure comes from text of another source than the
model's training data (issue 35; the measurements: stages/harmful/toxicity_eval.py).

    .venv/bin/python bench/toxicity_cross.py [--model PATH] [--json FILE]
    .venv/bin/python bench/toxicity_cross.py --lodo zh_cold zh_swsr ... [--card]   (the recipe, leave one out)
    .venv/bin/python bench/toxicity_cross.py --summary     (the bundled card's figures, one table per language)

Without --lodo: the model (default: the bundled one) on
  * every labeled set of shared/data/harmful (toxicity/ and toxicity_multilingual/) its card does not list as
    training data (for the bundled model: the non-commercial sets, which may measure but not train it, and
    Civil Comments): precision, recall, F1 at 0.5/0.7/0.9 and the best recall at precision >= 0.8;
  * held-out reference sentences (NTREX-128 news, FLORES-200 Wikipedia; the same documents held out in every
    language), all of them and those whose English original names a group, religion, nation or party:
    the share scoring >= 0.5/0.7/0.9 (false positives) per language;
  * the held-out half of the bench WARC's pages (extracted, lid.176), scored as the stage scores pages
    (highest paragraph): the share of ordinary pages at >= 0.5/0.7/0.9 per language;
  * Leipzig web sentences (lingua's test data, 75 languages, never trained on) as pages of 20: the same shares,
    for every language (the bench WARC has 1 to 7 held-out pages outside English and German).
With --lodo D...: for each D, a model of the recipe (scripts/build_toxicity_model.py: its data and settings,
without its sanity split) trained without D, its language offsets fitted as the recipe fits them, then measured
on D: leave-one-data-set-out; for a language with one set, the model has seen no labeled text of that language. --card writes the figures into the bundled
model's card (`cross_data_set`, or with --lodo `leave_one_data_set_out`).
Prints Markdown; `--json FILE` also writes the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

from scripts.build_toxicity_model import (  # noqa: E402
    LEIPZIG,
    MULTILINGUAL,
    OUTPUT,
    SETTINGS,
    bench_pages,
    examples,
    labeled_sets,
    lid_labels,
    training_examples,
    write_card,
)
from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer, load_model  # noqa: E402
from stages.harmful.toxicity_eval import THRESHOLDS, language_table, markdown, measure  # noqa: E402
from stages.harmful.toxicity_train import (  # noqa: E402
    MASK_SOURCES,
    TOXICITY,
    fit_language_masks,
    fit_language_offsets,
    read_parallel,
    web_sentence_pages,
)
from stages.quality_train import train  # noqa: E402


def leave_one_out(names: list[str], sets: dict) -> dict:
    """{set: figures of the recipe trained without it, measured on it}."""
    results, every = {}, list(examples())
    reference = [e for e in read_parallel(MULTILINGUAL, lid_labels()) if e.held_out]
    trained_reference = [e for e in every if e.dataset in MASK_SOURCES and not e.held_out]
    for dataset in names:
        positives, negatives = training_examples(exclude=(dataset,), every=every)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.ftz")
            held = sets[dataset]
            train([e.text for e in positives], [e.text for e in negatives], path, SETTINGS, labels=TOXICITY,
                  held_out=([e.text for e in held if e.toxic], [e.text for e in held if not e.toxic]), force=True)
            # its own offsets and masks, fitted as the recipe fits the bundled model's
            offsets = fit_language_offsets(load_model(path), reference)
            masks = fit_language_masks(load_model(path), offsets["offsets"], trained_reference, positives)
            write_card(dict(language_offsets=offsets, language_masks=masks), path)
            scorer = ToxicityScorer(ToxicityConfig(model=path))
            scorer.setup()
            results[dataset] = measure(lambda text, lang, s=scorer: s.score(text, lang)[0],
                                       {dataset: held})["labeled"][dataset]
        print(f"{dataset}: {json.dumps(results[dataset])}", flush=True)
    return results


def lodo_markdown(results: dict) -> str:
    lines = ["| held out | lang | n (toxic) | P / R at 0.5 | P / R at 0.7 | P / R at 0.9 | R at P >= 0.8 |",
             "|---|---|---|---|---|---|---|"]
    for name, m in results.items():
        cells = [f"{m[str(t)]['precision']:.2f} / {m[str(t)]['recall']:.2f}" for t in THRESHOLDS]
        lines.append(f"| {name} | {m['lang']} | {m['n']:,} ({m['toxic']:,}) | " + " | ".join(cells)
                     + f" | {m['recall_at_precision_0.8']['recall']:.2f} |")
    return "\n".join(lines)


def _update_card(change) -> None:
    """Read the bundled card, `change(card)`, write it back."""
    with open(OUTPUT + ".card.json", encoding="utf-8") as fh:
        card = json.load(fh)
    change(card)
    with open(OUTPUT + ".card.json", "w", encoding="utf-8") as fh:
        json.dump(card, fh, indent=2, ensure_ascii=False)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a toxicity model (default: the bundled one)")
    p.add_argument("--lodo", nargs="*", default=None, metavar="DATASET",
                   help="leave-one-data-set-out: train the recipe without each DATASET and measure it there")
    p.add_argument("--card", action="store_true",
                   help="write the figures into the bundled model's card (cross_data_set; with --lodo: "
                        "leave_one_data_set_out)")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--summary", action="store_true",
                   help="print the bundled card's figures per language (after --lodo --card) and stop")
    args = p.parse_args(argv)
    if args.summary:
        with open(OUTPUT + ".card.json", encoding="utf-8") as fh:
            print(language_table(json.load(fh)))
        return 0
    sets = labeled_sets()
    if args.lodo is not None:
        result = leave_one_out(args.lodo, sets)
        print(lodo_markdown(result))
        if args.card:
            _update_card(lambda card: card.setdefault("leave_one_data_set_out", {}).update(result))
    else:
        scorer = ToxicityScorer(ToxicityConfig(model=args.model))
        scorer.setup()
        card_path = (args.model or OUTPUT) + ".card.json"
        trained_on = set()
        if os.path.exists(card_path):
            with open(card_path, encoding="utf-8") as fh:
                trained_on = set(json.load(fh).get("training_datasets", []))
        independent = {name: items for name, items in sets.items() if name not in trained_on}
        reference = [e for e in read_parallel(MULTILINGUAL, lid_labels()) if e.held_out]
        result = measure(lambda text, lang: scorer.score(text, lang)[0], independent, reference, list(bench_pages()),
                         web_sentence_pages(LEIPZIG))
        print(markdown(result))
        if args.card and args.model is None:
            _update_card(lambda card: card["cross_data_set"].update(result))
        result["trained_on"] = sorted(trained_on)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
