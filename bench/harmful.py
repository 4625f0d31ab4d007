"""Harmful-content stages: URL lookups/s and memory against a plain Python set, and documents/s of the
bad-word and toxicity stages against the quality scorer, all measured in this run.

    .venv/bin/python bench/harmful.py [SHARDS_DIR]   (default out/demo/data, written by `make demo`)

Memory is measured in fresh child processes (peak RSS growth while loading the 4.56 M UT1 adult domains):
a set of str, the HashedSet built from the list, and the HashedSet memory-mapped from its cache (what
every worker after the first on a machine pays; its pages are shared between processes).
"""
import json
import random
import resource
import subprocess
import sys
import time

import pyarrow.parquet as pq
from _timing import median_time

from stages.harmful.badwords import BadWordsFilter
from stages.harmful.hashset import read_lines
from stages.harmful.toxicity import ToxicityScorer
from stages.harmful.url_filter import UT1, UrlFilter, _lists
from stages.quality import QualityScorer

ADULT = f"{UT1}/adult.domains.xz"
CHILD = r"""
import json, resource, sys, time
import numpy, stages.harmful.url_filter, stages.harmful.hashset  # imports are not the set's cost
with open("/proc/self/statm") as fh:
    base = int(fh.read().split()[1]) * 4096 / 2**20
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
kind = sys.argv[1]
if kind == "set":
    from stages.harmful.hashset import read_lines
    s = {line.lower() for line in read_lines(sys.argv[2])}
    n = len(s)
else:
    from stages.harmful.url_filter import _lists
    s = _lists((sys.argv[2],))[0]
    n = len(s)
    int(s.hashes.sum())  # touch every page of a memory map
import gc; gc.collect()
with open("/proc/self/statm") as fh:
    resident = int(fh.read().split()[1]) * 4096 / 2**20
print(json.dumps({"n": n, "seconds": time.perf_counter() - start, "resident_growth_mb": resident - base,
                  "peak_rss_growth_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}))
"""


def child(kind: str, env=None) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, kind, ADULT], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)


def main(shards: str) -> None:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, REFINERY_CACHE=cache)
        as_set = child("set", env)
        built = child("hashed", env)      # empty cache: hashes the list, writes the cache
        mapped = child("hashed", env)     # cache present: memory-mapped
    print("UT1 adult domains: load time, memory held once loaded and peak while loading, per process")
    for name, m in (("Python set of str", as_set), ("HashedSet, built", built), ("HashedSet, cached (mmap)", mapped)):
        print(f"  {name:<26} {m['n']:>9,} keys  {m['seconds']:6.1f} s  held {m['resident_growth_mb']:6.1f} MB "
              f"({m['resident_growth_mb'] / as_set['resident_growth_mb']:.3f}x the set)  "
              f"peak {m['peak_rss_growth_mb']:6.1f} MB")

    domains, _ = _lists((ADULT,))
    listed = [line.lower() for line in read_lines(ADULT)]
    as_set_here = set(listed)
    rng = random.Random(0)
    texts = pq.read_table(shards, columns=["text", "lang", "url"]).to_pylist()
    urls = [r["url"] for r in texts if r["url"]]
    probes = rng.sample(listed, 50_000) + [f"www{i}.unlisted-{rng.random():.8f}.example" for i in range(50_000)]
    rng.shuffle(probes)
    t_set = median_time(lambda: sum(p in as_set_here for p in probes), 5)
    t_hashed = median_time(lambda: sum(p in domains for p in probes), 5)
    assert t_set[1] == t_hashed[1], "the hashed set must answer as the set does"
    print(f"\nlookups of {len(probes):,} hosts (half listed), median of 5: set {len(probes) / t_set[0]:,.0f}/s, "
          f"HashedSet {len(probes) / t_hashed[0]:,.0f}/s ({t_set[0] / t_hashed[0]:.2f}x the set)")
    stage = UrlFilter()
    stage.setup()
    many = (urls * (20_000 // max(len(urls), 1) + 1))[:20_000]
    t_url = median_time(lambda: [stage.verdict(u) for u in many], 3)
    print(f"whole URL filter (parse, public suffix, domain + URL lists, word rules): {len(many) / t_url[0]:,.0f} URLs/s")

    docs = [(r["text"], r["lang"]) for r in texts]
    quality, badwords, toxicity = QualityScorer(), BadWordsFilter(), ToxicityScorer()
    for s in (quality, toxicity):
        s.setup()
    t_q = median_time(lambda: quality.score([t for t, _ in docs]), 3)[0]
    t_b = median_time(lambda: [badwords.evaluate(t, lang) for t, lang in docs], 3)[0]
    t_t = median_time(lambda: [toxicity.score(t) for t, _ in docs], 3)[0]
    n = len(docs)
    print(f"\n{n} documents, median of 3: quality {n / t_q:,.0f} docs/s (1.00), bad_words {n / t_b:,.0f} docs/s "
          f"({t_q / t_b:.2f}x), toxicity {n / t_t:,.0f} docs/s ({t_q / t_t:.2f}x)")
    print(f"(peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
          f"{time.process_time():.0f} s CPU)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/demo/data")
