"""How the toxicity classifier is judged: on text of other sources than its training data (issue 35).

`measure` scores labeled sets the model never trained on (precision, recall, F1 at 0.5/0.7/0.9 and the best
recall at precision >= 0.8), held-out reference sentences per language (all, and those naming a group: the
share flagged is a false-positive rate) and ordinary pages per language (scored as the stage scores a page:
its most toxic paragraph). Used by scripts/build_toxicity_model.py (the model card) and
bench/toxicity_cross.py (the tables, leave-one-data-set-out).
"""
from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence

from common.ranking import auc

THRESHOLDS = (0.5, 0.7, 0.9)
LANGS = ("en", "de", "fr", "es", "it", "nl", "pl", "pt", "hi", "zh", "ar", "ko", "ru", "tr", "id", "ja", "uk", "vi")


def rates(scores: Sequence[float], truth: Sequence[bool]) -> dict:
    """Precision, recall and F1 at each threshold, the best recall at precision >= 0.8 (with its threshold), and
    the ranking's ROC AUC (toxic above clean; independent of any threshold)."""
    out = {}
    positives = max(sum(truth), 1)
    for t in THRESHOLDS:
        tp = sum(s >= t and y for s, y in zip(scores, truth))
        fp = sum(s >= t and not y for s, y in zip(scores, truth))
        p, r = (tp / (tp + fp) if tp + fp else 0.0), tp / positives
        out[str(t)] = {"precision": round(p, 3), "recall": round(r, 3),
                       "f1": round(2 * p * r / (p + r) if p + r else 0, 3)}
    best = (0.0, None)  # the lowest threshold of the best recall
    for step in range(1, 20):
        t = step / 20
        tp = sum(s >= t and y for s, y in zip(scores, truth))
        fp = sum(s >= t and not y for s, y in zip(scores, truth))
        if tp + fp and tp / (tp + fp) >= 0.8 and tp / positives > best[0]:
            best = (tp / positives, t)
    out["recall_at_precision_0.8"] = {"recall": round(best[0], 3), "threshold": best[1]}
    ranked = auc([s for s, y in zip(scores, truth) if y], [s for s, y in zip(scores, truth) if not y])
    out["auc"] = None if ranked is None else round(ranked, 3)
    return out


def flagged(scores: Sequence[float]) -> dict:
    """The share of `scores` at or over each threshold."""
    return {str(t): round(sum(s >= t for s in scores) / max(len(scores), 1), 4) for t in THRESHOLDS}


def measure(score: Callable[[str, str], float], labeled: Mapping[str, Sequence], reference: Sequence = (),
            pages: Sequence[tuple[str, str]] = (), web_pages: Sequence[tuple[str, str]] = ()) -> dict:
    """`score(text, lang)` (a page's score, given its language) on `labeled` sets ({name: examples with text, toxic, lang}), held-out
    `reference` examples (lang, identity), `pages` ((lang, text)) and `web_pages` (lang, text: web sentences as pages,
    `toxicity_train.web_sentence_pages`)."""
    out: dict = {"labeled": {}, "reference": {}, "identity": {}, "pages": {}, "web_pages": {}}
    for name, items in sorted(labeled.items()):
        out["labeled"][name] = dict(lang=items[0].lang, n=len(items), toxic=sum(e.toxic for e in items),
                                    **rates([score(e.text, e.lang) for e in items], [e.toxic for e in items]))
    for lang in LANGS:
        part = [e for e in reference if e.lang == lang]
        if part:
            scores = [score(e.text, e.lang) for e in part]
            out["reference"][lang] = dict(n=len(part), **flagged(scores))
            ident = [s for s, e in zip(scores, part) if e.identity]
            out["identity"][lang] = dict(n=len(ident), **flagged(ident))
    for part, items in (("pages", pages), ("web_pages", web_pages)):
        by_lang: dict[str, list[float]] = collections.defaultdict(list)
        for lang, text in items:
            by_lang[lang].append(score(text, lang))
        if items:
            out[part]["all"] = dict(n=len(items), **flagged([s for v in by_lang.values() for s in v]))
        for lang, scores in sorted(by_lang.items(), key=lambda kv: -len(kv[1])):
            out[part][lang] = dict(n=len(scores), **flagged(scores))
    return out


