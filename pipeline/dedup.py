"""Exact and MinHash-LSH near-duplicate removal as Beam transforms.

They take `Signed` records (id, exact key, band digests, survivor rank, tokens, prepared part), never
texts, and give the survivors and a `Decision` per dropped document; the job applies the decisions
while it streams each prepared part once (pipeline/finish.py). No step holds all documents, signatures or edges on one worker: every grouping is a
GroupByKey / CoGroupByKey / CombinePerKey on a document, bucket or component key.

Near duplicates: signature -> 14 band keys per document -> GroupByKey per band key ->
star edges (member -> smallest id of the bucket) -> [exact-Jaccard verification] ->
connected components by alternating large-star / small-star rounds, unrolled in the graph
with a change counter per round, finished components leaving the loop -> per component, the best
document survives.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import apache_beam as beam

from pipeline.transforms import DOCUMENTS, LEDGER, count
from stages.dedup import (
    DedupConfig,
    MinHasher,
    band_keys,
    both_directions,
    exact_key,
    jaccard,
    large_star_settling,
    shingle_hash,
    shingles,
    small_star_noting,
    survivor_rank,
)
from stages.mix import approx_tokens
from stages.record import Document, DropReason

EXACT, NEAR = "exact_dedup", "near_dedup"
SETTLED, NOTES = "settled", "notes"  # tagged outputs of the star steps
CLUSTER_BUCKETS = ((2, "2"), (5, "3-5"), (10, "6-10"), (100, "11-100"), (float("inf"), ">100"))


class Signed(NamedTuple):
    """What dedup needs of a document, never its text: signature, survivor rank, tokens (for the funnel)
    and the prepared part it lies in (where the decision goes back to)."""

    id: str
    part: str
    exact_key: str | None               # None: the text could not be hashed in phase 1 (matches nothing)
    bands: tuple[bytes, ...]             # MinHash band digests, band i at position i
    rank: tuple[float, int, str]         # stages.dedup.survivor_rank: smaller survives
    tokens: int
    shingles: frozenset | None = None    # shingle hashes, only with dedup.verify


class Decision(NamedTuple):
    """A dedup stage drops document `id` of part `part`; the part's documents are read once, later, to
    ledger it with everything the ledger shows (url, language, file, snippet)."""

    id: str
    part: str
    stage: str
    reason: str
    detail: str
    kept_id: str | None = None


class Signer:
    """exact key and MinHash band digests of a text (phase 1 stores them; `--dedup-against` compares them)."""

    def __init__(self, config: DedupConfig):
        self._config, self._hasher = config, None

    def __call__(self, doc: Document) -> tuple[str | None, list[bytes]]:
        c = self._config
        if self._hasher is None:
            self._hasher = MinHasher(c.num_perm, c.seed)
        try:
            key = exact_key(doc.text)
            doc_shingles = shingles(doc.text, c.shingle_words, doc.lang)
        except Exception:  # the document still goes on; it just matches nothing
            count("prepare.note.unsigned")
            return None, []
        if not doc_shingles:
            return key, []
        bands, rows = c.band_rows()
        return key, [digest for _, digest in band_keys(self._hasher.signature(doc_shingles), bands, rows)]


def signed(doc: Document, part: str, signature: tuple[str | None, list[bytes]],
           config: DedupConfig | None = None) -> Signed:
    """The Signed record of a document (with its shingle hashes when `config.verify`)."""
    shingle_set = verify_shingles(doc.text, doc.lang, config) if config is not None and config.verify else None
    return Signed(doc.id, part, signature[0], tuple(signature[1] or ()),
                  survivor_rank(doc.quality_score, len(doc.text), doc.id), approx_tokens(doc.text), shingle_set)


def verify_shingles(text: str, lang: str | None, config: DedupConfig) -> frozenset:
    """The shingle hashes `dedup.verify` compares (none if the text cannot be shingled)."""
    try:
        return frozenset(shingle_hash(s) for s in shingles(text, config.shingle_words, lang))
    except Exception:
        return frozenset()


class SignDocuments(beam.PTransform):
    """Documents -> Signed records (what the job reads from the prepared parts instead; for tests and benches)."""

    def __init__(self, config: DedupConfig, part: str = "-"):
        super().__init__()
        self._config, self._part = config, part

    def expand(self, documents):
        config, part, signer = self._config, self._part, Signer(self._config)
        return documents | "Sign" >> beam.Map(lambda d: signed(d, part, signer(d), config))


def count_kept_signed(stage: str, s: Signed) -> None:
    count(f"{stage}.kept")
    if s.tokens:
        count(f"{stage}.kept_tokens", s.tokens)


def _resolve(stage: str, reason: DropReason, members: Iterable[Signed], winner_id: str):
    """Keep the winner (once, even if an id repeats); the others become decisions naming the winner."""
    kept = False
    for s in members:
        count(f"{stage}.in")
        if s.id == winner_id and not kept:
            kept = True
            count_kept_signed(stage, s)
            yield s
        else:
            count(f"{stage}.drop.{reason}")
            yield beam.pvalue.TaggedOutput(LEDGER, Decision(s.id, s.part, stage, reason, f"kept {winner_id}",
                                                            winner_id))


def _key_by_text(s: Signed):
    if s.exact_key is None:  # unhashable text (counted in phase 1): it is unique
        count(f"{EXACT}.in")
        count_kept_signed(EXACT, s)
        yield beam.pvalue.TaggedOutput("unkeyed", s)
        return
    yield s.exact_key, s


class ExactDedup(beam.PTransform):
    """Signed -> (Signed survivors, Decisions): one document per normalized-text hash survives (best
    quality, then longest, then smallest id)."""

    def expand(self, signed_docs):
        keyed_or_not = signed_docs | "KeyByText" >> beam.FlatMap(_key_by_text).with_outputs("unkeyed", main="keyed")
        keyed = keyed_or_not["keyed"]
        winners = (keyed
                   | "Rank" >> beam.Map(lambda kv: (kv[0], kv[1].rank))
                   | "Best" >> beam.CombinePerKey(min))
        results = ({"docs": keyed, "winner": winners}
                   | "Join" >> beam.CoGroupByKey()
                   | "Resolve" >> beam.FlatMap(lambda kv: _resolve(EXACT, DropReason.EXACT_DUPLICATE, kv[1]["docs"],
                                                                   kv[1]["winner"][0][2]))
                   .with_outputs(LEDGER, main=DOCUMENTS))
        kept = (results[DOCUMENTS], keyed_or_not["unkeyed"]) | "AllKept" >> beam.Flatten()
        return kept, results[LEDGER]


def _band_keys(s: Signed, verify: bool):
    """Signed -> (band key, id); with verification also (id, shingle hashes)."""
    if s.exact_key is None:  # the text could not be shingled in phase 1
        count(f"{NEAR}.note.shingling_failed")
        return
    if not s.bands:
        count(f"{NEAR}.note.no_shingles")
        return
    for i, digest in enumerate(s.bands):
        yield (i, digest), s.id
    if verify:
        yield beam.pvalue.TaggedOutput(SHINGLES, (s.id, s.shingles or frozenset()))


SHINGLES = "shingles"


def _bucket_edges(bucket: tuple[object, Iterable[str]]) -> list[tuple[str, str]]:
    """A star inside one LSH bucket: every member links to the bucket's smallest id (not all pairs)."""
    members = set(bucket[1])
    if len(members) < 2:
        return []
    centre = min(members)
    count(f"{NEAR}.note.candidate_buckets")
    return [(m, centre) for m in members if m != centre]


