"""Exact and MinHash-LSH near-duplicate removal: the global stages `Exact` and `Near` (at the end) and their Beam
transforms. Both write report.json's `dedup` section; near dedup bands every record that entered exact dedup.

They take `Signed` records (id, exact key, band digests, survivor rank, tokens, prepared part), never
texts, and give the survivors and a `Decision` per dropped document; the job applies the decisions
while it streams each prepared part once (pipeline/job/finish.py). No step holds all documents, signatures or edges on one worker: every grouping is a
GroupByKey / CoGroupByKey / CombinePerKey on a document, bucket or component key.

Near duplicates: signature -> 14 band keys per document (every document that entered exact dedup, in
passes of `bands_per_shuffle` bands) -> grouped by band and digest prefix ->
star edges (member -> smallest node number of the bucket) -> [exact-Jaccard verification] ->
connected components by alternating large-star / small-star rounds, unrolled in the graph
with a change counter per round, finished components leaving the loop -> per component, the best
document survives.
"""
from __future__ import annotations

from collections.abc import Iterable

import apache_beam as beam

from pipeline.counters import cc_round, count, dropped, entered, note
from pipeline.job.globals.base import GlobalStage
from pipeline.job.globals.groupings import (
    GroupedEntries,
    GroupedRecords,
    bucket_group,
    count_kept_signed,
    records_in,
)
from pipeline.job.signed import (
    Decision,
    Signed,
    Signer,
    group_of,
    group_of_number,
    hash64,
    signed,
)
from pipeline.job.transforms import DOCUMENTS, LEDGER
from stages.dedup import (
    BAND_DIGEST_BYTES,
    DedupConfig,
    both_directions,
    jaccard,
    large_star_settling,
    small_star_noting,
)
from stages.record import DropReason

EXACT, NEAR = "exact_dedup", "near_dedup"
SETTLED = "settled"  # tagged output of the large-star step: finished stars
CLUSTER_BUCKETS = ((2, "2"), (5, "3-5"), (10, "6-10"), (100, "11-100"), (float("inf"), ">100"))


class SignDocuments(beam.PTransform):
    """Documents -> packed Signed records (the job reads them from the prepared parts; for tests and benches)."""

    def __init__(self, config: DedupConfig, part: str = "-"):
        super().__init__()
        self._config, self._part = config, part

    def expand(self, documents):
        config, part, signer = self._config, self._part, Signer(self._config)
        # Documents made in a test or bench have no place in a part: a 64-bit hash of the id numbers them.
        return documents | "Sign" >> beam.Map(lambda d: signed(d, part, hash64(d.id), signer(d), config).pack())


def _resolve(stage: str, reason: DropReason, members: Iterable[tuple[Signed, bytes]], winner_id: str):
    """Keep the winner (once, even if an id repeats), standing for the copies of every member (its cluster
    size, `Signed.copies`); the others become decisions naming the winner."""
    members = list(members)
    copies = sum(s.copies for s, _ in members)
    kept = False
    for s, packed in members:
        count(entered(stage))
        if s.id == winner_id and not kept:
            kept = True
            count_kept_signed(stage, s)
            yield packed if copies == s.copies else s._replace(copies=copies).pack()
        else:
            count(dropped(stage, reason))
            yield beam.pvalue.TaggedOutput(LEDGER, Decision(s.id, s.part, stage, reason, f"kept {winner_id}",
                                                            winner_id))


def _by_group_of_text(packed: bytes) -> tuple[int, bytes]:
    s = Signed.unpack(packed)
    return group_of(s.exact_key if s.exact_key is not None else s.id), s.slim()


def _resolve_texts(group):
    """A group of documents -> per exact key, the best survives (best quality, then longest, then smallest
    id); a document whose text could not be hashed in phase 1 (counted there) is unique."""
    by_text: dict[str, list[tuple[Signed, bytes]]] = {}
    for packed in records_in(group[1]):
        s = Signed.unpack(packed)
        if s.exact_key is None:
            count(entered(EXACT))
            count_kept_signed(EXACT, s)
            yield packed
        else:
            by_text.setdefault(s.exact_key, []).append((s, packed))
    for members in by_text.values():
        winner = min(s.rank for s, _ in members)[-1]
        yield from _resolve(EXACT, DropReason.EXACT_DUPLICATE, members, winner)


class ExactDedup(beam.PTransform):
    """packed Signed -> (slim packed survivors, Decisions): one document per normalized-text hash survives.
    Near dedup takes its band digests from the records before this step (NearDedup)."""

    def expand(self, signed_docs):
        results = (signed_docs
                   | "GroupOfText" >> beam.ParDo(GroupedRecords(_by_group_of_text))
                   | "ByGroup" >> beam.GroupByKey()
                   | "Resolve" >> beam.FlatMap(_resolve_texts).with_outputs(LEDGER, main=DOCUMENTS))
        return results[DOCUMENTS], results[LEDGER]


