"""`refinery train-quality` and `refinery train-toxicity`: train a two-label fastText classifier from
labeled files (the quality classifier, or the toxicity classifier), with held-out metrics and a card."""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from common.settings import add_flags, add_set_flag, error_text, flag_values, load, set_values
from stages.quality_train import QUALITY, Labels, QualityTrainConfig, read_texts, train, train_graded

# command -> (flag of the positive texts, flag of the negative texts, what the score becomes)
KINDS = {"train-quality": ("positive", "negative", "`quality_score`"),
         "train-toxicity": ("toxic", "clean", "`toxicity_score` (scored per paragraph)")}


def _labels(command: str) -> Labels:
    if command == "train-toxicity":
        from stages.harmful.toxicity_train import TOXICITY

        return TOXICITY
    return QUALITY


def build_parser(command: str = "train-quality") -> argparse.ArgumentParser:
    labels = _labels(command)
    pos, neg, becomes = KINDS[command]
    p = argparse.ArgumentParser(
        prog=f"refinery {command}",
        description=f"Train a fastText classifier ({labels.positive} / {labels.negative}) whose P({labels.positive}) "
                    f"becomes {becomes}. Prints held-out precision/recall/F1 and writes MODEL plus MODEL.card.json.")
    p.add_argument(f"--{pos}", nargs="+", action="extend", metavar="FILE", dest="positive",
                   help=f"{labels.meaning[labels.positive]} texts: .jsonl[.gz], .parquet, or plain text (one per line)")
    p.add_argument(f"--{neg}", nargs="+", action="extend", metavar="FILE", dest="negative",
                   help=f"{labels.meaning[labels.negative]} texts, same formats")
    if command == "train-quality":
        p.add_argument("--graded", nargs="+", action="extend", metavar="FILE",
                       help="instead of --positive/--negative: JSONL/Parquet records with a text and a grade 0-5 "
                            "(e.g. `refinery annotate` output); the score becomes the expected grade / 5")
        p.add_argument("--grade-field", default="score", help="field holding the grade (default: score)")
    p.add_argument("--output", required=True, metavar="MODEL", help="model path (.ftz when quantized, else .bin)")
    p.add_argument("--text-field", default="text", help="field holding the text in JSONL/Parquet (default: text)")
    p.add_argument("--description", default="", help="what the training data is, for the model card")
    p.add_argument("--force", action="store_true", help="write the model even if its held-out F1 is under --min-f1")
    p.add_argument("--config", metavar="YAML", help="QualityTrainConfig settings as YAML; flags override it")
    add_set_flag(p)
    add_flags(p, QualityTrainConfig, aliases={"word_ngrams": ["--ngrams"]})
    return p


def _load_graded(paths: Sequence[str], text_field: str, grade_field: str) -> list[tuple[str, float]]:
    from stages.formats import read_records

    examples = []
    for path in paths:
        for n, record in enumerate(read_records(path), 1):
            try:
                examples.append((record[text_field], float(record[grade_field])))
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}: record {n} has no {text_field!r} text and numeric {grade_field!r} grade "
                                 f"({type(exc).__name__})") from exc
    return examples


def _load(paths: Sequence[str], field: str) -> list[str]:
    texts = []
    for path in paths:
        texts.extend(read_texts(path, field))
    return texts


def main(argv: Sequence[str] | None = None, command: str = "train-quality") -> int:
    args = build_parser(command).parse_args(argv)
    try:
        overrides = set_values(args.set_values, QualityTrainConfig)
        overrides.update(flag_values(args, QualityTrainConfig))
        config = load(QualityTrainConfig, args.config, overrides)
        if getattr(args, "graded", None):
            examples = _load_graded(args.graded, args.text_field, args.grade_field)
            card = train_graded(examples, args.output, config, args.description or f"graded: {', '.join(args.graded)}")
        else:
            if not args.positive or not args.negative:
                raise ValueError(f"give --{KINDS[command][0]} and --{KINDS[command][1]} files"
                                 + (" (or --graded)" if command == "train-quality" else ""))
            positives, negatives = _load(args.positive, args.text_field), _load(args.negative, args.text_field)
            description = args.description or f"positives: {', '.join(args.positive)}; negatives: {', '.join(args.negative)}"
            card = train(positives, negatives, args.output, config, description, labels=_labels(command),
                         force=args.force)
    except (OSError, ValueError) as exc:
        print(f"refinery {command}: error: {error_text(exc)}", file=sys.stderr)
        return 2
    m = card["held_out_metrics"]
    if "mean_absolute_error" in m:
        print(f"held-out: mean absolute error {m['mean_absolute_error']:.3f} grades, within one grade "
              f"{m['within_one_grade']:.3f}  (n={m['n']})")
        print(f"model: {args.output} ({card['model_bytes'] / 1e6:.2f} MB); card: {args.output}.card.json")
        return 0
    print(f"held-out: precision {m['precision']:.3f}  recall {m['recall']:.3f}  F1 {m['f1']:.3f}  "
          f"accuracy {m['accuracy']:.3f}  (n={m['n']})")
    print(f"model: {args.output} ({card['model_bytes'] / 1e6:.2f} MB); card: {args.output}.card.json")
    print(json.dumps(card["sizes"]))
    return 0
