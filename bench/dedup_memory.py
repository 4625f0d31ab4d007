"""Memory of dedup alone (exact + near, FnApiRunner, one process) per document, on pre-made signature
records: what a local run's phase 2 gathers, without reading or signing texts.

    .venv/bin/python bench/dedup_memory.py 100000

Records: random band digests, 10 % near copies (each band kept with probability 0.7), 5 % exact copies,
written once as pickled packed `Signed` records in files of 50,000 and read back by the job. Prints peak
RSS of a run without dedup and with it, each in a fresh process, and the difference per document.
"""
from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make(n: int, folder: str) -> list[str]:
    from pipeline.job.signed import Signed

    rng, records = random.Random(0), []
    for i in range(n):
        r = rng.random()
        if records and r < 0.15:
            source = Signed.unpack(records[rng.randrange(len(records))])
            bands = [b if r >= 0.10 or rng.random() < 0.7 else rng.randbytes(12) for b in source.band_digests()]
            key = source.exact_key if r >= 0.10 else f"{rng.getrandbits(128):032x}"
        else:
            bands, key = [rng.randbytes(12) for _ in range(14)], f"{rng.getrandbits(128):032x}"
        doc_id = f"{rng.getrandbits(128):032x}"
        records.append(Signed(doc_id, f"p{i // 50_000:03d}", i, key, b"".join(bands), 0.5, 400, 100).pack())
    paths = []
    for start in range(0, n, 50_000):
        paths.append(os.path.join(folder, f"signed-{start:09d}.pkl"))
        with open(paths[-1], "wb") as fh:
            pickle.dump(records[start:start + 50_000], fh)
    return paths


def one(paths: list[str], dedup: bool) -> int:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipeline.job.beam_options import give_freed_buffers_back
    from pipeline.job.globals.dedup import ExactDedup, NearDedup
    from stages.dedup import DedupConfig

    give_freed_buffers_back()  # as `refinery run` does for FnApiRunner

    def load(path):
        with open(path, "rb") as fh:
            yield from pickle.load(fh)

    with beam.Pipeline(options=PipelineOptions(["--runner=FnApiRunner"])) as p:
        signed = p | beam.Create(paths) | beam.Reshuffle() | beam.FlatMap(load)
        if dedup:
            kept, _ = signed | ExactDedup()
            signed, _ = {"kept": kept, "signed": signed} | NearDedup(DedupConfig())
        _ = signed | beam.combiners.Count.Globally()
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM")))


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        print(one(json.loads(sys.argv[2]), sys.argv[3] == "1"))
    else:
        n = int(sys.argv[1])
        with tempfile.TemporaryDirectory(prefix="dedup_memory-") as folder:
            paths = make(n, folder)
            peaks = [int(subprocess.run([sys.executable, __file__, "--one", json.dumps(paths), flag], check=True,
                                        capture_output=True, text=True).stdout.split()[-1]) for flag in ("0", "1")]
        print(json.dumps({"documents": n, "peak_mb_without_dedup": peaks[0] // 1024, "peak_mb_with_dedup": peaks[1] // 1024,
                          "bytes_per_document": round((peaks[1] - peaks[0]) * 1024 / n)}))
