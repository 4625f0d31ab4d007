"""Training loader throughput: Parquet shards tokenized while training vs token shards (`refinery tokenize`).

Both go through the same loader (packed windows, one reader, no DataLoader workers), so the difference is
reading + tokenizing vs reading ids. Tokens/s of batches handed to the training loop, median of 3 passes
over the same batches; the BPE is trained on the same text (32k ids, `refinery train-tokenizer`).

    .venv/bin/python bench/loader.py [RUN_OUTPUT] [--batches 200]   (default out/demo; the bench WARC's run
                                                                        gives more text: see RESULTS.md)
"""
import argparse
import os
import tempfile
import time

from training.data import DataConfig, ShardStream, StreamState
from training.tokenizer import ByteTokenizer, train_bpe
from training.tokens import TokenStream, tokenize


def rate(kind, folder: str, cfg: dict, tokenizer, batches: int) -> float:
    times = []
    for _ in range(3):
        loader = StreamState(kind(DataConfig(folder, **cfg), tokenizer))
        started = time.perf_counter()
        tokens = sum(next(loader)["input"].numel() for _ in range(batches))
        times.append(time.perf_counter() - started)
    return tokens / sorted(times)[1]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", nargs="?", default="out/demo")
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--micro-batch", type=int, default=8)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        import pyarrow.parquet as pq

        texts = pq.read_table(os.path.join(a.run, "data"), columns=["text"]).column(0).to_pylist()
        bpe = train_bpe(texts, 32000, os.path.join(tmp, "tokenizer.json"))
        print(f"{a.run}: {len(texts):,} documents; {a.batches} batches of {a.micro_batch} x {a.seq_len} tokens, "
              "median of 3 passes")
        for name, tokenizer, spec in (("bytes", ByteTokenizer(), "bytes"), ("BPE 32k", bpe, bpe.path)):
            folder = os.path.join(tmp, name.split()[0])
            started = time.perf_counter()
            tokenize(a.run, spec, folder)
            once = time.perf_counter() - started
            cfg = dict(seq_len=a.seq_len, micro_batch=a.micro_batch, verify_checksums=False)
            parquet = rate(ShardStream, a.run, cfg, tokenizer, a.batches)
            tokens = rate(TokenStream, folder, cfg, tokenizer, a.batches)
            print(f"  {name:8s} Parquet + tokenize {parquet:>12,.0f} tokens/s | token shards {tokens:>12,.0f} "
                  f"tokens/s ({tokens / parquet:.1f}x) | refinery tokenize once: {once:.1f} s")


if __name__ == "__main__":
    main()
