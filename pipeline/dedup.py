"""Exact and MinHash-LSH near-duplicate removal as Beam transforms.

No step holds all documents, signatures or edges on one worker: every grouping is a
GroupByKey / CoGroupByKey / CombinePerKey on a document, bucket or component key.

Near duplicates: signature -> 14 band keys per document -> GroupByKey per band key ->
star edges (member -> smallest id of the bucket) -> [exact-Jaccard verification] ->
connected components by alternating large-star / small-star rounds, unrolled in the graph
with a change counter per round, finished components leaving the loop -> per component, the best
document survives.
"""
from __future__ import annotations

from collections.abc import Iterable

import apache_beam as beam

from pipeline.transforms import DOCUMENTS, LEDGER, count, count_kept, route
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
from stages.record import Document, DropReason

EXACT, NEAR = "exact_dedup", "near_dedup"
SETTLED, NOTES = "settled", "notes"  # tagged outputs of the star steps
CLUSTER_BUCKETS = ((2, "2"), (5, "3-5"), (10, "6-10"), (100, "11-100"), (float("inf"), ">100"))


def _rank(doc: Document):
    return survivor_rank(doc.quality_score, len(doc.text), doc.id)


def _resolve(stage: str, reason: DropReason, docs: Iterable[Document], winner_id: str):
    """Keep the winner (once, even if an id repeats), send the others to the ledger naming the winner."""
    kept = False
    for doc in docs:
        count(f"{stage}.in")
        if doc.id == winner_id and not kept:
            kept = True
            count_kept(stage, doc)
            yield doc
        else:
            count(f"{stage}.drop.{reason}")
            yield beam.pvalue.TaggedOutput(LEDGER, doc.drop(stage, reason, f"kept {winner_id}", kept_id=winner_id))


def _key_by_text(doc: Document):
    """(text hash, doc); a document whose text cannot be hashed is ledgered, not a failed job."""
    try:
        yield exact_key(doc.text), doc
    except Exception as exc:
        count(f"{EXACT}.in")
        yield route(EXACT, doc.drop_for_error(EXACT, exc))


class ExactDedup(beam.PTransform):
    """One document per normalized-text hash survives (best quality, then longest, then smallest id)."""

    def expand(self, documents):
        keyed_or_failed = documents | "KeyByText" >> beam.FlatMap(_key_by_text).with_outputs(LEDGER, main="keyed")
        keyed = keyed_or_failed["keyed"]
        winners = (keyed
                   | "Rank" >> beam.Map(lambda kv: (kv[0], _rank(kv[1])))
                   | "Best" >> beam.CombinePerKey(min))
        results = ({"docs": keyed, "winner": winners}
                   | "Join" >> beam.CoGroupByKey()
                   | "Resolve" >> beam.FlatMap(lambda kv: _resolve(EXACT, DropReason.EXACT_DUPLICATE, kv[1]["docs"],
                                                                   kv[1]["winner"][0][2]))
                   .with_outputs(LEDGER, main=DOCUMENTS))
        ledger = (results[LEDGER], keyed_or_failed[LEDGER]) | "ExactLedger" >> beam.Flatten()
        return results[DOCUMENTS], ledger


