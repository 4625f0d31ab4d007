"""Toxic comments put into ordinary pages of their own language: which pages the harmful-content stages catch.

    .venv/bin/python bench/toxicity_pages.py [--model PATH] [--min-toxic-windows N] [--json FILE] [--card]
    .venv/bin/python bench/toxicity_pages.py --table     (the bundled card's figures, as docs/harmful.md shows them)
    .venv/bin/python bench/toxicity_pages.py --page-rules   (other ways to judge a page from its windows, compared)

For every labelled set: its toxic texts (>= 40 characters) put, 1, 3 and 10 at a time, as paragraphs of their own
between the lines of Leipzig web-sentence pages of the set's language (20 sentences a page, never trained on;
`toxicity_train.web_sentence_pages`), each of the language's pages (at most 50) twice with other draws; each page
judged as the stage judges it, in its language. Found: page score >= 0.5, 0.7 and 0.9 (the recommended threshold);
the bad-word stage's default rule (density) on the same pages; either (score >= 0.9 or bad words). And the ordinary
pages themselves (Leipzig's, all languages; the bench WARC's held-out ones) at each threshold. The sets the model
never trained on are the evidence; the recipe's own sets give their held-out split only (a sanity check: same
source as the training text). The card's `page_test` puts held-out passages of the training sets into the bench
WARC's pages, mostly German ones, whatever the passage's language. `--card` writes the figures of both settings of
the stage's `min_toxic_windows` (2, the default: a page needs two toxic windows; 1: one decides) into the bundled
model's card (`page_test_by_set`); `--table` prints the default's per set, and both settings' costs.

--page-rules: the same pages (the sets never trained on, 3 and 10 put in; the sanity split's, 1 and 3) against
ordinary pages (Leipzig's, and the bench WARC's held-out ones), judged by other rules over the same window scores:
each rule at the thresholds where it flags 0.1 %, 0.4 % and 1 % of the ordinary pages, and what it finds there.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from scripts.build_toxicity_model import (  # noqa: E402
    BENCH,
    LEIPZIG,
    OUTPUT,
    RECIPE_SETS,
    SETTINGS,
    bench_pages,
    examples,
    labeled_sets,
    split,
)
from stages.harmful.badwords import BadWordsFilter  # noqa: E402
from stages.harmful.toxicity import (  # noqa: E402
    ToxicityConfig,
    ToxicityScorer,
    evidence_weighted,
    log_odds,
    page_from_weighted,
)
from stages.harmful.toxicity_train import insert_passage, web_sentence_pages  # noqa: E402

PASSAGES = (1, 3, 10)
DRAWS = 2           # each ordinary page this many times, with other passages
MIN_CHARS = 40      # as the card's page_test: a passage is a paragraph, not a two-word reply
RECOMMENDED = 0.9


def passages_by_set() -> dict[str, tuple[str, str, list[str]]]:
    """{set: (lang, how, toxic texts)}: the sets never trained on whole, the recipe's sets by their held-out split."""
    _, test_set = split(list(examples()), SETTINGS.test_fraction, SETTINGS.seed)
    held_out = {e.text for e in test_set}
    out = {}
    for name, items in sorted(labeled_sets().items()):
        trained = name in RECIPE_SETS
        toxic = [e.text for e in items if e.toxic and len(e.text) >= MIN_CHARS and (not trained or e.text in held_out)]
        if toxic:
            out[name] = (items[0].lang, "held-out split (sanity)" if trained else "never trained on", toxic)
    return out


def seeded_pages():
    """(set, lang, how, passages, k, pages with k passages put in) for every set with ordinary pages of its language."""
    pages: dict[str, list[str]] = {}
    for lang, text in web_sentence_pages(LEIPZIG):
        pages.setdefault(lang, []).append(text)
    for name, (lang, how, toxic) in passages_by_set().items():
        ordinary = pages.get(lang, [])[:50]
        rng = random.Random(0)
        for k in PASSAGES if ordinary else ():
            seeded = []
            for page in ordinary * DRAWS:
                for _ in range(k):
                    page = insert_passage(page, rng.choice(toxic), rng)
                seeded.append(page)
            yield name, lang, how, len(toxic), k, seeded


def ordinary_flagged(scorer: ToxicityScorer) -> dict:
    """The ordinary pages (Leipzig's, per language; the bench WARC's held-out ones) at or over 0.5 / 0.7 / 0.9."""
    by_lang: dict[str, list[float]] = {}
    for lang, text in web_sentence_pages(LEIPZIG):
        by_lang.setdefault(lang, []).append(scorer.judge(text, lang).score)
    bench = [scorer.judge(text, lang).score for lang, text in bench_pages()]
    shares = {t: {lang: sum(s >= t for s in scores) / len(scores) for lang, scores in by_lang.items()}
              for t in (0.5, 0.7, 0.9)}
    return {str(t): {"leipzig": round(sum(s >= t for v in by_lang.values() for s in v)
                                      / sum(map(len, by_lang.values())), 4),
                     "leipzig_worst": sorted(((round(v, 2), k) for k, v in shares[t].items() if v), reverse=True)[:5],
                     "bench": round(sum(s >= t for s in bench) / len(bench), 4)} for t in shares}


