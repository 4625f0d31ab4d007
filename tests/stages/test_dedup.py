"""Dedup building blocks: datasketch-equal signatures, shingles, exact keys, S-curve, survivor order, star steps."""
import random

import numpy as np
import pytest
from datasketch import MinHash
from datasketch.lsh import _optimal_param

from stages.dedup import (
    DedupConfig,
    MinHasher,
    band_keys,
    bands_for_threshold,
    components_in_memory,
    exact_key,
    jaccard,
    large_star,
    large_star_settling,
    s_curve,
    shingles,
    small_star,
    small_star_noting,
    survivor_rank,
)
from tests.conftest import SENTENCES_DIR

EN = (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("num_perm, seed", [(112, 1), (128, 42), (16, 7)])
def test_signatures_equal_datasketch_per_shingle_update(num_perm, seed):
    hasher = MinHasher(num_perm, seed)
    for i in range(0, 60, 6):
        doc_shingles = shingles(" ".join(EN[i:i + 6]))
        reference = MinHash(num_perm=num_perm, seed=seed)
        for s in doc_shingles:
            reference.update(s)
        assert np.array_equal(hasher.signature(doc_shingles), reference.hashvalues)


def test_signatures_of_long_documents_cross_batch_boundaries():
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted(SENTENCES_DIR.glob("*.txt")))
    doc_shingles = shingles(text)  # > 4,096 shingles: several update_batch calls
    assert len(doc_shingles) > 4096
    reference = MinHash(num_perm=112, seed=1)
    reference.update_batch(doc_shingles)
    assert np.array_equal(MinHasher().signature(doc_shingles), reference.hashvalues)


def test_shingles_are_word_5grams_of_normalized_words():
    assert shingles("The cat sat on the mat, again!") == [b"the cat sat on the", b"cat sat on the mat",
                                                          b"sat on the mat again"]
    assert shingles("Too short") == [b"too short"]
    assert shingles("  ...  ") == []
    assert len(shingles("我们今天去北京大学参观，天气很好。", lang="zh")) == 4  # ICU words, not characters


def test_exact_key_normalization():
    assert exact_key("Hello   World\n") == exact_key("hello world")
    assert exact_key("ﬁne") == exact_key("fine")  # NFKC
    assert exact_key("Hello World") != exact_key("Hello World!")


def test_s_curve_reference_values_and_threshold_search():
    assert [round(s_curve(s, 20, 5), 3) for s in (0.3, 0.5, 0.7)] == [0.047, 0.470, 0.975]
    assert DedupConfig().band_rows() == (14, 8)
    assert DedupConfig(threshold=0.8).band_rows() == (13, 8)
    assert _optimal_param(0.8, 112, 0.5, 0.5) == (9, 12)  # datasketch's choice: a pair at 0.8 caught half the time


@pytest.mark.parametrize("threshold", [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95])
def test_a_chosen_threshold_catches_pairs_at_it_nine_times_in_ten(threshold):
    bands, rows = DedupConfig(threshold=threshold).band_rows()
    assert bands * rows <= 112 and s_curve(threshold, bands, rows) >= 0.9
    assert s_curve(threshold - 0.2, bands, rows) < 0.5  # and is still a threshold: far fewer well below it


@pytest.mark.parametrize("num_perm", [64, 112, 256])
def test_the_band_search_is_computed_once_and_leaves_the_verify_threshold_alone(num_perm):
    bands_for_threshold.cache_clear()
    config = DedupConfig(threshold=0.8, num_perm=num_perm)
    bands, rows = config.band_rows()
    assert config.band_rows() == (bands, rows) and bands * rows <= num_perm and s_curve(0.8, bands, rows) >= 0.9
    assert bands_for_threshold.cache_info().misses == 1 and bands_for_threshold.cache_info().hits == 1
    assert config.verify_threshold == DedupConfig().verify_threshold