class _Signatures(beam.DoFn):
    """Document -> (band key, id) pairs; with verification also (id, shingle hashes)."""

    SHINGLES = "shingles"

    def __init__(self, config: DedupConfig):
        self._config = config
        self._hasher = None

    def setup(self) -> None:
        self._hasher = MinHasher(self._config.num_perm, self._config.seed)

    def process(self, doc: Document):
        c = self._config
        try:
            doc_shingles = shingles(doc.text, c.shingle_words, doc.lang)
        except Exception:  # the document still reaches the output, unmatched: counted, not lost
            count(f"{NEAR}.note.shingling_failed")
            return
        if not doc_shingles:
            count(f"{NEAR}.note.no_shingles")
            return
        bands, rows = c.band_rows()
        for key in band_keys(self._hasher.signature(doc_shingles), bands, rows):
            yield key, doc.id
        if c.verify:
            yield beam.pvalue.TaggedOutput(self.SHINGLES, (doc.id, frozenset(shingle_hash(s) for s in doc_shingles)))


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
    """documents -> (kept, ledger). With `signatures` ((id, {"exact_key", "bands"}) of phase 1, made by the
    same functions on the same text) the band keys are looked up by id instead of computed again
    (not with `verify`, which needs the shingles themselves)."""

    def __init__(self, config: DedupConfig, signatures=None):
        super().__init__()
        self._config, self._signatures = config, signatures

    def expand(self, documents):
        c = self._config
        if self._signatures is not None and not c.verify:
            entering = documents | "EnteringIds" >> beam.Map(lambda d: (d.id, None))
            band_keys_by_id = (({"doc": entering, "signature": self._signatures} | "JoinSignatures" >> beam.CoGroupByKey())
                               | "StoredBandKeys" >> beam.FlatMap(_stored_band_keys))
        else:
            signed = documents | "Signatures" >> beam.ParDo(_Signatures(c)).with_outputs(_Signatures.SHINGLES,
                                                                                          main="keys")
            band_keys_by_id = signed["keys"]
        edges = (band_keys_by_id
                 | "GroupBuckets" >> beam.GroupByKey()
                 | "BucketStars" >> beam.FlatMap(_bucket_edges)
                 | "DistinctEdges" >> beam.Distinct())
        if c.verify:
            shingle_sets = signed[_Signatures.SHINGLES]
            edges = (({"edge": edges, "sh": shingle_sets} | "JoinA" >> beam.CoGroupByKey())
                     | "CarryA" >> beam.FlatMap(_carry_shingles))
            edges = (({"edge": edges, "sh": shingle_sets} | "JoinB" >> beam.CoGroupByKey())
                     | "Verify" >> beam.FlatMap(_verify, c.verify_threshold))
        component = edges | "Components" >> ConnectedComponents(c.max_rounds)  # (id, component)

        _ = (component
             | "ComponentOnly" >> beam.Map(_one_member)
             | "ClusterSize" >> beam.CombinePerKey(sum)
             | "CountSizes" >> beam.Map(_count_cluster_size))

        by_id = documents | "KeyById" >> beam.Map(_keyed_by_id)
        placed = (({"doc": by_id, "component": component} | "Place" >> beam.CoGroupByKey())
                  | "ToComponent" >> beam.FlatMap(_place).with_outputs("singletons", main="clustered"))
        winners = (placed["clustered"]
                   | "RankInComponent" >> beam.Map(_ranked)
                   | "BestInComponent" >> beam.CombinePerKey(min))
        results = ({"docs": placed["clustered"], "winner": winners}
                   | "JoinWinner" >> beam.CoGroupByKey()
                   | "Resolve" >> beam.FlatMap(_resolve_component).with_outputs(LEDGER, main=DOCUMENTS))
        singletons = placed["singletons"] | "CountSingletons" >> beam.Map(_count_singleton)
        kept = (results[DOCUMENTS], singletons) | "AllKept" >> beam.Flatten()
        return kept, results[LEDGER]


def _stored_band_keys(kv):
    """(id, {"doc": [None], "signature": [row]}) -> (band key, id), as `_Signatures` makes them, for the
    documents entering near dedup."""
    doc_id, joined = kv
    if not joined["doc"] or not joined["signature"]:
        return
    row = joined["signature"][0]
    if row["exact_key"] is None:  # the text could not be shingled in phase 1
        count(f"{NEAR}.note.shingling_failed")
    elif not row["bands"]:
        count(f"{NEAR}.note.no_shingles")
    for i, digest in enumerate(row["bands"] or ()):
        yield (i, digest), doc_id


def _carry_shingles(kv):
    """(a, {"edge": [b, ...], "sh": [shingles of a]}) -> (b, (a, shingles of a)) for each edge a-b."""
    a, joined = kv
    return [(b, (a, joined["sh"][0])) for b in joined["edge"]] if joined["sh"] else []


def _one_member(kv):
    return kv[1], 1  # (id, component) -> (component, 1)


def _count_cluster_size(kv) -> None:
    count(f"{NEAR}.note.cluster_size.{_cluster_bucket(kv[1])}")


def _keyed_by_id(doc: Document):
    return doc.id, doc


def _ranked(kv):
    return kv[0], _rank(kv[1])  # (component, doc) -> (component, rank)


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


def _count_singleton(doc: Document) -> Document:
    count(f"{NEAR}.in")
    count_kept(NEAR, doc)
    return doc


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