def measure(model: str | None = None, min_toxic_windows: int = ToxicityConfig().min_toxic_windows) -> dict:
    """{"sets": {set: figures}, "ordinary": ordinary_flagged} for the model at the stage's defaults but
    `min_toxic_windows`."""
    scorer = ToxicityScorer(ToxicityConfig(model=model, min_toxic_windows=min_toxic_windows))
    scorer.setup()
    bad_words = BadWordsFilter()
    out = {}
    for name, lang, how, passages, k, seeded in seeded_pages():
        row = out.setdefault(name, {"lang": lang, "how": how, "passages": passages, "pages": len(seeded)})
        found = {"0.5": 0, "0.7": 0, "0.9": 0, "bad_words": 0, "either": 0}
        for page in seeded:
            score = scorer.judge(page, lang).score
            words = bool(bad_words.evaluate(page, lang))
            for threshold in ("0.5", "0.7", "0.9"):
                found[threshold] += score >= float(threshold)
            found["bad_words"] += words
            found["either"] += words or score >= RECOMMENDED
        row[str(k)] = {key: round(v / row["pages"], 3) for key, v in found.items()}
        if k == PASSAGES[-1]:
            print(name, json.dumps(row), flush=True)
    return {"sets": out, "ordinary": ordinary_flagged(scorer)}


def _windows(scorer: ToxicityScorer, text: str, lang: str) -> list[tuple[float, str]]:
    """The page's windows as the stage weighs them (its language's offset, evidence by letters), most toxic first."""
    return evidence_weighted(scorer.offset_window_scores(text, lang), scorer.config)


def _stage(**settings):
    """The stage's own rule (`page_from_weighted`) with these settings."""
    config = ToxicityConfig(**settings)
    return lambda windows: page_from_weighted(windows, config).score


def _less_per_window(prior: float):
    """The stage's rule at `min_toxic_windows` 1 with `prior` x log(windows) taken from a toxic page's log-odds: a
    page of many windows shows one high window by chance more often."""
    one = _stage(min_toxic_windows=1)

    def rule(windows: list[tuple[float, str]]) -> float:
        score = one(windows)
        if not windows or windows[0][0] <= 0.5:  # no evidence: the worst window's score, as the stage's
            return score
        return 1.0 / (1.0 + math.exp(-(log_odds(score) - prior * math.log(len(windows)))))
    return rule


def _scores(windows: list[tuple[float, str]]) -> list[float]:
    return [p for p, _ in windows]


PAGE_RULES = {
    "min_toxic_windows 1 (the 3 most toxic windows' log-odds add)": _stage(min_toxic_windows=1),
    "min_toxic_windows 2, the stage's default (1, but one toxic window: the mean of the 2 most toxic)": _stage(),
    "the worst window alone": _stage(min_toxic_windows=1, combine=1),
    "the 10 most toxic windows' log-odds add": _stage(min_toxic_windows=1, combine=10),
    "min_toxic_windows 1, less 0.5 x log(windows)": _less_per_window(0.5),
    "min_toxic_windows 1, less 1 x log(windows)": _less_per_window(1.0),
    "log-odds over 0.3 add (3 most toxic)": lambda w: 1.0 / (1.0 + math.exp(-sum(
        log_odds(p) - log_odds(0.3) for p in _scores(w)[:3] if p > 0.3))) if w else 0.0,
    "the mean of the 2 most toxic windows": lambda w: sum(_scores(w)[:2]) / 2,
    "the count of windows >= 0.5, then the worst": lambda w: sum(p >= 0.5 for p in _scores(w)) + (w[0][0] if w else 0.0),
}


def page_rules(model: str | None = None, shares=(0.001, 0.004, 0.01)) -> dict:
    """Each of PAGE_RULES at the thresholds where it flags `shares` of the ordinary pages: what it finds there."""
    scorer = ToxicityScorer(ToxicityConfig(model=model))
    scorer.setup()
    ordinary = [_windows(scorer, text, lang) for lang, text in web_sentence_pages(LEIPZIG) + list(bench_pages())]
    toxic: dict[str, list[list[float]]] = {}
    for _, lang, how, _, k, seeded in seeded_pages():
        if (how == "never trained on") == (k > 1) or k == 3:
            toxic.setdefault(f"{'sets never trained on' if how == 'never trained on' else 'sanity split'}, {k} put in",
                             []).extend(_windows(scorer, page, lang) for page in seeded)
    out = {}
    for name, rule in PAGE_RULES.items():
        plain = sorted((rule(s) for s in ordinary), reverse=True)
        out[name] = {}
        for share in shares:
            threshold = plain[int(share * len(plain))]  # flags the pages scoring above it
            out[name][str(share)] = {kind: round(sum(rule(s) > threshold for s in pages) / len(pages), 3)
                                     for kind, pages in toxic.items()}
        print(name, json.dumps(out[name]), flush=True)
    return out