def _entering(edge: tuple[str, str], round_name: str) -> list[tuple[str, str]]:
    count(f"{NEAR}.cc.{round_name}.edges")  # edges still in the loop: what this round shuffles (twice)
    return both_directions(edge)


def _large_star(node_values, round_name: str):
    edges, settled, changed = large_star_settling(*node_values)
    if changed:
        count(f"{NEAR}.cc.{round_name}.large")
    if settled:
        count(f"{NEAR}.cc.{round_name}.settled", len(settled))
    yield from edges
    for pair in settled:
        yield beam.pvalue.TaggedOutput(SETTLED, pair)


def _small_star(node_neighbours, round_name: str):
    edges, notes, changed = small_star_noting(*node_neighbours)
    if changed:
        count(f"{NEAR}.cc.{round_name}.small")
    yield from edges
    for note in notes:
        yield beam.pvalue.TaggedOutput(NOTES, note)


def _both_ends(edge: tuple[str, str]):
    return [(edge[0], edge[1]), (edge[1], edge[1])]


class ConnectedComponents(beam.PTransform):
    """Edges -> (node, component id = smallest node id), for every node that has an edge.

    Beam graphs have no loops, so `max_rounds` rounds of large-star + small-star are unrolled; each
    counts its changes (`near_dedup.cc.round<i>.large/small`) and the edges it took in
    (`...edges`). A round with no change means convergence; the job checks the last round and fails
    loudly if it still changed something. Components that have become finished stars leave the loop
    (stages/dedup.py, `large_star_settling`): later rounds carry only what can still change, and the
    rounds after convergence take in nothing.
    """

    def __init__(self, max_rounds: int):
        super().__init__()
        self._max_rounds = max_rounds

    def expand(self, edges):
        notes = edges.pipeline | "NoNotes" >> beam.Create([])
        settled = []
        for i in range(self._max_rounds):
            name = f"round{i}"
            large = ((edges | f"Enter{i}" >> beam.FlatMap(_entering, name), notes)
                     | f"WithNotes{i}" >> beam.Flatten()
                     | f"LargeGroup{i}" >> beam.GroupByKey()
                     | f"LargeStar{i}" >> beam.FlatMap(_large_star, name).with_outputs(SETTLED, main="edges"))
            settled.append(large[SETTLED])
            small = (large["edges"]
                     | f"SmallSymmetric{i}" >> beam.FlatMap(both_directions)
                     | f"SmallGroup{i}" >> beam.GroupByKey()
                     | f"SmallStar{i}" >> beam.FlatMap(_small_star, name).with_outputs(NOTES, main="edges"))
            edges, notes = small["edges"], small[NOTES]
        return ((edges | "BothEnds" >> beam.FlatMap(_both_ends), *settled)
                | "AllNodes" >> beam.Flatten()
                | "Component" >> beam.CombinePerKey(min))


