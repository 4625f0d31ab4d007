"""Deduplication building blocks, Beam-free: exact text hashes, MinHash signatures, LSH band keys,
the star-contraction steps of connected components, and which copy survives.

MinHash is datasketch's (same seed -> same permutations -> same signature; a test checks this
against `datasketch.MinHash.update`), fed through its batch API instead of one call per shingle.
"""
from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from common.settings import check
from stages.record import DropReason
from stages.table import GLOBAL, StageSpec
from stages.text import normalized_words

_SPACE = re.compile(r"\s+")
_CHUNK = 4096  # shingles hashed per batch: bounds memory at CHUNK x num_perm x 8 bytes


@dataclass(frozen=True)
class DedupConfig:
    """Exact and MinHash-LSH near-duplicate removal (after the filters, before PII)."""

    exact: bool = True            # one copy per NFKC + casefold + whitespace-collapsed text
    near: bool = True
    shingle_words: int = 5        # word 5-grams (FineWeb)
    num_perm: int = 112           # 14 bands x 8 rows: FineWeb's setting (P[candidate] = 0.5 at Jaccard ~0.72)
    bands: int = 14
    rows: int = 8
    # e.g. 0.8: instead of `bands` x `rows`, the bands and rows that make a pair at this Jaccard a candidate
    # with probability >= 0.9 (CANDIDATE_AT_THRESHOLD), with the fewest candidates below it (0.8: 13 x 8,
    # 0.908; datasketch's search, which weighs both errors equally, gives 9 x 12: 0.47 at 0.8)
    threshold: float | None = None
    seed: int = 1
    verify: bool = False          # drop candidate links whose exact shingle Jaccard is below `verify_threshold`
    verify_threshold: float = 0.7
    # LSH bands bucketed per shuffle (NeMo Curator's buckets_per_shuffle): a local run holds one shuffle's
    # band entries at a time, ~5x their 20 bytes each; fewer, less memory, one more pass over the signatures
    bands_per_shuffle: int = 5
    max_rounds: int = 30          # connected-component rounds unrolled in the Beam graph (a 10k chain needs ~15);
                                  # the run fails, saying so, if they are not enough

    def __post_init__(self):
        check(self.threshold is None or 0.0 < self.threshold < 1.0, f"threshold must be in (0, 1), got {self.threshold}")
        check(0.0 <= self.verify_threshold <= 1.0, f"verify_threshold must be in [0, 1], got {self.verify_threshold}")
        check(self.num_perm >= 1 and self.bands >= 1 and self.rows >= 1, "num_perm, bands and rows must be >= 1")
        check(self.threshold is not None or self.bands * self.rows <= self.num_perm,
              f"bands x rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}")
        check(self.max_rounds >= 1 and self.shingle_words >= 1 and self.bands_per_shuffle >= 1,
              "max_rounds, shingle_words and bands_per_shuffle must be >= 1")

    def band_rows(self) -> tuple[int, int]:
        if self.threshold is None:
            return self.bands, self.rows
        return bands_for_threshold(self.threshold, self.num_perm)


CANDIDATE_AT_THRESHOLD = 0.9  # what `dedup.threshold` promises: a pair at that Jaccard is caught this often


@functools.lru_cache(maxsize=32)
def bands_for_threshold(threshold: float, num_perm: int, at_least: float = CANDIDATE_AT_THRESHOLD) -> tuple[int, int]:
    """The (bands, rows), bands x rows <= num_perm, under which a pair at Jaccard `threshold` becomes a candidate
    with probability >= `at_least`, and which make the fewest candidates below it (the least area under the
    S-curve from 0 to `threshold`): a user asking for 0.8 gets at least 0.8, not a coin flip there."""
    pairs = np.array([(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)], dtype=float)
    bands, rows = pairs[:, 0], pairs[:, 1]
    caught = 1 - (1 - threshold ** rows) ** bands
    nodes, weights = np.polynomial.legendre.leggauss(64)
    s = threshold / 2 * nodes + threshold / 2
    below = threshold / 2 * ((1 - (1 - s[None, :] ** rows[:, None]) ** bands[:, None]) @ weights)
    below[caught < at_least] = np.inf
    best = int(np.argmin(below))
    return int(bands[best]), int(rows[best])