def table(figures: dict) -> str:
    """The figures as one Markdown table, the sets never trained on first."""
    lines = ["| set (lang) | passages from | pages | 1 put in: found at 0.5 / 0.9; bad words; either | 3 put in | "
             "10 put in |", "|---|---|---|---|---|---|"]
    for name, row in sorted(figures.items(), key=lambda kv: (kv[1]["how"] != "never trained on", kv[1]["lang"], kv[0])):
        cells = [f"{row[str(k)]['0.5']:.0%} / {row[str(k)]['0.9']:.0%}; {row[str(k)]['bad_words']:.0%}; "
                 f"{row[str(k)]['either']:.0%}" for k in PASSAGES]
        lines.append(f"| {name} ({row['lang']}) | {row['how']} | {row['pages']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def settings_table(one: dict, two: dict) -> str:
    """What each page threshold costs at `min_toxic_windows` 1 and 2 (`measure`'s figures): ordinary pages flagged,
    and the pages of comments found (the mean over the sets of each kind)."""
    def mean(figures: dict, how: str, k: int, threshold: str) -> str:
        rows = [row[str(k)][threshold] for row in figures["sets"].values() if row["how"] == how]
        return f"{sum(rows) / len(rows):.0%}"
    lines = ["| min_toxic_windows, page threshold | Leipzig pages flagged (75 languages; the most in one) | bench "
             "pages flagged | held-out split (sanity): 1 / 3 put in, found | never trained on: 3 / 10 put in, found |",
             "|---|---|---|---|---|"]
    for setting, figures in ((1, one), (2, two)):
        for threshold in ("0.5", "0.7", "0.9"):
            flagged = figures["ordinary"][threshold]
            worst = ", ".join(f"{lang} {share:.0%}" for share, lang in flagged["leipzig_worst"][:3]) or "none"
            sanity, never = "held-out split (sanity)", "never trained on"
            lines.append(f"| {setting}, {threshold} | {flagged['leipzig']:.2%} ({worst}) | {flagged['bench']:.1%} | "
                         f"{mean(figures, sanity, 1, threshold)} / {mean(figures, sanity, 3, threshold)} | "
                         f"{mean(figures, never, 3, threshold)} / {mean(figures, never, 10, threshold)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a toxicity model (default: the bundled one)")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--card", action="store_true", help="write the figures into the bundled model's card (both "
                                                          "settings of min_toxic_windows, 1 and 2)")
    p.add_argument("--table", action="store_true", help="print the bundled card's figures as a table and stop")
    p.add_argument("--min-toxic-windows", type=int, default=ToxicityConfig().min_toxic_windows,
                   help="the stage's setting to measure (default: the stage's default)")
    p.add_argument("--page-rules", action="store_true", help="only: other page rules compared at equal false positives")
    args = p.parse_args(argv)
    if not args.table:
        shared_data.require("bench/toxicity_pages.py", {LEIPZIG: "lingua's test sentences (Leipzig corpora)",
                                                       BENCH: "the 1,033-page benchmark WARC",
                                                       shared_data.path("harmful"): "the labelled toxicity sets"})
    if args.page_rules:
        result = page_rules(args.model)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(result, fh, indent=1)
        return 0
    if args.table:
        with open(OUTPUT + ".card.json", encoding="utf-8") as fh:
            part = json.load(fh)["page_test_by_set"]
        print(table(part[f"min_toxic_windows_{ToxicityConfig().min_toxic_windows}"]["sets"]) + "\n\n"
              + settings_table(part["min_toxic_windows_1"], part["min_toxic_windows_2"]))
        return 0
    settings = (1, 2) if args.card else (args.min_toxic_windows,)
    result = {setting: measure(args.model, setting) for setting in settings}
    for setting, figures in result.items():
        print(f"min_toxic_windows {setting}:\n{table(figures['sets'])}")
    if len(result) > 1:
        print(settings_table(result[1], result[2]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1)
    if args.card and args.model is None:
        with open(OUTPUT + ".card.json", encoding="utf-8") as fh:
            card = json.load(fh)
        card["page_test_by_set"] = {"about": __doc__.split("\n\n")[2].strip(),
                                    **{f"min_toxic_windows_{setting}": figures for setting, figures in result.items()}}
        with open(OUTPUT + ".card.json", "w", encoding="utf-8") as fh:
            json.dump(card, fh, indent=2, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
