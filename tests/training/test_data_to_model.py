"""From data to model: the valid split, validation loss, the anneal phase, token shards, sampling and
ablations, on the pipeline's real shards (the `shards` fixture: 10 % held out, an anneal split)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F

from pipeline.job.holdout import held_out
from tests.conftest import REPO, WARC_DIR
from tests.training.conftest import SPLITS, TINY, losses_by_step, metrics, ok, train
from training import checkpoint
from training.data import DataConfig, DataError, ShardStream, StreamState
from training.evaluate import evaluate, load_eval_set
from training.model import GPT, ModelConfig
from training.step import lr_at
from training.tokenizer import ByteTokenizer, train_bpe
from training.tokens import TokenStream, documents, read_token_manifest, token_tokenizer, tokenize

BYTES = ByteTokenizer()


def ids(folder) -> list[str]:
    return pq.read_table(str(folder / "data"), columns=["id"]).column(0).to_pylist()


def texts(folder) -> list[str]:
    manifest = json.load(open(folder / "manifest.json"))
    out = []
    for shard in manifest["shards"]:
        out += pq.read_table(str(folder / shard["path"]), columns=["text"]).column(0).to_pylist()
    return out


def test_valid_split_is_disjoint_from_training_and_the_same_on_a_rerun(shards, tmp_path):
    train_ids, valid_ids, anneal_ids = ids(shards), ids(shards / "valid"), ids(shards / "anneal")
    assert len(valid_ids) >= 5 and not set(valid_ids) & set(train_ids)
    assert set(anneal_ids) <= set(train_ids)  # the anneal split is drawn from training documents only
    report = json.load(open(shards / "report.json"))
    c = report["conservation"]
    assert c["holds"] and c["held_out"] == len(valid_ids) == report["valid"]["counted"]
    assert c["read"] == c["kept"] + c["held_out"] + c["ledger"]
    assert json.load(open(shards / "valid" / "manifest.json"))["rows"] == len(valid_ids)
    assert all(held_out(i, 0.1) for i in valid_ids) and not any(held_out(i, 0.1) for i in train_ids)
    shown = ok(refinery("inspect", str(shards), "--id", valid_ids[0]))
    assert "held out for validation (valid/)" in shown.stdout
    assert f"{len(valid_ids)} held out for validation" in ok(refinery("inspect", str(shards))).stdout
    # another seed and row-group size: the same documents held out (the choice depends on the id alone),
    # and a smaller fraction holds out a subset of them
    from pipeline.job.run import run

    again = tmp_path / "again"
    run(["--input", str(WARC_DIR / "*.warc.gz"), "--output", str(again), "--quiet", "--seed", "3",
         "--row-group-rows", "32", *SPLITS])
    assert sorted(ids(again / "valid")) == sorted(valid_ids)
    assert {i for i in valid_ids + train_ids if held_out(i, 0.02)} <= set(valid_ids)


def hand_loss(model: GPT, text_list: list[str], seq_len: int, max_tokens: int) -> tuple[float, int]:
    """Cross-entropy written out: every token of the EOS-joined documents after the first predicted once."""
    stream = []
    for text in text_list:
        stream += list(text.encode("utf-8")) + [BYTES.eos_id]
    stream = stream[:max_tokens + 1]
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(stream) - 1, seq_len):
            x = torch.tensor(stream[start:start + seq_len])
            y = torch.tensor(stream[start + 1:start + seq_len + 1])
            logp = F.log_softmax(model(x[None])[0, :len(y)].double(), dim=-1)
            total -= float(logp[torch.arange(len(y)), y].sum())
            count += len(y)
    return total / count, count


def test_validation_loss_equals_a_hand_computation(shards):
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=BYTES.vocab_size, seq_len=32, n_layer=2, n_head=2, n_embd=32)).eval()
    data = load_eval_set("valid", str(shards / "valid"), BYTES, seq_len=32, max_tokens=1000)
    expected, count = hand_loss(model, texts(shards / "valid"), 32, 1000)
    whole = evaluate(model, data, micro_batch=3, rank=0, world_size=1, precision="fp32",
                     device=torch.device("cpu"), pad_id=BYTES.pad_id)
    assert whole["tokens"] == count == 1000
    assert math.isclose(whole["loss"], expected, rel_tol=1e-6), (whole, expected)
    # two ranks (without a process group, each returns its own part): the parts cover every window once
    parts = [evaluate(model, data, 3, r, 2, "fp32", torch.device("cpu"), BYTES.pad_id) for r in (0, 1)]
    assert sum(p["tokens"] for p in parts) == count
    assert math.isclose(sum(p["loss"] * p["tokens"] for p in parts) / count, expected, rel_tol=1e-6)


def test_wsd_schedule_is_stable_then_decays_over_the_last_steps():
    lrs = [lr_at(s, 1.0, warmup=2, total=20, min_ratio=0.1, schedule="wsd", decay_steps=5) for s in range(20)]
    assert lrs[:2] == [0.5, 1.0] and set(lrs[2:15]) == {1.0}
    assert all(a > b for a, b in zip(lrs[14:], lrs[15:])) and math.isclose(lrs[19], 0.1)


def test_anneal_phase_switches_at_its_step_and_resume_across_it_is_bit_exact(shards, tmp_path):
    args = ["--data", str(shards), *TINY, "--steps", "12", "--checkpoint-every", "5", "--anneal-data",
            str(shards / "anneal"), "--anneal-fraction", "0.25", "--schedule", "wsd", "--eval-every", "6", "--warmup", "2",
            "--dropout", "0.1"]
    whole = tmp_path / "whole"
    proc = ok(train([*args, "--out", str(whole)], nproc=2))
    assert "anneal phase: steps 10-12" in proc.stdout
    steps = losses_by_step(whole)
    assert [steps[s]["phase"] for s in range(1, 13)] == ["main"] * 9 + ["anneal"] * 3
    assert steps[9]["lr"] == pytest.approx(1e-3) and steps[12]["lr"] == pytest.approx(1e-4)
    state = checkpoint.load(str(whole / "checkpoints"))
    for rank_state in state["data"]:  # both streams' positions are saved; the anneal one has moved
        assert rank_state["anneal"]["positions"] and rank_state["positions"]
    summary = json.load(open(whole / "summary.json"))
    assert summary["phases"] == {"main": 9, "anneal": 3}
    assert [e["step"] for e in summary["eval_history"]] == [6, 12]
    from training.curves import summary as curve_summary

    drawn = curve_summary(str(whole / "metrics.jsonl"))["validation"]["valid"]  # what curves.png marks
    assert drawn == [[e["step"], e["eval"]["valid"]["loss"]] for e in summary["eval_history"]]
    assert (whole / "curves.png").stat().st_size > 10000

    # the 2-rank validation loss is the token-weighted mean a single process computes on the final weights
    model = GPT(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    data = load_eval_set("valid", str(shards / "valid"), BYTES, 128, 65536)
    alone = evaluate(model, data, 4, 0, 1, "fp32", torch.device("cpu"), BYTES.pad_id)
    assert summary["eval"]["valid"]["tokens"] == alone["tokens"]
    assert math.isclose(summary["eval"]["valid"]["loss"], alone["loss"], rel_tol=1e-5)

    # a crash before the switch (at 7: checkpoint 5, the resume runs through the switch), then one inside the anneal
    # phase (the resumed run crashes at 11: checkpoint 10), then the resume to the end
    broken = tmp_path / "broken"
    ok(train([*args, "--out", str(broken), "--stop-after", "7"], nproc=2))
    ok(train([*args, "--out", str(broken), "--resume", "--stop-after", "11"], nproc=2))
    assert [r["step"] for r in metrics(broken) if r.get("event") == "resumed"] == [5]
    assert json.load(open(broken / "checkpoints" / "latest.json"))["step"] == 10
    ok(train([*args, "--out", str(broken), "--resume"], nproc=2))
    assert [r["step"] for r in metrics(broken) if r.get("event") == "resumed"] == [5, 10]
    resumed = losses_by_step(broken)
    for step in range(1, 13):
        assert resumed[step]["loss"] == steps[step]["loss"], step
        assert resumed[step]["phase"] == steps[step]["phase"]
    evals = {r["step"]: r["eval"] for r in metrics(broken) if "eval" in r}
    assert evals[12] == summary["eval_history"][-1]["eval"]


def test_anneal_resume_refuses_another_phase_length(shards, tmp_path):
    args = ["--data", str(shards), "--out", str(tmp_path), *TINY, "--steps", "6", "--checkpoint-every", "3",
            "--anneal-data", str(shards / "anneal"), "--eval-every", "0"]
    ok(train([*args, "--anneal-fraction", "0.5", "--stop-after", "3"]))
    proc = train([*args, "--anneal-fraction", "0.2", "--resume"])
    assert proc.returncode == 2 and "switched to the anneal data after step 3" in proc.stderr


@pytest.mark.parametrize("kind", ["bytes", "bpe"])
def test_token_shards_round_trip_and_stream_like_the_parquet_shards(shards, tmp_path, kind):
    spec = "bytes"
    if kind == "bpe":
        spec = str(tmp_path / "tokenizer.json")
        train_bpe(texts(shards), 400, spec)
    tok_dir = tmp_path / "tok"
    manifest = tokenize(str(shards), spec, str(tok_dir))
    tokenizer = token_tokenizer(str(tok_dir))
    assert manifest["dtype"] == "uint16" and set(manifest["splits"]) == {"valid", "anneal"}
    for split in ("", "valid", "anneal"):
        folder = tok_dir / split if split else tok_dir
        m = read_token_manifest(str(folder))
        decoded = []
        for shard in m["shards"]:
            tokens = np.fromfile(folder / shard["path"], dtype="<u2")
            starts = np.fromfile(folder / shard["index"], dtype="<u8")
            assert len(tokens) == shard["tokens"] == starts[-1] and len(starts) == shard["documents"] + 1
            decoded += [tokenizer.decode(tokens[a:b].tolist()) for a, b in zip(starts[:-1], starts[1:])]
        assert decoded == texts(shards / split if split else shards)  # decode equals the text, in order

    def streams(world=2, rank=1, workers=0):
        cfg = dict(seq_len=64, micro_batch=2, num_workers=workers)
        return (StreamState(ShardStream(DataConfig(str(shards), **cfg), tokenizer, rank, world)),
                StreamState(TokenStream(DataConfig(str(tok_dir), **cfg), tokenizer, rank, world)))

    from_parquet, from_tokens = streams()
    for _ in range(40):  # the same batches, in the same order, as from the Parquet shards
        a, b = next(from_parquet), next(from_tokens)
        assert torch.equal(a["input"], b["input"]) and a["position"] == b["position"]
    saved = from_tokens.state_dict()
    expected = [next(from_tokens)["input"] for _ in range(5)]
    resumed = streams()[1]
    resumed.load_state_dict(saved)
    assert all(torch.equal(next(resumed)["input"], e) for e in expected)  # resumes at the exact next token


def test_damaged_token_shards_are_clear_errors(shards, tmp_path):
    tok_dir = tmp_path / "tok"
    tokenize(str(shards), "bytes", str(tok_dir))
    for shard in read_token_manifest(str(tok_dir))["shards"]:  # whichever the first batch reads
        with open(tok_dir / shard["path"], "r+b") as fh:
            fh.write(b"\x00\x01")
    with pytest.raises(DataError, match="does not match the sha256"):
        next(StreamState(TokenStream(DataConfig(str(tok_dir), 64, 2), BYTES)))
    proc = train(["--tokens", str(tmp_path / "nothing"), "--out", str(tmp_path / "run"), *TINY])
    assert proc.returncode == 2 and "point --tokens at the output folder of `refinery tokenize`" in proc.stderr


def refinery(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1"))


def test_training_on_token_shards_then_sampling_from_the_checkpoint(shards, tmp_path):
    tok_dir, run_dir = tmp_path / "tok", tmp_path / "run"
    made = ok(refinery("tokenize", "--data", str(shards), "--out", str(tok_dir)))
    assert "valid/ too, anneal/ too" in made.stdout
    proc = ok(train(["--tokens", str(tok_dir), "--out", str(run_dir), *TINY, "--steps", "30", "--lr", "3e-3",
                     "--eval-every", "15"]))
    assert "validation loss every 15 steps on valid" in proc.stdout  # TOK/valid, tokenized with the data
    summary = json.load(open(run_dir / "summary.json"))
    assert summary["eval"]["valid"]["loss"] < math.log(BYTES.vocab_size) - 1.5
    first = ok(refinery("sample", "--run", str(run_dir), "--prompt", "The ", "--num-samples", "2",
                        "--max-new-tokens", "40", "--seed", "1"))
    again = ok(refinery("sample", "--run", str(run_dir), "--prompt", "The ", "--num-samples", "2",
                        "--max-new-tokens", "40", "--seed", "1"))
    assert first.stdout == again.stdout and "at step 30" in first.stdout
    samples = first.stdout.split("--- sample ")[1:]
    assert len(samples) == 2 and all(s.split("\n", 1)[1].startswith("The ") for s in samples)
    assert samples[0] != samples[1]
    assert "[sample] 1 torch thread(s) (OMP_NUM_THREADS)" in first.stdout
    chosen = subprocess.run([sys.executable, "-m", "pipeline.cli", "sample", "--run", str(run_dir), "--num-samples", "1",
                             "--max-new-tokens", "5"], cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"})
    assert chosen.returncode == 0 and "core(s), load" in chosen.stdout, chosen.stdout  # train's choice, not torch's
    missing = refinery("sample", "--run", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no checkpoint in" in missing.stderr


def test_ablate_compares_two_variants_end_to_end(shards, tmp_path):
    out = tmp_path / "abl"
    proc = ok(refinery("ablate", "--pool", str(shards), "--out", str(out), "--variant", "all=",
                       "--variant", "hq=--min-quality 0.5", "--tokens", "6000", "--seeds", "2",
                       "--set", "micro_batch=4", "--set", "warmup=2"))
    report = json.load(open(out / "ablation.json"))
    assert report["steps"] == 12 and report["tokens_per_run"] == 12 * 4 * 128  # the same budget for both
    (everything, hq) = report["results"]
    assert (everything["variant"], hq["variant"]) == ("all", "hq")
    assert 0 < hq["documents"] < everything["documents"] == len(ids(shards))
    for r in report["results"]:
        assert len(r["eval"]["valid"]["per_seed"]) == 2 and r["eval"]["valid"]["sd"] is not None
        assert r["eval"]["valid"]["per_seed"][0] != r["eval"]["valid"]["per_seed"][1]  # seeds differ
    hq_rows = pq.read_table(str(out / "variants" / "hq" / "data"), columns=["quality_score"]).column(0).to_pylist()
    assert min(hq_rows) >= 0.5
    assert "| hq |" in proc.stdout and (out / "ablation.md").read_text().count("|\n") == 4
    assert (out / "ablation.png").stat().st_size > 5000
    bad = refinery("ablate", "--pool", str(shards), "--out", str(out), "--variant", "x=--mix books=1")
    assert bad.returncode == 2 and "no documents of source books" in bad.stderr
    bad = refinery("ablate", "--pool", str(shards), "--out", str(out), "--variant", "x=--min-qualty 1")
    assert bad.returncode == 2 and "unknown option(s) --min-qualty" in bad.stderr


def check_datatrove(folder, docs: list[list[int]], eod: int, seq_len: int = 63) -> None:
    """datatrove's own DatatroveFolderDataset (what nanotron trains from) reads the folder as windows of seq_len + 1
    tokens: the documents' ids with an end-of-text id after each, in order, and its positions restart exactly where
    a document starts."""
    from datatrove.utils.dataset import DatatroveFolderDataset

    dataset = DatatroveFolderDataset(str(folder), seq_len=seq_len, token_size=2, return_positions=True)
    flat = [t for ids in docs for t in ids + [eod]]
    starts = set(np.cumsum([0] + [len(ids) + 1 for ids in docs[:-1]]).tolist())
    assert len(dataset) == len(flat) // (seq_len + 1) > 0
    got, restarts = [], set()
    for i in range(len(dataset)):
        window = dataset[i]
        got += window["input_ids"].tolist()
        restarts |= {i * (seq_len + 1) + j for j, p in enumerate(window["positions"].tolist()) if p == 0 and j}
    assert got == flat[:len(got)]
    assert restarts == {s for s in starts if s < len(got) and s % (seq_len + 1)}


@pytest.mark.parametrize("kind", ["bytes", "bpe"])
def test_megatron_and_datatrove_read_the_token_files_with_the_same_documents_in_the_same_order(shards, tmp_path, kind):
    """`refinery tokenize --format megatron,datatrove`: Megatron-LM's own IndexedDataset (megatron-core) and
    datatrove's own dataset read every split with rows: document k is the split's document k, its ids then the
    end-of-text id, so the two files hold one token stream (compared whole, not only each against ours); the
    document map says where each came from (shard row, WARC file and offset). With UTF-8 bytes and a BPE."""
    from datatrove.utils.dataset import DatatroveFolderDataset
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    spec = "bytes"
    if kind == "bpe":
        spec = str(tmp_path / "tokenizer.json")
        train_bpe(texts(shards), 400, spec)
    tok_dir = tmp_path / "tok"
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "tokenize", "--data", str(shards), "--out",
                           str(tok_dir), "--tokenizer", spec, "--format", "refinery,megatron,datatrove"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = read_token_manifest(str(tok_dir))
    eod = manifest["tokenizer"]["eos_id"]
    for split, folder in (("train", tok_dir), ("valid", tok_dir / "valid"), ("anneal", tok_dir / "anneal")):
        ours = [np.asarray(ids).tolist() for ids in documents(str(folder))]
        theirs = IndexedDataset(str(tok_dir / "megatron" / f"{split}_text_document"))
        assert len(theirs) == len(ours) > 0 and list(theirs.document_indices) == list(range(len(ours) + 1))
        assert all(theirs[k].tolist() == ids + [eod] for k, ids in enumerate(ours))
        mapped = pq.read_table(folder / "documents.parquet").to_pylist()
        assert [m["tokens"] for m in mapped] == [len(ids) for ids in ours]
        shard_rows = pq.read_table(shards / (split if split != "train" else "") / "data", columns=["id"]).column("id")
        assert [m["id"] for m in mapped] == shard_rows.to_pylist()  # same documents, same order
        assert all(m["file"].endswith(".warc.gz") and m["offset"] is not None for m in mapped)
        check_datatrove(tok_dir / "datatrove" / split, ours, eod)
        megatron_stream = np.concatenate([theirs[k] for k in range(len(theirs))]).tolist()
        whole = DatatroveFolderDataset(str(tok_dir / "datatrove" / split), seq_len=len(megatron_stream) - 1)
        assert len(whole) == 1 and whole[0]["input_ids"].tolist() == megatron_stream  # one stream, both readers
    bad = subprocess.run([sys.executable, "-m", "pipeline.cli", "tokenize", "--data", str(shards), "--out",
                          str(tmp_path / "tok2"), "--format", "mds"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "mds" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_token_files_are_never_written_through_a_link_planted_in_the_output(shards, tmp_path):
    """The document map and the Megatron/datatrove files go through common.files: when an earlier tokenize output is
    written again, a link planted where one of them goes is refused with one line, and its target is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    out = tmp_path / "tok"

    def tokenize_cli():
        return subprocess.run([sys.executable, "-m", "pipeline.cli", "tokenize", "--data", str(shards), "--out",
                               str(out), "--format", "refinery,megatron,datatrove"], cwd=REPO, capture_output=True,
                              text=True, timeout=300)

    assert tokenize_cli().returncode == 0
    for planted in ("documents.parquet", "megatron/train_text_document.idx", "datatrove/train/00000_tokens.ds"):
        os.replace(out / planted, tmp_path / "kept")
        os.symlink(victim, out / planted)
        done = tokenize_cli()
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "link" in done.stderr and victim.read_text(encoding="utf-8") == "keep me"
        os.remove(out / planted)
        os.replace(tmp_path / "kept", out / planted)
