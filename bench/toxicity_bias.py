"""Identity bias of the harmful-content filters (issue 56): does naming a group move the decision?

    .venv/bin/python bench/toxicity_bias.py [--model PATH] [--threshold 0.5] [--json FILE] [--card]
    .venv/bin/python bench/toxicity_bias.py --users-table    (per language, from the bundled card)

Measured on sentences that name groups, toxic and not, none of which any model here trained on:
  * Jigsaw's identity templates (shared/data/harmful/identity_templates: en, de, nl, hi-Latn, zh; measure only);
  * our own templates in 15 languages (stages/harmful/identity/<lang>.yaml, the `eval_*` frames: wording no
    training frame uses; written by us, so a check of wording, not independent evidence);
  * counter-speech and negated hate (`eval_counter`, clean) against hate (`eval_toxic`), ours too ("counter_<lang>").
For the toxicity score: toxic vs non-toxic ROC AUC, per group (>= 50 sentences; >= 8 for our templates) the
subgroup, BPSN and BNSP AUC (Borkan et al. 2019; stages/harmful/bias.py), the share of non-toxic sentences
naming a group at or over the threshold, overall and for the worst group. For the bad-word rule (LDNOOBW,
stages/harmful/badwords.py): the share of non-toxic sentences of each group with a listed word of a kind the
rule counts by default (sexual, clinical, slur, unsorted: lists/ldnoobw/kinds; a page needs
three at density 8 per 1,000 words to be dropped; a listed group name is what would make a group's pages
drop more often) and of toxic ones. `--card` writes the figures into the bundled model's card
(`identity_bias`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from stages.harmful.badwords import BadWordsConfig, find_bad_words, word_list  # noqa: E402
from stages.harmful.bias import JIGSAW_FILES, JigsawTemplates, group_metrics, summary  # noqa: E402
from stages.harmful.identity_frames import counter_rows, evaluation_rows, lexicons  # noqa: E402
from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer  # noqa: E402

TEMPLATES = os.path.join(shared_data.ROOT, "harmful", "identity_templates")
BADWORD_LANG = {"hi-Latn": "hi"}
RECOMMENDED = 0.9  # the page threshold docs/harmful.md recommends for dropping


def template_sets():
    """(name, lang, rows, min_texts): Jigsaw's where the shared data is here, then ours."""
    if os.path.isdir(TEMPLATES):
        for lang, name in JIGSAW_FILES.items():
            yield f"jigsaw_{lang}", lang, JigsawTemplates(os.path.join(TEMPLATES, f"{name}_sentence_templates.csv.gz"),
                                                          lang).rows(), 50
    for lang in sorted(lexicons()):
        yield f"ours_{lang}", lang, evaluation_rows(lang), 8
    for lang in sorted(lexicons()):
        yield f"counter_{lang}", lang, counter_rows(lang), 8


def badword_hits(rows, lang: str) -> list[float]:
    """1 for a sentence with a listed word of a kind the rule counts by default (sexual, clinical, slur, unsorted)."""
    words = word_list("v1", BADWORD_LANG.get(lang, lang).split("-")[0]) or word_list("v2", lang.split("-")[0])
    if words is None:
        return []
    counted = BadWordsConfig().kinds
    return [1.0 if any(words.kind(e) in counted for e in find_bad_words(r.text, lang.split("-")[0], words)[0]) else 0.0
            for r in rows]


def measure(model: str | None, threshold: float) -> dict:
    scorer = ToxicityScorer(ToxicityConfig(model=model))
    scorer.setup()
    out = {}
    for name, lang, rows, min_texts in template_sets():
        scores = [scorer.score(r.text, lang)[0] for r in rows]
        model_metrics = group_metrics(rows, scores, threshold, min_texts)
        entry = {"lang": lang, "n": len(rows), "toxicity": summary(model_metrics), "groups": model_metrics["groups"]}
        # at the recommended page threshold too (docs/harmful.md)
        strict = summary(group_metrics(rows, scores, RECOMMENDED, min_texts))
        entry[f"at_{RECOMMENDED}"] = {k: strict[k] for k in ("benign_flagged", "toxic_found", "max_benign_flagged")}
        hits = badword_hits(rows, lang)
        if hits:
            words = group_metrics(rows, hits, 0.5, min_texts)
            entry["bad_words"] = {"benign_with_listed_word": words["benign_flagged"],
                                  "toxic_with_listed_word": words["toxic_found"],
                                  "worst_group": summary(words)["max_benign_flagged"]}
        out[name] = entry
    return out


