"""Connected-component rounds of the near-dedup, before and after settled components leave the loop:
edges taken in per round, elements and bytes shuffled, at 10k / 100k / 1M documents.

    .venv/bin/python bench/cc_rounds.py [10000 100000 1000000] [--beam-check 10000]

The LSH candidate graph is synthesized (MinHash of 1M documents alone would take longer than the
rounds): 10 % of the documents are near copies (3 of 60 words changed, Jaccard ~0.9) of an earlier
document, copies of copies included, as in bench/dedup_scale.py. Per LSH band (14 bands x 8 rows) a
copy keeps its source's band value with probability 0.9**8 (all 8 minhashes survive the edit), else gets
a fresh one; the members sharing a band value form a bucket, linked to its smallest id (pipeline.job.globals.dedup's
bucket stars). Ids are 16 hex digits of a hash, as unordered as real document ids.

Rounds run on one machine by stages.dedup.components_in_memory, the same steps as the Beam transform;
bytes are each grouped (key, value) encoded by Beam's default coder, what a runner shuffles.
--beam-check N runs the Beam transform (FnApiRunner) on the N-document graph and checks that its
per-round edge counters equal the in-memory figures.
"""
from __future__ import annotations

import argparse
import hashlib
import random
import time
from collections import defaultdict

BANDS, ROWS, COPY_SHARE = 14, 8, 0.10
KEEP_BAND = 0.9 ** ROWS
MAX_ROUNDS = 30  # the default dedup.max_rounds


def doc_id(i: int) -> str:
    return hashlib.blake2b(str(i).encode(), digest_size=8).hexdigest()


def candidate_edges(n: int, copy_share: float = COPY_SHARE, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    source: dict[int, int] = {}  # copy -> the document it was copied from
    for i in range(1, n):
        if rng.random() < copy_share:
            source[i] = rng.randrange(i)
    band_value: dict[tuple[int, int], int] = {}
    buckets: dict[tuple[int, int], list[int]] = defaultdict(list)
    fresh = n
    for i in sorted(source):  # sources come before their copies
        for b in range(BANDS):
            parent = band_value.get((source[i], b), ("own", source[i]))
            band_value[(source[i], b)] = parent
            if rng.random() < KEEP_BAND:
                value = parent
            else:
                fresh += 1
                value = ("own", fresh)
            band_value[(i, b)] = value
    for (i, b), value in band_value.items():
        buckets[(b, value)].append(i)
    edges = set()
    for members in buckets.values():
        if len(members) > 1:
            ids = [doc_id(m) for m in members]
            centre = min(ids)
            edges.update((m, centre) for m in ids if m != centre)
    return sorted(edges)


def encoded_size():
    from typing import Any

    from apache_beam.coders import registry

    coder = registry.get_coder(Any)
    return lambda key, value: len(coder.encode((key, value)))


def measure(edges, shrink: bool) -> dict:
    from stages.dedup import components_in_memory

    started = time.perf_counter()
    components, rounds = components_in_memory(edges, MAX_ROUNDS, shrink=shrink, size=encoded_size())
    return {"components": components, "rounds": rounds, "seconds": time.perf_counter() - started}


def beam_check(edges, expected_rounds) -> None:
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipeline.counters import NAMESPACE
    from pipeline.job.globals.dedup import ConnectedComponents

    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        _ = p | beam.Create(edges) | ConnectedComponents(MAX_ROUNDS)
    counters = {c.key.metric.name: c.committed for c in
                p.result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]}
    carried = [counters.get(f"near_dedup.cc.round{i}.edges", 0) for i in range(MAX_ROUNDS)]
    expected = [r["edges"] for r in expected_rounds]
    print(f"Beam check: per-round edges from the Beam counters {'equal' if carried == expected else 'DIFFER FROM'} "
          f"the in-memory figures ({carried[:6]} ...)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sizes", nargs="*", type=int, default=[10_000, 100_000, 1_000_000])
    p.add_argument("--beam-check", type=int, default=0, metavar="N")
    p.add_argument("--copy-share", type=float, default=COPY_SHARE, help="share of documents that are near copies")
    args = p.parse_args()
    summary = []
    for n in args.sizes:
        edges = candidate_edges(n, args.copy_share)
        before, after = measure(edges, shrink=False), measure(edges, shrink=True)
        assert before["components"] == after["components"], "the two versions disagree"
        changed = [i for i, r in enumerate(before["rounds"]) if r["changed"]]
        converged = (max(changed) + 1) if changed else 0
        shown = min(MAX_ROUNDS, converged + 3)
        print(f"\n{n:,} documents ({args.copy_share:.0%} near copies): {len(edges):,} candidate edges, {len(after['components']):,} nodes in "
              f"{len(set(after['components'].values())):,} components; converged after {converged} rounds")
        print("| round | edges in, before | edges in, after | MB shuffled, before | MB shuffled, after |")
        print("|---|---|---|---|---|")
        for i in range(shown):
            b, a = before["rounds"][i], after["rounds"][i]
            print(f"| {i} | {b['edges']:,} | {a['edges']:,} | {b['bytes'] / 1e6:.2f} | {a['bytes'] / 1e6:.2f} |")
        rest_b = before["rounds"][shown:]
        rest_a = after["rounds"][shown:]
        print(f"| {shown}-{MAX_ROUNDS - 1} (each) | {rest_b[0]['edges'] if rest_b else 0:,} | "
              f"{max((r['edges'] for r in rest_a), default=0):,} | {rest_b[0]['bytes'] / 1e6 if rest_b else 0:.2f} | "
              f"{max((r['bytes'] for r in rest_a), default=0) / 1e6:.2f} |")
        (sb, bb), (sa, ba) = [tuple(sum(r[k] for r in m["rounds"]) for k in ("shuffled", "bytes"))
                              for m in (before, after)]
        summary.append((n, len(edges), sb, sa, bb, ba))
        if args.beam_check == n:
            beam_check(edges, after["rounds"])
    print("\n| documents | candidate edges | elements shuffled, before | after | MB shuffled, before | after | ratio |")
    print("|---|---|---|---|---|---|---|")
    for n, e, sb, sa, bb, ba in summary:
        print(f"| {n:,} | {e:,} | {sb:,} | {sa:,} | {bb / 1e6:,.1f} | {ba / 1e6:,.1f} | {bb / ba:.1f}x less |")


if __name__ == "__main__":
    main()
