"""Tokenizers for training: byte-level UTF-8 (default, needs no file) or a trained BPE.

Both expose the same small interface: `encode(text) -> list[int]`, `vocab_size`, `eos_id`, `pad_id`.
The BPE option uses Hugging Face `tokenizers` (a byte-level BPE trained on the shards' text by
`train_bpe`, saved as one `tokenizer.json`); nothing is downloaded.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from common.settings import error_text


class ByteTokenizer:
    """UTF-8 bytes 0..255, then EOS (256) and PAD (257)."""

    kind = "bytes"

    def __init__(self) -> None:
        self.eos_id = 256
        self.pad_id = 257
        self.vocab_size = 258

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [list(t.encode("utf-8")) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def describe(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size}


class BPETokenizer:
    """A byte-level BPE from a `tokenizer.json` that has `<|endoftext|>` and `<|pad|>` special tokens."""

    kind = "bpe"
    EOS = "<|endoftext|>"
    PAD = "<|pad|>"

    def __init__(self, path: str) -> None:
        from tokenizers import Tokenizer

        if not os.path.isfile(path):
            raise FileNotFoundError(f"tokenizer file not found: {path}")
        self.path = path
        self._tok = Tokenizer.from_file(path)
        eos, pad = self._tok.token_to_id(self.EOS), self._tok.token_to_id(self.PAD)
        if eos is None or pad is None:
            raise ValueError(f"{path}: tokenizer lacks the special tokens {self.EOS!r} and {self.PAD!r}")
        self.eos_id, self.pad_id = eos, pad
        self.vocab_size = self._tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode([int(i) for i in ids])

    def describe(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size, "path": os.path.abspath(self.path)}


def train_bpe(texts: Iterable[str], vocab_size: int, path: str) -> BPETokenizer:
    """Train a byte-level BPE (GPT-2 style pre-tokenization) and save it to `path`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BPETokenizer.EOS, BPETokenizer.PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.save(path)
    return BPETokenizer(path)


def load_tokenizer(spec: str):
    """`bytes` or the path of a `tokenizer.json`."""
    return ByteTokenizer() if spec in ("", "bytes") else BPETokenizer(spec)


def parser():
    import argparse

    p = argparse.ArgumentParser(prog="refinery train-tokenizer", description="A byte-level BPE (GPT-2's "
                                "pre-tokenization, Hugging Face tokenizers) trained on the text of a run's shards, for "
                                "`refinery train --tokenizer FILE` and `refinery tokenize --tokenizer FILE`.")
    p.add_argument("--data", required=True, help="output directory of `refinery run` (has manifest.json)")
    p.add_argument("--out", required=True, help="where to write tokenizer.json")
    p.add_argument("--vocab-size", type=int, default=32000,
                   help="tokens wanted, the 256 bytes and EOS/PAD included; a small text can run out of pairs to "
                        "merge before it (the command says so) (default: %(default)s)")
    p.add_argument("--text-field", default="text", help="the shards' column to learn from (default: %(default)s)")
    p.add_argument("--max-documents", type=int, default=None,
                   help="learn from the first N documents of the shards, in manifest order (default: all)")
    return p


def main(argv) -> int:
    """`refinery train-tokenizer --data OUT --vocab-size N --out tokenizer.json`: a byte-level BPE
    trained on the text of a pipeline output's shards (all rows, or the first --max-documents)."""
    import itertools

    import pyarrow.parquet as pq

    from training.data import DataError, read_manifest

    a = parser().parse_args(argv)
    folder = os.path.dirname(os.path.abspath(a.out))
    try:
        manifest = read_manifest(a.data)
        if not os.path.isdir(folder):  # checked before training, not found out after it
            raise DataError(f"--out {a.out}: folder {folder} does not exist")
        if a.vocab_size < 260:
            raise DataError(f"--vocab-size must be at least 260 (256 bytes and the special tokens), not {a.vocab_size}")
        names = pq.read_schema(os.path.join(a.data, manifest["shards"][0]["path"])).names
        if a.text_field not in names:
            raise DataError(f"--text-field {a.text_field!r}: the shards have no such column ({', '.join(names)})")
    except (DataError, OSError) as exc:
        print(f"refinery train-tokenizer: error: {error_text(exc)}", file=sys.stderr)
        return 2

    seen = {"documents": 0, "chars": 0}

    def texts():
        for shard in manifest["shards"]:
            for batch in pq.ParquetFile(os.path.join(a.data, shard["path"])).iter_batches(columns=[a.text_field]):
                for text in batch.column(0).to_pylist():
                    seen["documents"] += 1
                    seen["chars"] += len(text or "")
                    yield text

    tok = train_bpe(itertools.islice(texts(), a.max_documents), a.vocab_size, a.out)
    print(f"wrote {a.out}: byte-level BPE, {tok.vocab_size:,} tokens (EOS {tok.eos_id}, PAD {tok.pad_id}); "
          f"train with --tokenizer {a.out}")
    if tok.vocab_size < a.vocab_size:
        print(f"refinery train-tokenizer: note: {tok.vocab_size:,} tokens, not the {a.vocab_size:,} asked for: the "
              f"training text ({seen['documents']:,} documents, {seen['chars']:,} characters) ran out of token pairs "
              "to merge (BPE adds a token only for a pair that occurs in it); more text gives more", file=sys.stderr)
    return 0