def _verify(kv, threshold: float):
    """(b, {"edge": [(a, shingles_a)], "sh": [shingles_b]}) -> edges whose exact Jaccard >= threshold."""
    b, joined = kv
    if not joined["sh"]:
        return
    shingles_b = joined["sh"][0]
    for a, shingles_a in joined["edge"]:
        if jaccard(shingles_a, shingles_b) >= threshold:
            yield a, b
        else:
            count(f"{NEAR}.note.links_rejected_by_verification")


def _cluster_bucket(size: int) -> str:
    return next(label for limit, label in CLUSTER_BUCKETS if size <= limit)


class NearDedup(beam.PTransform):
    """Signed -> (Signed survivors, Decisions): per connected component of LSH candidates (exact-Jaccard
    verified with `verify`), the best document survives."""

    def __init__(self, config: DedupConfig):
        super().__init__()
        self._config = config

    def expand(self, signed_docs):
        c = self._config
        keys = signed_docs | "BandKeys" >> beam.FlatMap(_band_keys, c.verify).with_outputs(SHINGLES, main="keys")
        edges = (keys["keys"]
                 | "GroupBuckets" >> beam.GroupByKey()
                 | "BucketStars" >> beam.FlatMap(_bucket_edges)
                 | "DistinctEdges" >> beam.Distinct())
        if c.verify:
            shingle_sets = keys[SHINGLES]
            edges = (({"edge": edges, "sh": shingle_sets} | "JoinA" >> beam.CoGroupByKey())
                     | "CarryA" >> beam.FlatMap(_carry_shingles))
            edges = (({"edge": edges, "sh": shingle_sets} | "JoinB" >> beam.CoGroupByKey())
                     | "Verify" >> beam.FlatMap(_verify, c.verify_threshold))
        component = edges | "Components" >> ConnectedComponents(c.max_rounds)  # (id, component)

        _ = (component
             | "ComponentOnly" >> beam.Map(_one_member)
             | "ClusterSize" >> beam.CombinePerKey(sum)
             | "CountSizes" >> beam.Map(_count_cluster_size))

        by_id = signed_docs | "KeyById" >> beam.Map(lambda s: (s.id, s))
        placed = (({"doc": by_id, "component": component} | "Place" >> beam.CoGroupByKey())
                  | "ToComponent" >> beam.FlatMap(_place).with_outputs("singletons", main="clustered"))
        winners = (placed["clustered"]
                   | "RankInComponent" >> beam.Map(lambda kv: (kv[0], kv[1].rank))
                   | "BestInComponent" >> beam.CombinePerKey(min))
        results = ({"docs": placed["clustered"], "winner": winners}
                   | "JoinWinner" >> beam.CoGroupByKey()
                   | "Resolve" >> beam.FlatMap(_resolve_component).with_outputs(LEDGER, main=DOCUMENTS))
        singletons = placed["singletons"] | "CountSingletons" >> beam.Map(_count_singleton)
        kept = (results[DOCUMENTS], singletons) | "AllKept" >> beam.Flatten()
        return kept, results[LEDGER]


