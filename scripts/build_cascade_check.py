"""Fits the check of `extract.engine: cascade` (stages/models/extract_cascade.json) on trafilatura's 990
annotated pages, and says how it does on sites it was not fitted on.

    .venv/bin/python scripts/build_cascade_check.py [--data ../shared/data/html/trafilatura] [--ablate]

A page's label: trafilatura's text gets more of its gold snippets right than the cascade's fast text
(found `with` snippets minus leaked `without` snippets). The card reports both fallbacks: `by_threshold` with
extract.cascade_fallback=fast (the default: trafilatura's fast mode, the fast text kept where it finds none),
`full_fallback_by_threshold` with trafilatura as the trafilatura engine runs it. The check is a logistic regression on
stages/extraction/engines.check_features; the page check (`page_check`, run first) a least-squares estimate of the
check's log-odds from the HTML's features alone (engines.page_features), so that a page the check would surely send
on skips Resiliparse (`PAGE_CHECK_MARGIN`). Evidence is two-fold by site (stages/extraction/gold.py): fitted on
the pages of one half of the sites, scored on the other half, and the other way round; the bundled check is
then fitted on all pages. `--ablate` also prints, per boilerplate word, what skipping it alone does to the fast
text's F1 on each half (how BOILERPLATE_WORDS was chosen: at least 0.1 point better on fold 0, not worse on fold 1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import shared_data  # noqa: E402

from stages.extraction import engines  # noqa: E402
from stages.extraction.extract import ExtractConfig, cascade_fallback, extract_text  # noqa: E402
from stages.extraction.gold import load_pages, precision_recall_f1, snippet_counts  # noqa: E402

THRESHOLD = 0.2  # the default extract.cascade_threshold: F1 within 1 point of trafilatura's on sites not fitted on
# The page check sends a page on where its estimate of the check's log-odds, less this many typical errors, reaches
# the threshold's: at 1, about a fifth of the article pages skip Resiliparse and ~1 % are decided otherwise than by
# the check (two-fold by site; the card's `page_check_margins` has the sweep it was chosen from).
PAGE_CHECK_MARGIN = 1.0
L2, STEPS, RATE = 1.0, 3000, 0.1


def fit_logistic(x: np.ndarray, y: np.ndarray) -> dict:
    """Plain L2-regularised logistic regression by gradient descent on standardised features: deterministic."""
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / scale
    w, b = np.zeros(z.shape[1]), 0.0
    for _ in range(STEPS):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        w -= RATE * (z.T @ (p - y) / len(y) + L2 * w / len(y))
        b -= RATE * float((p - y).mean())
    return {"mean": mean.tolist(), "scale": scale.tolist(), "weights": w.tolist(), "bias": b}


def fit_page_check(page_x: np.ndarray, check_logit: np.ndarray) -> dict:
    """Least squares of the check's log-odds on the page's features alone (standardised), with the typical error
    (standard deviation of the residuals) the margin is counted in."""
    mean, scale = page_x.mean(0), page_x.std(0) + 1e-9
    design = np.c_[np.ones(len(page_x)), (page_x - mean) / scale]
    coef = np.linalg.lstsq(design, check_logit, rcond=None)[0]
    return {"features": list(engines.PAGE_FEATURE_NAMES), "mean": mean.tolist(), "scale": scale.tolist(),
            "weights": coef[1:].tolist(), "bias": float(coef[0]),
            "error_sd": float((check_logit - design @ coef).std()), "margin": PAGE_CHECK_MARGIN}


def check_logits(check: dict, x: np.ndarray) -> np.ndarray:
    """Each row's log-odds, by the function the cascade runs."""
    return np.array([engines.log_odds(check, list(row)) for row in x])


def page_check_margin(page_check: dict, page_x: np.ndarray, margin: float | None = None) -> np.ndarray:
    """The page check's estimate less `margin` (its own unless given) typical errors, in log-odds: a page goes on
    where this reaches logit(threshold)."""
    margin = page_check["margin"] if margin is None else margin
    return check_logits(page_check, page_x) - margin * page_check["error_sd"]


