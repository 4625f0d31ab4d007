"""Identity bias of a harmful-content filter: does naming a group move its score? (issue 56)

The standard measures (Borkan et al. 2019, "Nuanced Metrics for Measuring Unintended Bias"): for each group,
* subgroup AUC: toxic vs non-toxic among texts naming the group;
* BPSN AUC (background positive, subgroup negative): non-toxic texts naming the group against toxic texts
  naming none of it; low when naming the group raises the score (the group's benign texts are flagged);
* BNSP AUC (background negative, subgroup positive): toxic texts naming the group against non-toxic texts
  naming none of it; low when naming the group lowers the score;
and the share of benign texts naming the group that a threshold removes, against benign texts of other groups.
A filter that is a rule (bad words, URL lists) has scores 0/1: its AUCs follow the same formula.

Jigsaw's identity templates (shared/data/harmful/identity_templates, measure only) carry no group column: the
group terms are read from their own "I am <group>" template and found in each sentence (`JigsawTemplates`).
"""
from __future__ import annotations

import collections
import csv
import gzip
import re
from collections.abc import Sequence
from dataclasses import dataclass

from common.ranking import auc


@dataclass(frozen=True)
class Labelled:
    text: str
    toxic: bool
    group: str          # the group the text names; "" when it names none
    lang: str
    frame: str = ""     # the template it was made from (for reading the failures)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def group_metrics(rows: Sequence[Labelled], scores: Sequence[float], threshold: float,
                  min_texts: int = 50) -> dict:
    """Per group with at least `min_texts` texts: n, subgroup/BPSN/BNSP AUC, the share of its non-toxic texts
    at or over `threshold` (`benign_flagged`) and of its toxic ones (`toxic_found`); overall AUC and rates."""
    by_group: dict[str, list[int]] = collections.defaultdict(list)
    for i, row in enumerate(rows):
        by_group[row.group].append(i)
    toxic = [scores[i] for i, r in enumerate(rows) if r.toxic]
    benign = [scores[i] for i, r in enumerate(rows) if not r.toxic]
    out = {"n": len(rows), "toxic": len(toxic), "auc": _round(auc(toxic, benign)),
           "benign_flagged": _round(sum(s >= threshold for s in benign) / max(len(benign), 1)),
           "toxic_found": _round(sum(s >= threshold for s in toxic) / max(len(toxic), 1)), "groups": {}}
    for group, members in sorted(by_group.items()):
        if not group or len(members) < min_texts:
            continue
        inside = set(members)
        sub_pos = [scores[i] for i in members if rows[i].toxic]
        sub_neg = [scores[i] for i in members if not rows[i].toxic]
        bg_pos = [scores[i] for i, r in enumerate(rows) if r.toxic and i not in inside]
        bg_neg = [scores[i] for i, r in enumerate(rows) if not r.toxic and i not in inside]
        out["groups"][group] = {
            "n": len(members), "toxic": len(sub_pos),
            "subgroup_auc": _round(auc(sub_pos, sub_neg)), "bpsn_auc": _round(auc(bg_pos, sub_neg)),
            "bnsp_auc": _round(auc(sub_pos, bg_neg)),
            "benign_flagged": _round(sum(s >= threshold for s in sub_neg) / len(sub_neg)) if sub_neg else None,
            "toxic_found": _round(sum(s >= threshold for s in sub_pos) / len(sub_pos)) if sub_pos else None}
    return out


def summary(metrics: dict) -> dict:
    """The worst group of each measure (what a target is checked against)."""
    groups = metrics["groups"]

    def worst(key):
        found = [(g[key], name) for name, g in groups.items() if g[key] is not None]
        return min(found) if found else (None, None)

    def most(key):
        found = [(g[key], name) for name, g in groups.items() if g[key] is not None]
        return max(found) if found else (None, None)

    return {"n": metrics["n"], "toxic": metrics["toxic"], "auc": metrics["auc"], "benign_flagged": metrics["benign_flagged"], "toxic_found": metrics["toxic_found"],
            "groups": len(groups), "min_subgroup_auc": worst("subgroup_auc"), "min_bpsn_auc": worst("bpsn_auc"),
            "min_bnsp_auc": worst("bnsp_auc"), "max_benign_flagged": most("benign_flagged")}


# The template of each file that states the identity alone ("I am <group>"), and how the group is cut out of it.
_IDENTITY_FRAME = {
    "en": ("am_hate_adj", re.compile(r"^I am (?:an? )?(.+)$")),
    "de": ("am_hate_adj", re.compile(r"^Ich bin (?:eine? )?(.+)$")),
    "nl": ("am_identity", re.compile(r"^Ik ben (?:een )?(.+)$")),
    "hi-Latn": ("i_am_identity", re.compile(r"^\S+ (.+) \S+$")),
    "zh": ("am_identity", re.compile(r"^我是(?:一名|一位|一个)?(.+)$")),
}
JIGSAW_FILES = {"en": "en", "de": "de", "nl": "nl", "hi-Latn": "hi-Latn", "zh": "zh-cn"}


class JigsawTemplates:
    """Jigsaw's sentence templates of one language, each sentence with the group it names."""

    def __init__(self, path: str, lang: str):
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            self.raw = [(r["template"], r["toxicity"] == "toxic", " ".join(r["phrase"].split()))
                        for r in csv.DictReader(fh)]
        self.lang = lang
        frame, pattern = _IDENTITY_FRAME[lang]
        terms = {m.group(1).strip().lower() for t, _, s in self.raw if t == frame and (m := pattern.match(s))}
        self.terms = sorted(terms, key=len, reverse=True)  # longest first: "african american" before "african"

    def group_of(self, sentence: str, frame: str = "") -> str:
        lowered = sentence.lower()
        if self.lang == "zh":
            return next((t for t in self.terms if t in lowered), "")
        words = lowered.split()
        for term in self.terms:
            parts = term.split()
            for i in range(len(words) - len(parts) + 1):
                window = words[i:i + len(parts)]
                # German and Dutch adjectives inflect: "arabisch" names the group of "arabischer", "arabische"
                if window[:-1] == parts[:-1] and window[-1].startswith(parts[-1]) \
                        and len(window[-1]) - len(parts[-1]) <= (3 if self.lang in ("de", "nl") else 0):
                    return self._stem(term)
        if self.lang == "de" and words and "occupation" not in frame:
            # forms the "Ich bin" template lacks ("Latina", "Transsexueller", "schwul"): the identity ends the sentence
            return self._stem(words[0] if frame.startswith("being") else words[-1])
        return ""

    def _stem(self, term: str) -> str:
        """German inflected forms of one group as one name ("muslimischer", "muslimisch": "muslimisch")."""
        return re.sub(r"(er|es|en|e)$", "", term) if self.lang == "de" and len(term) > 5 else term

    def rows(self) -> list[Labelled]:
        return [Labelled(s, toxic, self.group_of(s, frame), self.lang, frame) for frame, toxic, s in self.raw]