def markdown(result: dict) -> str:
    """The figures of `measure` as two Markdown tables."""
    lines = ["| data set | lang | n (toxic) | P / R at 0.5 | P / R at 0.7 | P / R at 0.9 | R at P >= 0.8 (threshold) |",
             "|---|---|---|---|---|---|---|"]
    for name, m in result["labeled"].items():
        cells = [f"{m[str(t)]['precision']:.2f} / {m[str(t)]['recall']:.2f}" for t in THRESHOLDS]
        best = m["recall_at_precision_0.8"]
        lines.append(f"| {name} | {m['lang']} | {m['n']} ({m['toxic']}) | " + " | ".join(cells)
                     + f" | {best['recall']:.2f} ({best['threshold']}) |")
    langs = sorted((set(result["reference"]) | set(result["pages"]) | set(result.get("web_pages", {}))) - {"all"},
                   key=lambda lang: (lang not in LANGS, LANGS.index(lang) if lang in LANGS else lang))
    if langs:
        lines += ["", "| lang | reference sentences >= 0.5 / 0.7 / 0.9 | naming a group >= 0.5 / 0.7 / 0.9 | "
                      "ordinary pages >= 0.5 / 0.7 / 0.9 | web sentences as pages >= 0.5 / 0.7 / 0.9 |",
                  "|---|---|---|---|---|"]
    for lang in langs:
        cells = []
        for part in ("reference", "identity", "pages", "web_pages"):
            m = result[part].get(lang)
            cells.append(f"{m['0.5']:.3f} / {m['0.7']:.3f} / {m['0.9']:.3f} (n={m['n']})" if m else "")
        lines.append(f"| {lang} | " + " | ".join(cells) + " |")
    totals = [result.get(part, {}).get("all") for part in ("pages", "web_pages")]
    if any(totals):
        lines.append("| all pages | | | " + " | ".join(f"{p['0.5']:.3f} / {p['0.7']:.3f} / {p['0.9']:.3f} (n={p['n']})"
                                                     if p else "" for p in totals) + " |")
    return "\n".join(lines)


TARGET_RECALL, TARGET_IDENTITY = 0.7, 0.02  # issue 35: recall >= 0.7 at precision >= 0.8; <= 2 % of group mentions


def language_table(card: dict) -> str:
    """Per language, from a model card: every measurement on text of another source (sets it never trained
    on, `cross_data_set`; sets left out one at a time, `leave_one_data_set_out`) with P / R at 0.5/0.7/0.9,
    the best recall at precision >= 0.8 and how far it is from the target, the share of held-out sentences
    naming a group and of ordinary pages scoring >= 0.5, and why a target is missed where that follows from
    the training data."""
    cross = card.get("cross_data_set", {})
    rows = [(m["lang"], name, "never trained on", m) for name, m in cross.get("labeled", {}).items()]
    rows += [(m["lang"], name, "left out", m) for name, m in card.get("leave_one_data_set_out", {}).items()]
    trained = {m["lang"]: set() for m in card.get("leave_one_data_set_out", {}).values()}
    for name, m in card.get("leave_one_data_set_out", {}).items():
        trained[m["lang"]].add(name)
    order = {lang: i for i, lang in enumerate(LANGS)}
    lines = ["| lang | test set (how) | n (toxic) | AUC | P / R at 0.5 | P / R at 0.7 | P / R at 0.9 | R at P >= 0.8 "
             "(target 0.7) | naming a group >= 0.5 (target 2 %) | ordinary pages >= 0.5 | why a target is missed |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for lang, name, how, m in sorted(rows, key=lambda r: (order.get(r[0], 99), r[1])):
        cells = [f"{m[str(t)]['precision']:.2f} / {m[str(t)]['recall']:.2f}" for t in THRESHOLDS]
        best = m["recall_at_precision_0.8"]["recall"]
        ident = cross.get("identity", {}).get(lang)
        page = cross.get("pages", {}).get(lang)
        others = trained.get(lang, set()) - {name}
        why = []
        if best < TARGET_RECALL:
            why.append("no labeled text of the language trained" if not others
                       else f"trained on {', '.join(sorted(others))}: other labels, other texts")
        if ident and ident["0.5"] > TARGET_IDENTITY:
            why.append("news naming a group scored toxic")
        ranked = f"{m['auc']:.2f}" if m.get("auc") is not None else ""
        lines.append(f"| {lang} | {name} ({how}) | {m['n']:,} ({m['toxic']:,}) | {ranked} | " + " | ".join(cells)
                     + f" | {best:.2f} ({best - TARGET_RECALL:+.2f}) | "
                     + (f"{ident['0.5']:.1%} (n={ident['n']})" if ident else "") + " | "
                     + (f"{page['0.5']:.1%} (n={page['n']})" if page else "") + " | " + "; ".join(why) + " |")
    return "\n".join(lines)