def test_near_identical_documents_share_a_band_and_unrelated_do_not():
    hasher = MinHasher()
    base = " ".join(EN[:30])
    edited = base.replace(" the ", " a ", 1)
    other = " ".join(EN[30:60])
    keys = [set(band_keys(hasher.signature(shingles(t)), 14, 8)) for t in (base, edited, other)]
    assert keys[0] & keys[1] and not keys[0] & keys[2]
    assert jaccard(shingles(base), shingles(edited)) > 0.9


def test_survivor_order():
    ranked = sorted([survivor_rank(0.5, 100, "b"), survivor_rank(0.9, 10, "c"), survivor_rank(None, 500, "a"),
                     survivor_rank(0.5, 100, "a")])
    assert [r[2] for r in ranked] == ["c", "a", "b", "a"]  # quality, then length, then id; no score sorts last


def test_star_steps():
    edges, changed = large_star("b", ["a", "c", "d"])
    assert sorted(edges) == [("c", "a"), ("d", "a")] and changed
    assert large_star("a", ["b"]) == ([("b", "a")], False)
    assert sorted(small_star("c", ["a", "b", "d"])[0]) == [("b", "a"), ("c", "a")]
    assert small_star("b", ["a"]) == ([("b", "a")], False)
    assert small_star("a", ["b"]) == ([], False)


def test_a_finished_star_settles_and_leaves_the_loop():
    # "a" below all its neighbours, each of which noted it hangs on "a" alone: the whole component is settled
    values = ["b", "c", ("leaf", "b"), ("leaf", "c")]
    assert large_star_settling("a", values) == ([], [("b", "a"), ("c", "a"), ("a", "a")], False)
    # a neighbour without a note may have other edges: not settled, a plain large-star step
    assert large_star_settling("a", ["b", "c", ("leaf", "b")]) == (large_star("a", ["b", "c"])[0], [], False)
    # not the smallest of its neighbourhood: not a centre
    assert large_star_settling("b", ["a", "c", ("leaf", "a"), ("leaf", "c")])[1] == []


def test_only_a_node_without_larger_neighbours_notes_its_one_edge():
    edges, notes, changed = small_star_noting("c", ["a", "b"])  # edges in set order: compare them sorted
    assert sorted(edges) == sorted(small_star("c", ["a", "b"])[0]) and notes == [("a", ("leaf", "c"))] and changed
    assert small_star_noting("b", ["a", "c"])[1] == []  # "c" may link "b" to something else next round
    assert small_star_noting("a", ["b"]) == ([], [], False)


def _random_graph(seed: int):
    rng = random.Random(seed)
    nodes = [f"n{rng.randrange(10**6):06d}" for _ in range(rng.choice([5, 40, 300]))]
    shape = seed % 3
    if shape == 0:  # chains
        return list(zip(nodes, nodes[1:]))
    if shape == 1:  # random sparse
        return [(rng.choice(nodes), rng.choice(nodes)) for _ in range(len(nodes))]
    return [(nodes[0], n) for n in nodes[1:]] + [(nodes[i], nodes[i + 2]) for i in range(0, len(nodes) - 2, 7)]


@pytest.mark.parametrize("seed", range(30))
def test_rounds_that_shrink_find_the_same_components_as_union_find(seed):
    from tests.union_find import union_find_components

    edges = [(u, v) for u, v in _random_graph(seed) if u != v]
    expected = union_find_components(edges)
    for shrink in (True, False):
        found, rounds = components_in_memory(edges, 30, shrink=shrink)
        assert found == expected
        assert not rounds[-1]["changed"]


def test_rounds_after_convergence_take_in_nothing():
    nodes = [f"d{i:05d}" for i in range(2000)]
    random.Random(1).shuffle(nodes)
    edges = list(zip(nodes, nodes[1:]))  # a shuffled chain needs several rounds
    _, before = components_in_memory(edges, 30, shrink=False)
    _, after = components_in_memory(edges, 30, shrink=True)
    converged = max(i for i, r in enumerate(before) if r["changed"]) + 1
    assert all(r["edges"] >= 1999 for r in before)  # every round carried the whole edge set
    assert all(r["edges"] == 0 for r in after[converged + 2:])  # settled one round after converging, then nothing
    assert sum(r["shuffled"] for r in after) < sum(r["shuffled"] for r in before) / 2