def routing(sent_on: np.ndarray, by_check: np.ndarray, fast_s, fallback_s, traf_s) -> dict:
    """How the page check and the check route pages, and what extraction then costs as a share of trafilatura's on
    every page: the fast text where the page check did not send the page on, plus the fallback on every page sent on
    (the larger pages go there more often: the cost share exceeds the page share)."""
    cost = (fast_s[~sent_on].sum() + fallback_s[sent_on | by_check].sum()) / traf_s.sum()
    return {"page_check_share": round(float(sent_on.mean()), 4),
            "page_check_overrules": round(float((sent_on & ~by_check).mean()), 4),
            "cost_vs_trafilatura": round(float(cost), 3)}


def logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def timed(extract, pages) -> tuple[list[str], np.ndarray]:
    texts, seconds = [], []
    for page in pages:
        started = time.perf_counter()
        texts.append(extract(page))
        seconds.append(time.perf_counter() - started)
    return texts, np.array(seconds)


def cascade_f1(fast_counts, traf_counts, fall_back) -> tuple[float, float, float]:
    return precision_recall_f1([t if fb else f for f, t, fb in zip(fast_counts, traf_counts, fall_back)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=shared_data.path("html", "trafilatura"))
    p.add_argument("--out", default=engines.CHECK_PATH)
    p.add_argument("--ablate", action="store_true")
    p.add_argument("--threshold", type=float, default=THRESHOLD, help="the threshold the card's in-sample line uses")
    args = p.parse_args()
    shared_data.require("make cascade-check", {os.path.join(args.data, "evaldata.json"):
                                               "trafilatura's 990 annotated pages and their gold snippets"}, "--data")
    pages = load_pages(args.data)
    options = ExtractConfig().trafilatura_options()
    traf, traf_s = timed(lambda page: extract_text(page.html, page.url, options) or "", pages)
    fast, fast_s = timed(lambda page: engines.cascade_fast_text(page.html, include_comments=False), pages)
    # extract.cascade_fallback=fast, as the cascade runs it on a page it sends on
    cascade_options = ExtractConfig(engine="cascade", cascade_fallback="fast").engine_options()
    quick, quick_s = timed(lambda pair: cascade_fallback(pair[0].html, pair[0].url, cascade_options, pair[1])[0] or "",
                           list(zip(pages, fast)))
    traf_counts = [snippet_counts(t, page) for t, page in zip(traf, pages)]
    fast_counts = [snippet_counts(t, page) for t, page in zip(fast, pages)]
    quick_counts = [snippet_counts(t, page) for t, page in zip(quick, pages)]
    x = np.array([engines.check_features(t, page.html) for t, page in zip(fast, pages)])
    gain = np.array([(tc[0] - fc[0]) - (tc[2] - fc[2]) for tc, fc in zip(traf_counts, fast_counts)])
    y = (gain > 0).astype(float)
    folds = np.array([page.fold for page in pages])
    print(f"{len(pages)} pages; trafilatura better on {int(y.sum())}, the fast text better on {int((gain < 0).sum())}")
    page_x = np.array([engines.page_features(page.html) for page in pages])
    # each page scored by the check and the page check fitted on the other half of the sites
    crossed, margins = np.zeros(len(pages)), {m: np.zeros(len(pages)) for m in (0.5, 1.0, 1.5, 2.0, PAGE_CHECK_MARGIN)}
    for test in (0, 1):
        train = folds != test
        check = fit_logistic(x[train], y[train])
        for i in np.where(folds == test)[0]:
            crossed[i] = engines.trafilatura_would_do_better(fast[i], pages[i].html, check)
        page_check = fit_page_check(page_x[train], check_logits(check, x[train]))
        for margin, z in margins.items():  # the bundled margin, and the others of the card's sweep
            z[~train] = page_check_margin(page_check, page_x[~train], margin)
    page_z = margins[PAGE_CHECK_MARGIN]
    # the guard (engines.fast_text_is_broken: rules, not fitted) sends on fast texts the filters would drop
    guard = np.array([engines.fast_text_is_broken(t, page.html) is not None for t, page in zip(fast, pages)])
    held_out = {"trafilatura_f1": round(precision_recall_f1(traf_counts)[2], 4),
                "fast_f1": round(precision_recall_f1(fast_counts)[2], 4), "by_threshold": [],
                "full_fallback_by_threshold": []}
    for key, fallback_counts, fallback_s in (("by_threshold", quick_counts, quick_s),
                                             ("full_fallback_by_threshold", traf_counts, traf_s)):
        for threshold in (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5):
            sent_on, by_check = page_z >= logit(threshold), crossed >= threshold
            fall_back = sent_on | by_check | guard
            row = {"threshold": threshold, "fallback_share": round(float(fall_back.mean()), 4),
                   **routing(sent_on, by_check, fast_s, fallback_s, traf_s),
                   "cascade_f1": round(cascade_f1(fast_counts, fallback_counts, fall_back)[2], 4)}
            for fold in (0, 1):
                keep = folds == fold
                row[f"fold_{fold}"] = [
                    round(precision_recall_f1([c for c, k in zip(traf_counts, keep) if k])[2], 4),
                    round(cascade_f1([c for c, k in zip(fast_counts, keep) if k],
                                     [c for c, k in zip(fallback_counts, keep) if k], fall_back[keep])[2], 4)]
            held_out[key].append(row)
            print(key, json.dumps(row))
    # the margin sweep at the card's threshold: how many pages skip Resiliparse, how many the check would have kept
    held_out["page_check_margins"] = []
    for margin, z in sorted(margins.items()):
        sent_on, by_check = z >= logit(args.threshold), crossed >= args.threshold
        row = {"margin": margin, **routing(sent_on, by_check, fast_s, quick_s, traf_s),
               "cascade_f1": round(cascade_f1(fast_counts, quick_counts, sent_on | by_check)[2], 4)}
        held_out["page_check_margins"].append(row)
        print("page_check_margins", json.dumps(row))
    check = fit_logistic(x, y)
    page_check = fit_page_check(page_x, check_logits(check, x))
    everything = [engines.trafilatura_would_do_better(t, page.html, check)
                  for t, page in zip(fast, pages)]
    sent_on = page_check_margin(page_check, page_x) >= logit(args.threshold)
    fall_back = [bool(pr >= args.threshold or sent or g) for pr, sent, g in zip(everything, sent_on, guard)]
    bundle = {"features": list(engines.FEATURE_NAMES), **check, "page_check": page_check, "threshold": args.threshold,
              "fitted_on": f"trafilatura's evaluation pages ({len(pages)}, all sites); label: trafilatura's text "
                           "finds more gold snippets right than the fast text",
              "two_fold_by_site": held_out,  # fold_k: [trafilatura F1, cascade F1] on that half
              "in_sample": {"fallback_share": round(sum(fall_back) / len(pages), 4),
                            "cascade_f1": round(cascade_f1(fast_counts, quick_counts, fall_back)[2], 4)}}
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(bundle, fh, indent=1)
        fh.write("\n")
    print(f"wrote {args.out}: in-sample fallback {bundle['in_sample']}")
    if args.ablate:
        ablate(pages, folds)


def ablate(pages, folds) -> None:
    """What skipping each of trafilatura's discard words alone does to the (untrimmed) Resiliparse text."""
    words = ("share", "social", "newsletter", "tags", "sidebar", "banner", "breadcrumb", "author", "cookie", "footer",
             "nav", "menu", "related", "comment", "byline", "meta", "rating", "teaser", "widget", "hidden")
    base = [snippet_counts(engines.resiliparse_text(page.html, False), page) for page in pages]
    for word in words:
        skip = engines.skip_selectors((word,))
        counts = [snippet_counts(engines.resiliparse_text(page.html, False, skip), page) for page in pages]
        deltas = [precision_recall_f1([c for c, f in zip(counts, folds) if f == k])[2]
                  - precision_recall_f1([c for c, f in zip(base, folds) if f == k])[2] for k in (0, 1)]
        print(f"{word:12s} F1 change fold 0 {deltas[0]:+.4f}  fold 1 {deltas[1]:+.4f}")


if __name__ == "__main__":
    main()