def exact_key(text: str) -> str:
    """Hash of the text after NFKC, case folding and whitespace collapsing."""
    normalized = _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return hashlib.blake2b(normalized.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def shingles(text: str, n: int = 5, lang: str | None = None) -> list[bytes]:
    """Distinct word n-grams of the normalized words (a text shorter than n words is one shingle)."""
    words = normalized_words(text, lang)
    if not words:
        return []
    if len(words) < n:
        return [" ".join(words).encode("utf-8")]
    return list(dict.fromkeys(" ".join(words[i:i + n]).encode("utf-8") for i in range(len(words) - n + 1)))


def shingle_hash(data: bytes) -> int:
    """64-bit hash of a shingle, for exact Jaccard checks on hashed sets (collisions ~ n^2 / 2^64)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


class MinHasher:
    """MinHash signatures from datasketch itself (`update_batch`: one vectorized pass over a document's
    shingles), with the permutations computed once and reused for every document."""

    def __init__(self, num_perm: int = 112, seed: int = 1):
        from datasketch import MinHash

        self._minhash = MinHash
        self.num_perm, self.seed = num_perm, seed
        template = MinHash(num_perm=num_perm, seed=seed)
        self._permutations, self._scheme = template.permutations, template.scheme

    def signature(self, shingle_set: Sequence[bytes]) -> np.ndarray:
        m = self._minhash(num_perm=self.num_perm, seed=self.seed, permutations=self._permutations,
                          scheme=self._scheme)
        for start in range(0, len(shingle_set), _CHUNK):
            m.update_batch(shingle_set[start:start + _CHUNK])
        return m.hashvalues


BAND_DIGEST_BYTES = 12


def band_keys(signature: np.ndarray, bands: int, rows: int) -> list[tuple[int, bytes]]:
    """(band index, digest of that band's values): documents sharing any key are candidates."""
    return [(i, hashlib.blake2b(signature[i * rows:(i + 1) * rows].tobytes(), digest_size=BAND_DIGEST_BYTES).digest())
            for i in range(bands)]


def s_curve(s: float, bands: int, rows: int) -> float:
    """Probability that two documents of Jaccard similarity s share at least one band."""
    return 1.0 - (1.0 - s ** rows) ** bands


def jaccard(a: Iterable, b: Iterable) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a or b else 1.0


def survivor_rank(quality_score: float | None, text_length: int, doc_id: str) -> tuple[float, int, str]:
    """Smaller is better: highest quality score, then longest text, then smallest id."""
    return (-(quality_score if quality_score is not None else -1.0), -text_length, doc_id)


def copy_rank(origin: tuple[int, str], tokens: int, quality_score: float | None, text_length: int,
              doc_id: str) -> tuple:
    """Which of a set of duplicates exact and near dedup keep (smaller is kept), on the evidence paragraph dedup
    uses (stages/shared_text.py): the original where anything says which is (`origin`: not a page naming another
    canonical, then the earliest date; stages.origin.origin_evidence), then the most complete copy (most tokens:
    an excerpt or truncated copy never wins over the article), then survivor_rank's quality, length and id."""
    return (*origin, -tokens, *survivor_rank(quality_score, text_length, doc_id))


# ---- connected components by alternating large-star / small-star (Kiveris et al., SoCC 2014) -------
# Each step takes one node and its neighbour set and emits edges; a round is one large-star then
# one small-star step. When neither step changes anything, every component is a star whose centre
# is its smallest id. Each step is one GroupByKey in Beam; nothing holds the whole graph.

def large_star(node: str, neighbours: Iterable[str]) -> tuple[list[tuple[str, str]], bool]:
    """Link every larger neighbour to the smallest node of the neighbourhood. Returns (edges, changed)."""
    neighbours = set(neighbours)
    smallest = min(neighbours | {node})
    larger = [v for v in neighbours if v > node]
    return [(v, smallest) for v in larger], bool(larger) and smallest < node


def small_star(node: str, neighbours: Iterable[str]) -> tuple[list[tuple[str, str]], bool]:
    """Link the node and its smaller neighbours to the smallest of them. Returns (edges, changed)."""
    smaller = {v for v in neighbours if v <= node}
    if not smaller:
        return [], False
    smallest = min(smaller | {node})
    return [(v, smallest) for v in smaller | {node} if v != smallest], len(smaller) > 1


# ---- rounds that shrink: finished stars leave the loop --------------------------------------------
# After a small-star step, a node with no larger neighbour has exactly one edge in the next graph, the
# one it emits itself (node, m): any other edge touching it would come from a larger neighbour. It sends
# m a leaf note. In the next large-star step, a node below all its neighbours, each of which sent it a
# note, is the centre of a whole component that is already a star on its smallest id: its nodes are
# settled and leave the loop, so rounds after convergence process nothing (the idea of the Cracker and
# two-phase algorithms: settled nodes stop travelling).

LEAF_NOTE = "leaf"


def large_star_settling(node: str, values: Iterable) -> tuple[list[tuple[str, str]], list[tuple[str, str]], bool]:
    """large_star over the neighbour ids among `values`, or, for the centre of a finished star (every
    neighbour larger and every neighbour's leaf note among `values`), no edges and the settled
    (node, component) pairs of the whole star. Returns (edges, settled, changed)."""
    neighbours, leaves = set(), set()
    for value in values:
        if isinstance(value, tuple):
            leaves.add(value[1])
        else:
            neighbours.add(value)
    if neighbours and leaves == neighbours and node < min(neighbours):
        return [], [(v, node) for v in sorted(neighbours)] + [(node, node)], False
    edges, changed = large_star(node, neighbours)
    return edges, [], changed


def small_star_noting(node: str, neighbours: Iterable[str]) -> tuple[list[tuple[str, str]], list, bool]:
    """small_star, plus the leaf note (m, ("leaf", node)) of a node with no larger neighbour, whose only
    edge in the next graph is then (node, m). Returns (edges, notes, changed)."""
    neighbours = set(neighbours)
    edges, changed = small_star(node, neighbours)
    if neighbours and max(neighbours) < node:
        return edges, [(min(neighbours), (LEAF_NOTE, node))], changed
    return edges, [], changed


def components_in_memory(edges: Iterable[tuple[str, str]], max_rounds: int, shrink: bool = True,
                         size=None) -> tuple[dict[str, str], list[dict[str, int]]]:
    """The rounds of pipeline.job.globals.dedup.ConnectedComponents on one machine (tests, bench/cc_rounds.py):
    the same steps in the same order, groupings as dicts. `shrink=False` runs the rounds as they were
    before settled stars left the loop. Returns ({node: component}, per round {"edges": edges taken in,
    "shuffled": elements grouped, "bytes": their encoded size by `size(key, value)`, "changed": 0/1})."""
    from collections import defaultdict

    def group(pairs, stats) -> dict[str, list]:
        groups = defaultdict(list)
        for key, value in pairs:
            groups[key].append(value)
            stats["shuffled"] += 1
            stats["bytes"] += size(key, value) if size else 0
        return groups

    edges, notes, settled, rounds = list(edges), [], {}, []
    for _ in range(max_rounds):
        stats = {"edges": len(edges), "shuffled": 0, "bytes": 0, "changed": 0}
        large_edges = []
        for node, values in group([p for e in edges for p in both_directions(e)] + notes, stats).items():
            if shrink:
                out, done, changed = large_star_settling(node, values)
                settled.update(done)
            else:
                out, changed = large_star(node, values)
            large_edges += out
            stats["changed"] |= changed
        edges, notes = [], []
        for node, neighbours in group([p for e in large_edges for p in both_directions(e)], stats).items():
            if shrink:
                out, note, changed = small_star_noting(node, neighbours)
                notes += note
            else:
                out, changed = small_star(node, neighbours)
            edges += out
            stats["changed"] |= changed
        rounds.append(stats)
    components = dict(settled)
    for u, v in edges:
        for node in (u, v):
            components[node] = min(components.get(node, v), v)
    return components, rounds


def both_directions(edge: tuple[str, str]) -> list[tuple[str, str]]:
    """An undirected edge as the two (node, neighbour) pairs a grouping step needs."""
    u, v = edge
    return [(u, v), (v, u)] if u != v else []


DEDUP_AGAINST = "dedup_against"
EXACT_OLD, NEAR_OLD = "exact_duplicate_of_earlier_run", "near_duplicate_of_earlier_run"
SPECS = (
    StageSpec(name=DEDUP_AGAINST, order=75, runs=GLOBAL, enabled=lambda run: bool(run.dedup_against),
              job="pipeline.job.globals.against:Against",
              about="`--dedup-against OLD_OUTPUT`: drop new documents duplicating one of earlier runs "
                    "(their signatures/)",
              reasons={EXACT_OLD: "the same normalized text as a document of an earlier run (detail: its id "
                                  "and output folder)",
                       NEAR_OLD: "shares a MinHash-LSH band with a document of an earlier run (detail: its id "
                                 "and output folder)"}),
    StageSpec(name="exact_dedup", order=80, runs=GLOBAL, config=DedupConfig, section="dedup",
              job="pipeline.job.globals.dedup:Exact",
              enabled=lambda run: run.dedup.exact, about="one copy of each normalized text",
              reasons={DropReason.EXACT_DUPLICATE: "same text after NFKC, case folding and whitespace collapsing "
                                                   "(detail: `kept <id>`)"}),
    StageSpec(name="near_dedup", order=90, runs=GLOBAL, config=DedupConfig, section="dedup",
              job="pipeline.job.globals.dedup:Near",
              enabled=lambda run: run.dedup.near, about="MinHash-LSH clusters keep one copy",
              reasons={DropReason.NEAR_DUPLICATE: "in a near-duplicate cluster with a better copy "
                                                  "(detail: `kept <id>`)"}),
)