def markdown(result: dict, threshold: float) -> str:
    lines = [f"| templates | n (toxic) | AUC | min subgroup AUC | min BPSN AUC | min BNSP AUC | non-toxic >= {threshold} "
             "(worst group) | toxic >= threshold | bad words: non-toxic / toxic with a listed word (worst group) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, e in result.items():
        t = e["toxicity"]

        def cell(pair):
            return "" if pair[0] is None else f"{pair[0]:.2f} ({pair[1]})"
        bw = e.get("bad_words")
        words = (f"{bw['benign_with_listed_word']:.1%} / {bw['toxic_with_listed_word']:.1%} "
                 f"({bw['worst_group'][1]} {bw['worst_group'][0]:.1%})" if bw and bw["worst_group"][0] is not None
                 else "no list")
        lines.append(f"| {name} | {e['n']:,} ({t['toxic']:,}) | {t['auc']:.3f} | {cell(t['min_subgroup_auc'])} | "
                     f"{cell(t['min_bpsn_auc'])} | {cell(t['min_bnsp_auc'])} | {t['benign_flagged']:.1%} "
                     f"({cell(t['max_benign_flagged'])}) | {t['toxic_found']:.1%} | {words} |")
    return "\n".join(lines)


def users_table(card: dict) -> str:
    """Per language, from the bundled card: what the toxicity score flags at 0.5 and at 0.9 (the recommended page
    threshold) of ordinary pages (the bench WARC's held-out ones; Leipzig web sentences as pages), of news naming a
    group, of benign template sentences naming a group, and of toxic text; and how often the bad-word lists match a benign template sentence (one match never drops a page)."""
    pages = card["page_test"]["false_positives_by_language"]
    news = card["cross_data_set"]["identity"]
    templates = card.get("identity_bias", {}).get("templates", {})
    toxic_sets: dict[str, list[tuple[str, dict, str]]] = {}
    for how, sets in (("never trained on", card["cross_data_set"]["labeled"]),
                      ("left out", card.get("leave_one_data_set_out", {}))):
        for name, m in sets.items():
            toxic_sets.setdefault(m["lang"], []).append((name, m, how))
    langs = ["en", "de", "fr", "es", "it", "nl", "pl", "pt", "ru", "tr", "ar", "zh", "ko", "hi", "hi-Latn"]
    web = card["cross_data_set"].get("web_pages", {})
    lines = ["| lang | ordinary pages flagged at 0.5 / 0.9 | web sentences as pages of 20, flagged at 0.5 / 0.9 | news "
             "naming a group, 0.5 / 0.9 (held-out news the language offsets were fitted on) | benign template sentences naming a group, 0.5 / 0.9 (set) | toxic text found at "
             "0.5 / 0.9 (set) | bad words: benign template sentences with a listed word of a counted kind |",
             "|---|---|---|---|---|---|---|"]

    def share(text: str) -> str:
        found, n = (int(x) for x in text.split("/"))
        return f"{found}/{n}" if n else "–"
    for lang in langs:
        page = (f"{share(pages['0.5'][lang])} / {share(pages['0.9'][lang])}" if lang in pages.get("0.5", {})
                else "no pages")
        named = (f"{news[lang]['0.5']:.1%} / {news[lang]['0.9']:.1%} (n={news[lang]['n']})" if lang in news else "–")
        benign = "; ".join(f"{v['toxicity']['benign_flagged']:.1%} / {v[f'at_{RECOMMENDED}']['benign_flagged']:.1%} "
                           f"({k.split('_')[0]}, n={v['n'] - v['toxicity']['toxic']})"
                           for k, v in templates.items() if v["lang"] == lang) or "–"
        found = "; ".join(f"{m['0.5']['recall']:.2f} / {m['0.9']['recall']:.2f} ({name}, {how})"
                          for name, m, how in toxic_sets.get(lang, [])) or "no labelled set here"
        words = "; ".join(f"{v['bad_words']['benign_with_listed_word']:.1%} ({k.split('_')[0]})"
                          for k, v in templates.items() if v["lang"] == lang and "bad_words" in v) or "–"
        sentences = (f"{web[lang]['0.5']:.0%} / {web[lang]['0.9']:.0%} (n={web[lang]['n']})" if lang in web else "–")
        lines.append(f"| {lang} | {page} | {sentences} | {named} | {benign} | {found} | {words} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a toxicity model (default: the bundled one)")
    p.add_argument("--threshold", type=float, default=0.5, help="the score a sentence is flagged at")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--card", action="store_true", help="write the figures into the bundled model's card")
    p.add_argument("--users-table", action="store_true",
                   help="print the per-language table of the bundled card's figures (docs/harmful.md) and stop")
    args = p.parse_args(argv)
    if args.users_table:
        from stages.models import bundled
        with open(bundled("toxicity.ftz.card.json"), encoding="utf-8") as fh:
            print(users_table(json.load(fh)))
        return 0
    if not os.path.isdir(TEMPLATES):
        print(f"note: {TEMPLATES} is not here (a clone without ../shared): Jigsaw's templates are left out", flush=True)
    result = measure(args.model, args.threshold)
    print(markdown(result, args.threshold))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=1, ensure_ascii=False)
    if args.card and args.model is None:
        from stages.models import bundled
        path = bundled("toxicity.ftz.card.json")
        with open(path, encoding="utf-8") as fh:
            card = json.load(fh)
        card["identity_bias"] = {"threshold": args.threshold, "about": __doc__.split("\n\n")[2].strip(),
                                 "templates": {k: {kk: vv for kk, vv in v.items() if kk != "groups"}
                                               for k, v in result.items()}}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(card, fh, indent=2, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
