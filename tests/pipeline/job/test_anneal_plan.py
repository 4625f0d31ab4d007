"""The anneal split's spread, Beam-free: on a skewed pool (one site holding most high-quality tokens, pages of
heavy-tailed size, one language over-represented among the high-quality pages) the draw keeps every page, site
and language under its cap and still fills the split where the pool allows."""
import collections
import random

from pipeline.job.mix import Anneal, size_class
from stages.record import Document


def pool(n=20_000, seed=3):
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        site = "big.example" if rng.random() < 0.6 else f"site{rng.randrange(400)}.example"
        lang = "de" if rng.random() < 0.3 else "en"
        tokens = int(min(200 * rng.paretovariate(1.2), 500_000))  # a few enormous pages
        quality = rng.random() ** (0.5 if lang == "de" else 2)    # the judgment favours German pages
        docs.append((f"d{i}", "web", tokens, quality, 1, lang, site))
    return docs


def totals_of(anneal, docs):
    tallies = collections.Counter()
    for d in docs:
        for key, tokens in anneal.tallies(d, {}, None, 0.0):
            tallies[key] += tokens
    names = {k for k, _ in sorted(((k, v) for k, v in tallies.items()
                                   if k.startswith("hq|site:") and k.count("|") == 1),
                                  key=lambda kv: -kv[1])[:anneal.sites_to_tally()]}
    return {k: v for k, v in tallies.items()
            if not k.startswith(("hq|site:", "hq2|site:")) or "hq|" + k.split("|")[1] in names}


def draw(anneal, docs):
    totals = totals_of(anneal, docs)
    plan = anneal.plan(totals)
    picked = [d for d in docs if anneal.pick(Document(id=d[0], url=f"http://{d[6]}/{d[0]}", source="web",
                                                      text="x" * (4 * d[2]), lang=d[5], quality_score=d[3]),
                                             plan)]
    return picked, totals


def shares(picked, index):
    total = sum(d[2] for d in picked)
    by = collections.Counter()
    for d in picked:
        by[d[index]] += d[2]
    return {k: v / total for k, v in by.items()}, total


def test_caps_hold_and_the_split_is_filled():
    docs = pool()
    anneal = Anneal(fraction=0.1, min_quality=0.5, seed=0)
    picked, totals = draw(anneal, docs)
    split = sum(d[2] for d in picked)
    expected = anneal.plan(totals).expected  # the big site cut back to 20 % leaves room for ~47 % of the target
    assert 0.4 * 0.1 * totals["all"] <= expected <= 0.1 * totals["all"]
    assert 0.85 * expected <= split <= 1.15 * expected  # a hash draw of heavy-tailed pages: caps hold in expectation
    assert max(d[2] for d in picked) <= anneal.max_page_share * split
    sites, _ = shares(picked, 6)
    assert max(sites.values()) <= anneal.max_site_share * 1.2
    langs, _ = shares(picked, 5)
    de_in_data = sum(d[2] for d in docs if d[5] == "de") / totals["all"]
    assert langs["de"] <= anneal.max_language_excess * de_in_data * 1.1
    # without the caps, the big site would own it and German be over-represented
    free = Anneal(fraction=0.1, min_quality=0.5, seed=0, max_page_share=1.0, max_site_share=1.0,
                  max_language_excess=100.0)
    picked_free, _ = draw(free, docs)
    sites_free, total_free = shares(picked_free, 6)
    langs_free, _ = shares(picked_free, 5)
    assert sites_free["big.example"] > 0.5 and langs_free["de"] > langs["de"]


def test_a_pool_too_small_for_the_caps_gives_an_empty_plan():
    docs = [(f"d{i}", "web", 1000, 0.9, 1, "en", "one.example") for i in range(5)]
    anneal = Anneal(fraction=0.5, min_quality=0.5, seed=0)
    plan = anneal.plan(totals_of(anneal, docs))
    assert plan.max_size == -1 and plan.expected == 0  # five pages cannot make a split no page holds 5 % of
    assert size_class(1000) == 40 and size_class(1) == 0
