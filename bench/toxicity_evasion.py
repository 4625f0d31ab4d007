"""The toxicity score on labelled text as written and with the evasions writers use against filters (issue 56).

    .venv/bin/python bench/toxicity_evasion.py [--model M] [--json FILE] [--no-respell]
    .venv/bin/python bench/toxicity_evasion.py --ordinary   (what respelling changes on ordinary pages)

Texts: the held-out part of the recipe's labelled sets (its sanity split) and every labelled set the model never
trained on (shared/data/harmful), up to 3,000 a set (seed 0). Each is scored as written, with a zero-width space
after the first letter of every word of 4 or more letters (what evasion tools insert; a soft hyphen or joiner
splits words the same way), with 30 % of those words' inner letters written as digits (a 4, e 3, i 1, o 0, s 5:
"n1gg3r"), and with 30 % of them in look-alike letters of the other script (Cyrillic "с" in a Latin word, Latin "y"
in a Cyrillic one), with 30 % of the Latin ones in Greek look-alikes ("fυck"), with 30 % of them with their inner vowels hidden by asterisks ("f*ck") and with 30 % spelled
out letter by letter ("f u c k"). Clean texts get the same treatment, so the AUC says whether the score still ranks toxic above clean.
The perturbations are synthetic; the texts are real and of other sources than the training data (but the first row).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

from common.ranking import auc  # noqa: E402
from scripts.build_toxicity_model import (  # noqa: E402
    LEIPZIG,
    RECIPE_SETS,
    SETTINGS,
    bench_pages,
    examples,
    labeled_sets,
    split,
)
from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer, windows  # noqa: E402
from stages.harmful.toxicity_train import web_sentence_pages  # noqa: E402

LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5"}
WORD = re.compile(r"\w{4,}")


def zero_width(text: str, rng: random.Random) -> str:
    return WORD.sub(lambda m: m.group(0)[0] + "\u200b" + m.group(0)[1:], text)


def leet(text: str, rng: random.Random, share: float = 0.3) -> str:
    def written(m: re.Match) -> str:
        word = m.group(0)
        return word if rng.random() >= share else word[0] + "".join(LEET.get(c, c) for c in word[1:-1]) + word[-1]
    return WORD.sub(written, text)


LATIN_LOOK_ALIKE = str.maketrans("aceopxy", "асеорху")  # Cyrillic letters that look like these Latin ones
CYRILLIC_LOOK_ALIKE = str.maketrans("асеорху", "aceopxy")


def look_alike(text: str, rng: random.Random, share: float = 0.3) -> str:
    """30 % of the words written with letters of the other script that look the same (Cyrillic "с" for Latin "c",
    Latin "y" for Cyrillic "у"), the others left as they are."""
    def written(m: re.Match) -> str:
        word = m.group(0)
        if rng.random() >= share:
            return word
        table = CYRILLIC_LOOK_ALIKE if any("\u0400" <= c <= "\u04ff" for c in word) else LATIN_LOOK_ALIKE
        return word[0] + word[1:].translate(table)
    return WORD.sub(written, text)


GREEK_LOOK_ALIKE = str.maketrans("aeikoptuvx", "αεικορτυνχ")  # Greek letters that look like these Latin ones


def greek_look_alike(text: str, rng: random.Random, share: float = 0.3) -> str:
    """30 % of the words of Latin letters written with Greek look-alikes after their first letter ("fυck")."""
    def written(m: re.Match) -> str:
        word = m.group(0)
        return word if rng.random() >= share or not word.isascii() else word[0] + word[1:].translate(GREEK_LOOK_ALIKE)
    return WORD.sub(written, text)


VOWELS = re.compile(r"(?<=\w)[aeiouаеиоуыэюя](?=\w)")


def masked(text: str, rng: random.Random, share: float = 0.3) -> str:
    """30 % of the words with their inner vowels hidden by asterisks ("f*ck", "b*tch"), as self-censored text is."""
    return WORD.sub(lambda m: m.group(0) if rng.random() >= share else VOWELS.sub("*", m.group(0)), text)


def spelled(text: str, rng: random.Random, share: float = 0.3) -> str:
    """30 % of the words spelled out letter by letter ("f u c k")."""
    return WORD.sub(lambda m: m.group(0) if rng.random() >= share else " ".join(m.group(0)), text)


PERTURBATIONS = {"as written": None, "zero-width spaces": zero_width, "leet, 30 % of words": leet,
                 "look-alike letters of the other script, 30 % of words": look_alike,
                 "Greek look-alike letters in Latin words, 30 % of words": greek_look_alike,
                 "vowels masked by asterisks, 30 % of words": masked, "spelled out, 30 % of words": spelled}


def measure(model: str | None, per_set: int = 3000, respell: bool = True) -> dict:
    train_and_test = split(list(examples()), SETTINGS.test_fraction, SETTINGS.seed)
    sets = {"held-out split of the training sets": [e for e in train_and_test[1] if e.dataset in RECIPE_SETS]}
    sets.update({name: items for name, items in labeled_sets().items() if name not in RECIPE_SETS})
    scorer = ToxicityScorer(ToxicityConfig(model=model, respell=respell))
    scorer.setup()
    out = {}
    for name, items in sets.items():
        items = random.Random(0).sample(items, min(per_set, len(items)))
        out[name] = {}
        for label, perturb in PERTURBATIONS.items():
            rng = random.Random(1)
            scores = [scorer.score(perturb(e.text, rng) if perturb else e.text, e.lang)[0] for e in items]
            toxic = [s for s, e in zip(scores, items) if e.toxic]
            clean = [s for s, e in zip(scores, items) if not e.toxic]
            out[name][label] = {"auc": round(auc(toxic, clean), 3),
                                "toxic_found_0.5": round(sum(s >= 0.5 for s in toxic) / len(toxic), 3),
                                "clean_flagged_0.5": round(sum(s >= 0.5 for s in clean) / max(1, len(clean)), 3)}
        print(name, json.dumps(out[name]), flush=True)
    return out


def _difference(before: str, after: str) -> str:
    """The part of a window respelling changed, with 30 characters around it."""
    start = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), min(len(before), len(after)))
    return f"{before[max(0, start - 30):start + 40]!r} -> {after[max(0, start - 30):start + 40]!r}"


def ordinary(model: str | None) -> dict:
    """What respelling does to ordinary text: Leipzig web sentences as pages and the held-out bench pages (never
    trained on), every window respelled and compared, every page judged with and without (`toxicity.respell`)."""
    scorer, plain = (ToxicityScorer(ToxicityConfig(model=model, respell=on)) for on in (True, False))
    scorer.setup()
    plain.setup()
    config = scorer.config
    out = {"pages": 0, "windows": 0, "windows_changed": 0, "pages_moved_over_0.05": [], "examples": []}
    for lang, text in web_sentence_pages(LEIPZIG) + list(bench_pages()):
        pieces = list(windows(text, config.window_chars, config.min_chars))
        respelled = scorer._respell.page(pieces)
        changed = [(a, b) for a, b in zip(pieces, respelled) if a != b]
        out["pages"] += 1
        out["windows"] += len(pieces)
        out["windows_changed"] += len(changed)
        out["examples"] += [_difference(a, b) for a, b in changed][:max(0, 30 - len(out["examples"]))]
        before, after = plain.judge(text, lang).score, scorer.judge(text, lang).score
        if abs(after - before) > 0.05:
            out["pages_moved_over_0.05"].append([lang, round(before, 3), round(after, 3)])
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a toxicity model (default: the bundled one)")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--no-respell", action="store_true", help="score without undoing masked and spelled-out words "
                                                              "(toxicity.respell: false): the before of RESULTS.md")
    p.add_argument("--ordinary", action="store_true", help="only: what respelling changes on ordinary pages")
    args = p.parse_args(argv)
    result = ordinary(args.model) if args.ordinary else measure(args.model, respell=not args.no_respell)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