def _carry_shingles(kv):
    """(a, {"edge": [b, ...], "sh": [shingles of a]}) -> (b, (a, shingles of a)) for each edge a-b."""
    a, joined = kv
    return [(b, (a, joined["sh"][0])) for b in joined["edge"]] if joined["sh"] else []


def _one_member(kv):
    return kv[1], 1  # (id, component) -> (component, 1)


def _count_cluster_size(kv) -> None:
    count(f"{NEAR}.note.cluster_size.{_cluster_bucket(kv[1])}")


def _resolve_component(kv):
    """(component, {"docs": [...], "winner": [rank]}): the best copy goes on, the others to the ledger."""
    return _resolve(NEAR, DropReason.NEAR_DUPLICATE, kv[1]["docs"], kv[1]["winner"][0][2])


def _place(kv):
    """(id, {"doc": [doc], "component": [c]}) -> (component, doc), or the doc alone if it has no near duplicate."""
    _, joined = kv
    for doc in joined["doc"]:
        if joined["component"]:
            yield joined["component"][0], doc
        else:
            yield beam.pvalue.TaggedOutput("singletons", doc)


def _count_singleton(s: Signed) -> Signed:
    count(f"{NEAR}.in")
    count_kept_signed(NEAR, s)
    return s


def rounds_to_converge(counters: dict[str, int], max_rounds: int) -> tuple[int, bool]:
    """(rounds that changed something + the confirming round, converged?) from the job's counters."""
    changed = [i for i in range(max_rounds)
               if counters.get(f"{NEAR}.cc.round{i}.large", 0) or counters.get(f"{NEAR}.cc.round{i}.small", 0)]
    last = max(changed) + 1 if changed else 0
    return min(last + 1, max_rounds), last < max_rounds


def dedup_report(config: DedupConfig, counters: dict[str, int]) -> dict:
    """Bands/rows, the S-curve they give, rounds to converge, cluster-size histogram."""
    from stages.dedup import s_curve

    bands, rows = config.band_rows()
    report: dict = {"bands": bands, "rows": rows, "num_perm": config.num_perm, "shingle_words": config.shingle_words,
                    "s_curve": {f"{s:.1f}": round(s_curve(s, bands, rows), 3) for s in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)},
                    "verify": config.verify}
    if config.near:
        rounds, converged = rounds_to_converge(counters, config.max_rounds)
        prefix = f"{NEAR}.note.cluster_size."
        carried = [counters.get(f"{NEAR}.cc.round{i}.edges", 0) for i in range(config.max_rounds)]
        while carried and not carried[-1]:
            carried.pop()  # settled components left the loop: the later rounds carried nothing
        report.update({
            "rounds": rounds, "max_rounds": config.max_rounds, "converged": converged, "edges_per_round": carried,
            "cluster_sizes": {label: counters.get(prefix + label, 0) for _, label in CLUSTER_BUCKETS},
        })
    return report