class _BandRecords(beam.DoFn):
    """packed Signed -> its node number (8 bytes) and band digests, the record the LSH passes read; with
    verification also (number, shingle hashes) (SHINGLES). Counts the documents that cannot be banded."""

    def __init__(self, verify: bool):
        self._verify = verify

    def process(self, packed: bytes):
        s = Signed.unpack(packed)
        if s.bands is None:
            raise ValueError("near dedup needs records with their band digests: give it those that entered "
                             "exact dedup as 'signed' (exact dedup passes on slim records)")
        if s.exact_key is None:  # the text could not be shingled in phase 1
            count(note(NEAR, "shingling_failed"))
            return
        if not s.bands:
            count(note(NEAR, "no_shingles"))
            return
        yield s.number.to_bytes(NUMBER_BYTES, "big") + s.bands
        if self._verify:
            yield beam.pvalue.TaggedOutput(SHINGLES, (s.number, s.shingles or frozenset()))


NUMBER_BYTES = 8


class _BandEntries(GroupedEntries):
    """band record -> (bucket group, entries) for the bands of one pass: a bucket is (band, digest); each
    member is an entry of digest + node number (20 bytes)."""

    def __init__(self, bands: range):
        self._bands = bands

    def process(self, record: bytes, *_pass_before):
        number = record[:NUMBER_BYTES]
        for i in self._bands:
            digest = record[NUMBER_BYTES + i * BAND_DIGEST_BYTES:NUMBER_BYTES + (i + 1) * BAND_DIGEST_BYTES]
            yield from self.add(bucket_group(i, digest), digest + number)


ENTRY_BYTES = BAND_DIGEST_BYTES + NUMBER_BYTES


def _bucket_stars(group) -> Iterable[tuple[int, int]]:
    """A group of buckets -> a star per bucket with 2 or more members: every member links to the
    bucket's smallest node (not all pairs)."""
    buckets: dict[bytes, set[int]] = {}
    for entries in group[1]:
        for at in range(0, len(entries), ENTRY_BYTES):
            buckets.setdefault(entries[at:at + BAND_DIGEST_BYTES], set()).add(
                int.from_bytes(entries[at + BAND_DIGEST_BYTES:at + ENTRY_BYTES], "big"))
    for members in buckets.values():
        if len(members) < 2:
            continue
        centre = min(members)
        count(note(NEAR, "candidate_buckets"))
        for member in members:
            if member != centre:
                yield member, centre


SHINGLES = "shingles"


def _entering(edge: tuple[str, str], round_name: str) -> list[tuple[str, str]]:
    count(cc_round(NEAR, round_name, "edges"))  # edges still in the loop: what this round shuffles (twice)
    return both_directions(edge)


def _large_star(node_values, round_name: str):
    """One large-star step; its edges leave as both (node, neighbour) pairs, what the small-star grouping takes."""
    edges, settled, changed = large_star_settling(*node_values)
    if changed:
        count(cc_round(NEAR, round_name, "large"))
    if settled:
        count(cc_round(NEAR, round_name, "settled"), len(settled))
    for edge in edges:
        yield from both_directions(edge)
    for pair in settled:
        yield beam.pvalue.TaggedOutput(SETTLED, pair)


def _small_star(node_neighbours, round_name: str, next_round: str | None):
    """One small-star step. Its edges enter the next round as both pairs, with the leaf notes, which are pairs
    too: one grouping takes them all. After the last round (`next_round` None) the edges themselves leave."""
    edges, notes, changed = small_star_noting(*node_neighbours)
    if changed:
        count(cc_round(NEAR, round_name, "small"))
    if next_round is None:
        yield from edges
        return
    for edge in edges:
        count(cc_round(NEAR, next_round, "edges"))
        yield from both_directions(edge)
    yield from notes


def _both_ends(edge: tuple[str, str]):
    return [(edge[0], edge[1]), (edge[1], edge[1])]


