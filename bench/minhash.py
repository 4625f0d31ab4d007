"""MinHash signatures/second on one core: datasketch per-shingle `update` loop (baseline),
datasketch `update_batch`, and this project's MinHasher (update_batch with cached permutations).
Signatures are checked equal. Input: the demo run's shards (real extracted pages).

    .venv/bin/python bench/minhash.py [SHARDS_DIR]   (default out/demo/data)
"""
import sys

import numpy as np
import pyarrow.parquet as pq
from _timing import median_time
from datasketch import MinHash

from stages.dedup import MinHasher, shingles


def main(shards: str) -> None:
    texts = pq.read_table(shards, columns=["text"]).column("text").to_pylist()
    sets = [shingles(t) for t in texts]
    n, per_doc = len(sets), sum(map(len, sets)) / len(sets)

    def loop():
        out = []
        for s in sets:
            m = MinHash(num_perm=112, seed=1)
            for x in s:
                m.update(x)
            out.append(m.hashvalues)
        return out

    def batch():
        out = []
        for s in sets:
            m = MinHash(num_perm=112, seed=1)
            m.update_batch(s)
            out.append(m.hashvalues)
        return out

    hasher = MinHasher(112, 1)
    t_loop, ref = median_time(loop)
    t_batch, b = median_time(batch)
    t_ours, ours = median_time(lambda: [hasher.signature(s) for s in sets])
    t_shingle, _ = median_time(lambda: [shingles(t) for t in texts])
    assert all(np.array_equal(x, y) for x, y in zip(ref, ours)) and all(np.array_equal(x, y) for x, y in zip(ref, b))
    print(f"{n} documents, {per_doc:.0f} shingles each on average; 112 permutations; medians of 3 runs; equal: yes")
    print(f"  datasketch update loop : {n / t_loop:8.0f} signatures/s (1.00)")
    print(f"  datasketch update_batch: {n / t_batch:8.0f} signatures/s ({t_loop / t_batch:.2f}x)")
    print(f"  MinHasher              : {n / t_ours:8.0f} signatures/s ({t_loop / t_ours:.2f}x)")
    print(f"  shingling (5-grams)    : {n / t_shingle:8.0f} documents/s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/demo/data")
