"""End-to-end dedup (signatures, exact + near, Beam FnApiRunner, one process) on synthetic documents:
wall time and peak memory as the corpus grows (`bench/run_scale.py` measures the whole run).

    .venv/bin/python bench/dedup_scale.py 10000 [100000 ...]

Documents: 60 words drawn from a 50,000-word vocabulary, seeded; 10 % of them are copies of an
earlier document with 3 words replaced (near duplicates), 5 % exact copies. Each size runs in a
fresh subprocess so peak RSS (ru_maxrss) is that size's own.
"""
import json
import random
import resource
import subprocess
import sys
import time


def corpus(n: int, seed: int = 0):
    from stages.record import Document

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    texts = []
    for _ in range(n):
        r = rng.random()
        if texts and r < 0.10:
            words = rng.choice(texts).split()
            for _ in range(3):
                words[rng.randrange(len(words))] = rng.choice(vocab)
            text = " ".join(words)
        elif texts and r < 0.15:
            text = rng.choice(texts)
        else:
            text = " ".join(rng.choice(vocab) for _ in range(60))
        texts.append(text)
    return [Document(id=f"d{i:08d}", url="", source="bench", text=t) for i, t in enumerate(texts)]


def one(n: int, threshold: float | None = None) -> dict:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipeline.job.globals.dedup import ExactDedup, NearDedup, SignDocuments
    from stages.dedup import DedupConfig

    docs = corpus(n)
    config = DedupConfig(threshold=threshold)
    start = time.perf_counter()
    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        signed = p | beam.Create(docs, reshuffle=False) | SignDocuments(config)
        kept, exact_drops = signed | ExactDedup()
        kept, near_drops = {"kept": kept, "signed": signed} | NearDedup(config)
        _ = ((kept | "CountKept" >> beam.combiners.Count.Globally()),
             (near_drops | "CountNear" >> beam.combiners.Count.Globally()))
    wall = time.perf_counter() - start
    return {"documents": n, "threshold": threshold, "seconds": round(wall, 1), "docs_per_second": round(n / wall),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


if __name__ == "__main__":
    # Each size twice, in the same run: FineWeb's 14 x 8 bands, then `--dedup-threshold 0.8` (bands and
    # rows from the parameter search, which once ran per document and made this 20x slower).
    if sys.argv[1] == "--one":
        print(json.dumps(one(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else None)))
    else:
        for size in sys.argv[1:]:
            for threshold in ([], ["0.8"]):
                out = subprocess.run([sys.executable, __file__, "--one", size, *threshold], capture_output=True,
                                     text=True)
                print(out.stdout.strip().splitlines()[-1] if out.returncode == 0 else out.stderr[-2000:])