class ConnectedComponents(beam.PTransform):
    """Edges -> (node, component id = smallest node id), for every node that has an edge.

    Beam graphs have no loops, so `max_rounds` rounds of large-star + small-star are unrolled; each
    counts its changes (`near_dedup.cc.round<i>.large/small`) and the edges it took in
    (`...edges`). A round with no change means convergence; the job checks the last round and fails
    loudly if it still changed something. Components that have become finished stars leave the loop
    (stages/dedup.py, `large_star_settling`): later rounds carry only what can still change, and the
    rounds after convergence take in nothing. A round is two groupings and the two star steps: each step
    emits what the next grouping takes (both directions of its edges, and the leaf notes), so no map or
    flatten sits between them (the graph is built and set up once per run, and those were 90 of its ~590
    transforms).
    """

    def __init__(self, max_rounds: int):
        super().__init__()
        self._max_rounds = max_rounds

    def expand(self, edges):
        pairs = edges | "Enter" >> beam.FlatMap(_entering, "round0")
        settled = []
        for i in range(self._max_rounds):
            name, next_name = f"round{i}", (f"round{i + 1}" if i + 1 < self._max_rounds else None)
            large = (pairs
                     | f"LargeGroup{i}" >> beam.GroupByKey()
                     | f"LargeStar{i}" >> beam.FlatMap(_large_star, name).with_outputs(SETTLED, main="pairs"))
            settled.append(large[SETTLED])
            pairs = (large["pairs"]
                     | f"SmallGroup{i}" >> beam.GroupByKey()
                     | f"SmallStar{i}" >> beam.FlatMap(_small_star, name, next_name))
        return ((pairs | "BothEnds" >> beam.FlatMap(_both_ends), *settled)  # after the last round: edges
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
            count(note(NEAR, "links_rejected_by_verification"))


def _nothing(_element) -> bool:
    return False


def _complete(pcoll, label: str):
    """A side input that holds nothing and is ready once `pcoll` is complete: a step given it starts after `pcoll`
    is done (runners complete side inputs first). A count (Count.Globally) did the same in 14 transforms."""
    return beam.pvalue.AsList(pcoll | label >> beam.Filter(_nothing))


def _cluster_bucket(size: int) -> str:
    return next(label for limit, label in CLUSTER_BUCKETS if size <= limit)


class NearDedup(beam.PTransform):
    """{"kept": packed records reaching near dedup, "signed": every packed Signed that entered dedup} (or one
    PCollection of packed Signed, both at once) -> (packed survivors, Decisions): per connected component of
    LSH candidates (exact-Jaccard verified with `verify`), the best document survives.

    The graph is built from every record that entered dedup, exact dedup's losers too: a loser has its
    survivor's normalized text, so (same words, same shingles) its survivor is in every bucket it is in, and
    the components that reaching documents form are the same. So exact dedup groups slim records and the
    band digests are read once. The exception: a copy whose words differ from its survivor's although the
    exact keys agree (exact dedup casefolds, shingling lowercases: "STRASSE" vs "straße"; or language ID
    split the two differently) can link its survivor to a document that is a near duplicate of the copy
    only, and that document is then removed as a near duplicate of the survivor.

    The band digests are bucketed `bands_per_shuffle` bands per pass, one pass after the other (each waits
    for the one before through a side input), so that a local run holds one pass's entries at a time; the
    first pass waits for the documents reaching near dedup, the placement for the last pass."""

    def __init__(self, config: DedupConfig):
        super().__init__()
        self._config = config

    def expand(self, docs):
        c = self._config
        kept, signed = (docs["kept"], docs["signed"]) if isinstance(docs, dict) else (docs, docs)
        records = signed | "BandRecords" >> beam.ParDo(_BandRecords(c.verify)).with_outputs(SHINGLES, main="records")
        done = _complete(kept, "Reaching")
        stars = []
        bands, _ = c.band_rows()
        for i, first in enumerate(range(0, bands, c.bands_per_shuffle)):
            pass_bands = range(first, min(first + c.bands_per_shuffle, bands))
            stars.append(records["records"]
                         | f"BandKeys{i}" >> beam.ParDo(_BandEntries(pass_bands), done)
                         | f"GroupBuckets{i}" >> beam.GroupByKey()
                         | f"BucketStars{i}" >> beam.FlatMap(_bucket_stars))
            done = _complete(stars[-1], f"Pass{i}Done")
        edges = tuple(stars) | "AllStars" >> beam.Flatten() | "DistinctEdges" >> beam.Distinct()
        if c.verify:
            shingle_sets = records[SHINGLES]
            edges = (({"edge": edges, "sh": shingle_sets} | "JoinA" >> beam.CoGroupByKey())
                     | "CarryA" >> beam.FlatMap(_carry_shingles))
            edges = (({"edge": edges, "sh": shingle_sets} | "JoinB" >> beam.CoGroupByKey())
                     | "Verify" >> beam.FlatMap(_verify, c.verify_threshold))
        component = edges | "Components" >> ConnectedComponents(c.max_rounds)  # (node, component)

        by_number = kept | "GroupOfNumber" >> beam.ParDo(GroupedRecords(_by_group_of_number), done)
        placed = (({"doc": by_number,
                    "component": component | "ComponentGroup" >> beam.Map(lambda kv: (group_of_number(kv[0]), kv))}
                   | "Place" >> beam.CoGroupByKey())
                  | "ToComponent" >> beam.FlatMap(_place).with_outputs("singletons", main="clustered"))
        _ = (placed["clustered"]
             | "ComponentOnly" >> beam.Map(_one_member)
             | "ClusterSize" >> beam.CombinePerKey(sum)
             | "CountSizes" >> beam.Map(_count_cluster_size))
        winners = (placed["clustered"]
                   | "RankInComponent" >> beam.Map(lambda kv: (kv[0], Signed.unpack(kv[1]).rank))
                   | "BestInComponent" >> beam.CombinePerKey(min))
        results = ({"docs": placed["clustered"], "winner": winners}
                   | "JoinWinner" >> beam.CoGroupByKey()
                   | "Resolve" >> beam.FlatMap(_resolve_component).with_outputs(LEDGER, main=DOCUMENTS))
        kept = (results[DOCUMENTS], placed["singletons"]) | "AllKept" >> beam.Flatten()
        return kept, results[LEDGER]


def _carry_shingles(kv):
    """(a, {"edge": [b, ...], "sh": [shingles of a]}) -> (b, (a, shingles of a)) for each edge a-b."""
    a, joined = kv
    return [(b, (a, joined["sh"][0])) for b in joined["edge"]] if joined["sh"] else []


def _one_member(kv):
    return kv[0], 1  # (component, packed) -> (component, 1)


def _count_cluster_size(kv) -> None:
    if kv[1] > 1:  # a component whose other members were exact copies: no near duplicate
        count(note(NEAR, f"cluster_size.{_cluster_bucket(kv[1])}"))


def _resolve_component(kv):
    """(component, {"docs": [packed], "winner": [rank]}): the best copy goes on, the others to the ledger."""
    members = [(Signed.unpack(packed), packed) for packed in kv[1]["docs"]]
    return _resolve(NEAR, DropReason.NEAR_DUPLICATE, members, kv[1]["winner"][0][-1])


def _by_group_of_number(packed: bytes) -> tuple[int, bytes]:
    """(group, the slim record): what places and ranks a document."""
    s = Signed.unpack(packed)
    return group_of_number(s.number), s.slim()


def _place(kv):
    """(group, {"doc": [records], "component": [(node, component)]}) -> (component, packed), or the packed
    document alone (counted kept) if it has no near duplicate."""
    _, joined = kv
    components = dict(joined["component"])
    for packed in records_in(joined["doc"]):
        s = Signed.unpack(packed)
        component = components.get(s.number)
        if component is not None:
            yield component, packed
        else:
            count(entered(NEAR))
            count_kept_signed(NEAR, s)
            yield beam.pvalue.TaggedOutput("singletons", packed)


def rounds_to_converge(counters: dict[str, int], max_rounds: int) -> tuple[int, bool]:
    """(rounds that changed something + the confirming round, converged?) from the job's counters."""
    changed = [i for i in range(max_rounds)
               if counters.get(cc_round(NEAR, f"round{i}", "large"), 0) or counters.get(cc_round(NEAR, f"round{i}", "small"), 0)]
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
        carried = [counters.get(cc_round(NEAR, f"round{i}", "edges"), 0) for i in range(config.max_rounds)]
        while carried and not carried[-1]:
            carried.pop()  # settled components left the loop: the later rounds carried nothing
        report.update({
            "rounds": rounds, "max_rounds": config.max_rounds, "converged": converged, "edges_per_round": carried,
            "cluster_sizes": {label: counters.get(prefix + label, 0) for _, label in CLUSTER_BUCKETS},
        })
    return report


class _Dedup(GlobalStage):
    deduplicates = True

    def _entering(self, flow):
        if flow.entering is None:  # the first dedup stage: what near dedup bands
            flow.entering = flow.signed
        return flow.entering

    @classmethod
    def report(cls, config, counters, report):
        return {"dedup": dedup_report(config.dedup, counters or {})}


class Exact(_Dedup):
    def decide(self, flow):
        self._entering(flow)
        flow.signed, decided = flow.signed | f"Stage_{self.name}" >> ExactDedup()
        return decided


class Near(_Dedup):
    def decide(self, flow):
        entering = self._entering(flow)
        flow.signed, decided = ({"kept": flow.signed, "signed": entering}
                                | f"Stage_{self.name}" >> NearDedup(self.config.dedup))
        return decided

    @classmethod
    def problems(cls, config, report):
        if report.get("dedup", {}).get("converged") is False:
            return [f"near-duplicate clustering did not converge in {config.dedup.max_rounds} rounds: "
                    "raise dedup.max_rounds"]
        return []
