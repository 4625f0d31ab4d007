"""The shard stream on real pipeline shards: disjoint readers, seeded epochs, exact packing and
padding, resume at the exact next token (also through DataLoader worker processes), bad data."""
from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from training.data import IGNORE_INDEX, DataConfig, DataError, ShardStream, StreamState
from training.tokenizer import ByteTokenizer, train_bpe

BYTES = ByteTokenizer()


def stream(shards, rank=0, world=1, tokenizer=BYTES, **kw) -> ShardStream:
    cfg = DataConfig(str(shards), seq_len=kw.pop("seq_len", 64), micro_batch=kw.pop("micro_batch", 2), **kw)
    return ShardStream(cfg, tokenizer, rank=rank, world_size=world)


def texts_of(s: ShardStream, reader: int, epoch: int):
    out = []
    for unit in s.reader_units(reader, epoch):
        table = pq.ParquetFile(unit.shard).read_row_group(unit.row_group, columns=["text"])
        out += table.column(0).to_pylist()[unit.start:unit.stop]
    return out


def test_readers_get_disjoint_units_that_cover_the_data_every_epoch(shards):
    s = stream(shards, world=2, num_workers=2)
    assert len(s.units) >= 8  # row groups of 8 rows from the demo shards
    for epoch in range(3):
        seen = [u for reader in range(4) for u in s.reader_units(reader, epoch)]
        assert len(seen) == len(set(seen)) == len(s.units)
    # a new order every epoch, the same order on every rerun
    assert s.reader_units(0, 0) != s.reader_units(0, 1)
    assert s.reader_units(0, 1) == stream(shards, world=2, num_workers=2).reader_units(0, 1)
    assert s.reader_units(0, 0) != stream(shards, world=2, num_workers=2, seed=1).reader_units(0, 0)


def test_packed_windows_are_the_document_stream_with_eos_and_lose_no_token(shards):
    s = stream(shards, seq_len=64)
    expected = np.concatenate([np.array(list(t.encode()) + [BYTES.eos_id]) for t in texts_of(s, 0, 0)])
    batches = list(itertools.islice(iter(s), 30))
    windows = torch.cat([b["input"] for b in batches]).numpy(), torch.cat([b["target"] for b in batches]).numpy()
    for i, (x, y) in enumerate(zip(*windows)):
        assert (x == expected[i * 64:i * 64 + 64]).all()
        assert (y == expected[i * 64 + 1:i * 64 + 65]).all()  # every token is a target exactly once
    assert (windows[1] == BYTES.eos_id).sum() > 0


def test_padded_mode_masks_padding_and_splits_long_documents(shards):
    s = stream(shards, seq_len=256, mode="padded", micro_batch=1)
    texts = texts_of(s, 0, 0)
    samples = [b for b in itertools.islice(iter(s), 40)]
    docs = iter(texts)
    doc = np.array(list(next(docs).encode()) + [BYTES.eos_id])
    start = 0
    for b in samples:
        x, y = b["input"][0].numpy(), b["target"][0].numpy()
        piece = doc[start:start + 257]
        n = len(piece) - 1
        assert (x[:n] == piece[:-1]).all() and (y[:n] == piece[1:]).all()
        assert (y[n:] == IGNORE_INDEX).all() and (x[n + 1:] == BYTES.pad_id).all()
        start += 256
        if start >= len(doc) - 1:
            doc, start = np.array(list(next(docs).encode()) + [BYTES.eos_id]), 0
    assert any((b["target"] == IGNORE_INDEX).any() for b in samples)


@pytest.mark.parametrize("mode,workers", [("packed", 2), ("padded", 0)])
def test_resume_continues_at_the_exact_next_token(shards, mode, workers):
    """Positions saved after 7 batches: a new loader restored from them yields what the first one
    yields next, with real DataLoader worker processes and across an epoch boundary."""
    def loader():
        return StreamState(stream(shards, rank=1, world=2, num_workers=workers, mode=mode, seq_len=512,
                                  micro_batch=4))

    first = loader()
    for _ in range(7):
        next(first)
    saved = json.loads(json.dumps(first.state_dict()))  # survives a round trip through a checkpoint
    reference = [next(first) for _ in range(200)]
    resumed = loader()
    resumed.load_state_dict(saved)
    for want, got in zip(reference, (next(resumed) for _ in range(200))):
        assert torch.equal(want["input"], got["input"]) and torch.equal(want["target"], got["target"])
    assert max(p["epoch"] for p in first.positions.values()) >= 1  # ran past an epoch boundary


def test_resume_with_another_world_size_restarts_the_epoch_and_other_data_is_refused(shards, tmp_path):
    one = StreamState(stream(shards, world=1))
    next(one)
    state = one.state_dict()
    two = StreamState(stream(shards, rank=0, world=2))
    two.load_state_dict(state)
    assert two.positions == {0: {"epoch": 0, "unit": 0, "row": 0, "offset": 0}}
    longer = StreamState(stream(shards, world=1, seq_len=65))
    with pytest.raises(DataError, match="seq_len"):
        longer.load_state_dict(state)


def test_bad_data_gives_clear_errors(shards, tmp_path):
    with pytest.raises(DataError, match="manifest.json"):
        stream(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(shards, copy)
    shards_copied = sorted((copy / "data").glob("*.parquet"))  # every one: whichever the first batch reads
    damaged = []
    for shard in shards_copied:
        raw = bytearray(shard.read_bytes())
        raw[16] ^= 0xFF  # in the first column chunk (a small shard's middle can be its footer)
        shard.write_bytes(bytes(raw))
        damaged.append(raw)
    with pytest.raises(DataError, match="sha256"):
        next(iter(stream(copy)))
    shards_copied[0].write_bytes(bytes(damaged[0][: len(damaged[0]) // 3]))  # truncated: the footer is gone
    with pytest.raises(DataError, match="cannot be read"):
        stream(copy, verify_checksums=False)


def test_too_few_documents_for_the_readers_is_an_error(shards):
    with pytest.raises(DataError, match="readers"):
        stream(shards, world=64, num_workers=4)


def test_trained_bpe_tokenizer_streams_and_round_trips(shards, tmp_path):
    texts = pq.read_table(str(shards / "data"), columns=["text"]).column(0).to_pylist()
    bpe = train_bpe(texts, vocab_size=600, path=str(tmp_path / "tokenizer.json"))
    assert bpe.vocab_size == 600
    sample = texts[0][:500]
    ids = bpe.encode(sample)
    assert bpe.decode(ids) == sample and len(ids) < len(sample.encode()) / 1.5  # merges compress the text
    batch = next(iter(stream(shards, tokenizer=bpe)))
    assert int(batch["input"].max()) < bpe.vocab_size
    assert StreamState(stream(shards, tokenizer=bpe)).stream.fingerprint()["tokenizer"]["kind"] == "bpe"
