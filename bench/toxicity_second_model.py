"""Tried, not kept (issue 56; bench/RESULTS.md): a second toxicity model trained only on the recipe's texts that
name a group (by the lexicons of stages/harmful/identity/), used on the windows that name one, as min(P_main,
P_group) or P_group alone. Measured on the identity templates and the labelled sets the recipe never trained on.

    .venv/bin/python bench/toxicity_second_model.py        (~5 min; the model is written to /tmp)
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import toxicity_bias as TB  # noqa: E402

from common.ranking import auc  # noqa: E402
from scripts.build_toxicity_model import RECIPE_SETS, SETTINGS, labeled_sets, training_examples  # noqa: E402
from stages.harmful import identity_frames as F  # noqa: E402
from stages.harmful import toxicity as T  # noqa: E402
from stages.harmful.bias import group_metrics, summary  # noqa: E402
from stages.harmful.toxicity_train import TOXICITY  # noqa: E402
from stages.quality_train import train  # noqa: E402


def names_group(text: str, lang: str) -> bool:
    lex = F.lexicons().get(lang)
    return bool(lex) and any(terms and F._pattern(lex.lang, terms).search(text) for terms in (lex.groups, lex.swap))


def scorer(main, group, mode: str):
    """A page score: the main model's windows, those naming a group rescored by `mode` (main, min or group)."""
    def score(text: str, lang: str) -> float:
        scored = main.window_scores(text)
        if mode != "main":
            named = [w for _, w in scored if names_group(w, lang)]
            if named:
                pg = dict(zip(named, T.predict_toxic(group, [T.normalize(w) for w in named])))
                scored = [((min(p, pg[w]) if mode == "min" else pg[w]) if w in pg else p, w) for p, w in scored]
        return T.page_toxicity(scored, main.config).score
    return score


def main() -> None:
    started = time.time()
    pos, neg = training_examples()
    group_pos = [e.text for e in pos if names_group(e.text, e.lang)]
    group_neg = [e.text for e in neg if names_group(e.text, e.lang)]
    print(f"group-naming training examples: toxic {len(group_pos)} of {len(pos)}, clean {len(group_neg)} of "
          f"{len(neg)}", flush=True)
    path = os.path.join(tempfile.gettempdir(), "group_toxicity.ftz")
    train(group_pos, group_neg, path, SETTINGS, labels=TOXICITY, force=True)
    print(f"trained in {time.time() - started:.0f} s", flush=True)
    bundled = T.ToxicityScorer(T.ToxicityConfig())
    bundled.setup()
    group = T.load_model(path)
    modes = ("main", "min", "group")
    for name, lang, rows, min_texts in TB.template_sets():
        rows, cells = list(rows), []
        for mode in modes:
            score = scorer(bundled, group, mode)
            m = summary(group_metrics(rows, [score(r.text, lang) for r in rows], 0.5, min_texts))
            cells.append(f"{mode}: auc {m.get('auc')} bpsn {m.get('min_bpsn_auc')} benign {m.get('benign_flagged')} "
                         f"found {m.get('toxic_found')}")
        named = sum(names_group(r.text, lang) for r in rows) / len(rows)
        print(name, f"named by lexicon {named:.0%}", " | ".join(cells), flush=True)
    for name, items in sorted(labeled_sets().items()):
        if name in RECIPE_SETS:
            continue
        cells = []
        for mode in modes:
            score = scorer(bundled, group, mode)
            scores = [score(e.text, e.lang) for e in items]
            value = auc([x for x, e in zip(scores, items) if e.toxic], [x for x, e in zip(scores, items) if not e.toxic])
            cells.append(f"{mode} {value:.3f}")
        print("never trained on:", name, items[0].lang, " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
