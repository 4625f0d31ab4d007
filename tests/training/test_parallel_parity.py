"""Real 2-rank gloo runs under torchrun: DDP and FSDP gradients equal one process's gradients on the
concatenated batch; DDP's no-sync micro-batches stay local to each rank."""
from __future__ import annotations

import pytest
import torch

from tests.training.conftest import ok, torchrun
from tests.training.fixed_batches import MICRO_BATCHES, MICRO_BATCHES_BY_RANK, concatenated, make_model
from training.data import IGNORE_INDEX
from training.step import token_loss_sum

CPU = torch.device("cpu")


def single_process_grads(batches, normalize_by_tokens=True):
    model = make_model()
    big = concatenated(batches)
    loss = token_loss_sum(model, big, "fp32", CPU)
    if normalize_by_tokens:
        loss = loss / int((big["target"] != IGNORE_INDEX).sum())
    loss.backward()
    return {k: p.grad for k, p in model.named_parameters()}, loss.item()


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory):
    runs = {}
    for strategy in ("ddp", "fsdp"):
        runs[strategy] = tmp_path_factory.mktemp(strategy)
        ok(torchrun(["tests/training/parity_worker.py", strategy, str(runs[strategy])]))
    return runs


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_rank_step_gradients_equal_one_process_on_the_concatenated_batch(two_rank_runs, strategy):
    out = two_rank_runs[strategy]
    step = torch.load(out / "step.pt")
    reference, loss = single_process_grads(MICRO_BATCHES)
    # rank 0 holds 600 target tokens, rank 1 holds 450: only a global token count gets this right
    assert step["tokens"] == 1050
    assert step["loss"] == pytest.approx(loss, rel=1e-6)
    assert set(step["grads"]) == set(reference)
    for name, grad in reference.items():
        assert torch.allclose(step["grads"][name], grad, rtol=1e-5, atol=1e-8), (strategy, name)


def test_ddp_no_sync_micro_batches_keep_local_gradients(two_rank_runs):
    """(FSDP2 keeps unsynchronized gradients unsharded inside the module, so there is no per-rank
    gradient to inspect; its parity test above covers the accumulation.)"""
    out = two_rank_runs["ddp"]
    local = [torch.load(out / f"nosync_rank{r}.pt") for r in (0, 1)]
    for rank in (0, 1):
        own, _ = single_process_grads(MICRO_BATCHES_BY_RANK[rank][:1], normalize_by_tokens=False)
        for name, grad in own.items():
            assert torch.allclose(local[rank][name], grad, rtol=1e-5, atol=1e-6), name
    assert not any(torch.allclose(local[0][k], local[1][k]) for k in local[0])
