"""Source mixing and the anneal split, decided per document while each part's shards are written
(pipeline/job/finish.py); Beam-free: token counts per source are summed over one small record per finished document
(a combine), then each document is drawn against the rates they imply (a side input of a few numbers)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from pipeline.job.holdout import held_out
from stages.counters import dropped, entered, note
from stages.mix import approx_tokens, copies, rehydration_weight, repeat_id, site_of, unit_hash
from stages.record import Document, Drop, DropReason
from stages.runner import Count, count_kept, no_count

STAGE = "mix"


@dataclass(frozen=True)
class Mix:
    weights: dict[str, float]
    seed: int
    max_epochs: int = 4

    def copies(self, doc_id: str, source: str, rates: dict[str, float], weight: int = 1) -> int:
        return copies(doc_id, rates.get(source, 1.0) * weight, self.seed, self.max_epochs)

    def draw(self, doc: Document, rates: dict[str, float], count: Count = no_count,
             weight: int = 1) -> list[Document] | Drop:
        """The document and its repeats (own id, own epoch), or its drop. `weight`: its rehydration weight (the
        rates were computed over tokens times each document's weight)."""
        count(entered(STAGE), 1)
        rate = rates.get(doc.source, 1.0) * weight
        if rate > self.max_epochs:
            count(note(STAGE, f"capped.{doc.source}"), 1)  # the report names sources whose share is out of reach
        n = self.copies(doc.id, doc.source, rates, weight)
        if n == 0:
            count(dropped(STAGE, DropReason.MIX_DOWNSAMPLED), 1)
            return doc.drop(STAGE, DropReason.MIX_DOWNSAMPLED, f"{doc.source} rate {rate:.3f}")
        count_kept(count, STAGE, approx_tokens(doc.text) if doc.text else 0)
        for _ in range(1, n):  # repeats of a source smaller than its share
            count(note(STAGE, "repeats"), 1)
        return repeats(doc, n)


def repeats(doc: Document, n: int) -> list[Document]:
    """The document and its n - 1 repeats, each with its own id and epoch."""
    return [doc] + [doc.replace(id=repeat_id(doc.id, epoch), epoch=epoch) for epoch in range(1, n)]


@dataclass(frozen=True)
class Rehydration:
    """FineWeb-2's rehydration: a document dedup kept for a cluster of duplicates is written `weight` times."""

    table: tuple
    max_epochs: int

    def weight(self, cluster_size: int | None) -> int:
        return min(rehydration_weight(self.table, cluster_size), self.max_epochs)


def weight_of(rehydrate: Rehydration | None, cluster_size: int | None) -> int:
    return rehydrate.weight(cluster_size) if rehydrate else 1


def _site_high(by_lang: list[tuple[float, int, int]], rate: float) -> float:
    """A site's draw at `rate` times each language's (p, tokens, squares), plus two standard deviations."""
    mean = sum(p * rate * t for p, t, _ in by_lang)
    return mean + 2 * math.sqrt(sum(q * p * rate * (1 - p * rate) for p, _, q in by_lang))


def _upto(classes: dict[int, int], max_size: int) -> int:
    """Tokens (or squares) tallied in the size classes up to `max_size`."""
    return sum(t for b, t in classes.items() if b <= max_size)


def size_class(tokens: int) -> int:
    """A page's size class: 4 log2(tokens), rounded up (classes a quarter of a doubling wide)."""
    return math.ceil(4 * math.log2(max(tokens, 1)))


def size_class_top(size: int) -> float:
    """The most tokens a page of size class `size` has."""
    return 2 ** (size / 4)


class AnnealPlan(NamedTuple):
    max_size: int                 # the largest page size class drawn (-1: none)
    lang_rates: dict[str, float]  # the rate a language's high-quality originals are drawn at ...
    site_rates: dict[str, float]  # ... times this for the sites cut back to their cap
    expected: float               # the split's expected tokens


@dataclass(frozen=True)
class Anneal:
    """The anneal split: high-quality originals drawn to about `fraction` of the training tokens, spread so that
    no page holds more than `max_page_share` of the split, no site more than `max_site_share`, and no language
    more than `max_language_excess` times its share of the training shards (a quality judgment that favours one
    site or language cannot make the split theirs). Near-copies are not both in it when dedup is on (the
    split is drawn from dedup's survivors)."""

    fraction: float
    min_quality: float
    seed: int
    max_page_share: float = 0.05
    max_site_share: float = 0.2
    max_language_excess: float = 2.0

    def tallies(self, finished: tuple, rates: dict[str, float], mix: Mix | None,
                holdout_fraction: float) -> list[tuple[str, int]]:
        """(id, source, tokens, quality, rehydration weight, lang, site) of a finished document -> its ("all",
        tokens) and ("all|lang:L", tokens) per copy in the training shards (none if held out), and, if its
        original may enter the split, its tokens under "hq|lang:L|size:B", "hq|site:S" and
        "hq|site:S|lang:L|size:B", B its size class (a quarter of a doubling wide: ~100 classes)."""
        doc_id, source, tokens, quality, weight, lang, site = finished
        if held_out(doc_id, holdout_fraction):
            return []
        n = mix.copies(doc_id, source, rates, weight) if mix else weight
        out = [("all", tokens * n), (f"all|lang:{lang}", tokens * n)] if n else []
        if n and quality is not None and quality >= self.min_quality:
            size = size_class(tokens)
            out += [(f"hq|lang:{lang}|size:{size}", tokens), (f"hq|site:{site}", tokens),
                    (f"hq|site:{site}|lang:{lang}|size:{size}", tokens),
                    # squares, for the spread of the hash draw (few large pages make a split's size uncertain)
                    (f"hq2|lang:{lang}|size:{size}", tokens * tokens),
                    (f"hq2|site:{site}|lang:{lang}|size:{size}", tokens * tokens)]
        return out

    def plan(self, totals: dict[str, int]) -> AnnealPlan:
        """The largest page size class such that the pages up to it, drawn as `draw_at` says, are expected to hold
        at least 1 / max_page_share times the largest page (so no page is over that share)."""
        tallies: dict[str, tuple[dict, dict]] = {"hq": ({}, {}), "hq2": ({}, {})}  # tokens, squares
        for key, tokens in totals.items():
            parts = key.split("|")
            if parts[0] not in tallies or len(parts) < 3:
                continue
            langs, sites = tallies[parts[0]]  # lang -> size class -> n; site -> lang -> size class -> n
            size = int(parts[-1][5:])
            if parts[1].startswith("lang:"):
                langs.setdefault(parts[1][5:], {})[size] = tokens
            else:
                sites.setdefault(parts[1][5:], {}).setdefault(parts[2][5:], {})[size] = tokens
        (langs, sites), (lang_squares, site_squares) = tallies["hq"], tallies["hq2"]
        best = AnnealPlan(-1, {}, {}, 0.0)
        for size in sorted({b for classes in langs.values() for b in classes}):
            plan = self.draw_at(size, langs, sites, totals)
            plan = self.with_site_margin(plan, sites, site_squares, lang_squares)
            # the split's size less two standard deviations of the hash draw: the cap holds on what is drawn
            low = plan.expected - 2 * math.sqrt(self.variance(plan, lang_squares, site_squares))
            if size_class_top(size) <= self.max_page_share * low:
                best = plan
        return best

    def with_site_margin(self, plan: AnnealPlan, sites: dict, site_squares: dict, lang_squares: dict) -> AnnealPlan:
        """The plan with each cut-back site's rate lowered until its draw, plus two standard deviations, stays
        within its cap of the split less two of the split's (a few large pages make a site's draw uncertain)."""
        low = plan.expected - 2 * math.sqrt(self.variance(plan, lang_squares, site_squares))
        rates, lost = dict(plan.site_rates), 0.0
        for site, rate in plan.site_rates.items():
            if rate >= 1.0:
                continue
            by_lang = [(plan.lang_rates.get(lang, 0.0), _upto(classes, plan.max_size),
                        _upto(site_squares.get(site, {}).get(lang, {}), plan.max_size))
                       for lang, classes in sites.get(site, {}).items()]

            lo, hi = 0.0, rate
            for _ in range(30):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if _site_high(by_lang, mid) <= self.max_site_share * low else (lo, mid)
            rates[site] = lo
            lost += sum(p * (rate - lo) * t for p, t, _ in by_lang)
        return plan._replace(site_rates=rates, expected=max(plan.expected - lost, 0.0))

    @staticmethod
    def variance(plan: AnnealPlan, lang_squares: dict, site_squares: dict) -> float:
        """The variance of the split's tokens: each page is drawn on its own, with probability p = its language's
        rate times its site's, and adds tokens² p (1 - p)."""
        def spread(p):
            return p * (1.0 - p)

        var = sum(_upto(classes, plan.max_size) * spread(plan.lang_rates.get(lang, 0.0)) for lang, classes in lang_squares.items())
        for site, rate in plan.site_rates.items():
            if rate < 1.0:  # the site's pages are drawn at its language's rate times its own
                for lang, classes in site_squares.get(site, {}).items():
                    p = plan.lang_rates.get(lang, 0.0)
                    var += _upto(classes, plan.max_size) * (spread(p * rate) - spread(p))
        return max(var, 0.0)

    def draw_at(self, max_size: int, langs: dict, sites: dict, totals: dict[str, int]) -> AnnealPlan:
        """The rates with pages up to size class `max_size`: each language drawn to at most max_language_excess
        times its share of the training tokens (all of it where it has fewer high-quality pages), all scaled to
        `fraction` of the training tokens at most; then each site over max_site_share of the result cut back to
        it (a fixed point: cutting one back lowers every site's cap). Sites are disjoint, so the cuts add up."""
        all_tokens = max(totals.get("all", 0), 1)
        hq = {lang: _upto(classes, max_size) for lang, classes in langs.items()}
        lang_rate = {lang: min(1.0, self.max_language_excess * self.fraction * totals.get(f"all|lang:{lang}", 0)
                               / tokens) for lang, tokens in hq.items() if tokens}
        drawn = sum(lang_rate[lang] * tokens for lang, tokens in hq.items() if tokens)
        scale = min(1.0, self.fraction * all_tokens / drawn) if drawn else 0.0
        lang_rate = {lang: rate * scale for lang, rate in lang_rate.items()}
        drawn *= scale
        site_drawn = {site: sum(lang_rate.get(lang, 0.0) * _upto(classes, max_size) for lang, classes in by_lang.items())
                      for site, by_lang in sites.items()}
        expected = drawn
        for _ in range(100):
            cut = sum(max(0.0, tokens - self.max_site_share * expected) for tokens in site_drawn.values())
            expected, previous = max(drawn - cut, 0.0), expected
            if abs(expected - previous) < 0.5:
                break
        site_rate = {site: min(1.0, self.max_site_share * expected / tokens)
                     for site, tokens in site_drawn.items() if tokens}
        return AnnealPlan(max_size, lang_rate, site_rate, expected)

    def sites_to_tally(self) -> int:
        """How many of the largest sites the side input names: a site over its cap holds more than
        max_site_share of the split, so at most 1 / max_site_share are; any other site is under its cap."""
        return math.ceil(1 / self.max_site_share) + 1

    @staticmethod
    def rate(tokens: int, lang: str | None, site: str, plan: AnnealPlan) -> float:
        """The probability a high-quality original enters the split under `plan` (`plan(totals)`, made once per
        part from the side input of `finish.anneal_totals`)."""
        if size_class(tokens) > plan.max_size:
            return 0.0
        return plan.lang_rates.get(str(lang), 0.0) * plan.site_rates.get(site, 1.0)

    def pick(self, doc: Document, plan: AnnealPlan) -> bool:
        """Whether a training document also enters the anneal split: high-quality originals only, drawn by
        `rate` (a hash of the seed and id: the same on every rerun and worker)."""
        if doc.epoch != 0 or doc.quality_score is None or doc.quality_score < self.min_quality:
            return False
        rate = self.rate(approx_tokens(doc.text), doc.lang, site_of(doc.url), plan)
        return unit_hash(self.seed, "anneal", doc.id) < rate
