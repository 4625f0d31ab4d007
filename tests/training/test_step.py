"""One process: gradient accumulation normalized by global target tokens, gradient checkpointing,
precision, the LR schedule and the spike guard."""
from __future__ import annotations

import math

import pytest
import torch

from tests.training.fixed_batches import MICRO_BATCHES, TOKEN_COUNTS, concatenated, make_model
from training.data import IGNORE_INDEX
from training.spikes import SpikeConfig, SpikeGuard
from training.step import accumulation_step, lr_at, make_scaler, token_loss_sum

CPU = torch.device("cpu")


def grads(model):
    return {k: p.grad.detach().clone() for k, p in model.named_parameters()}


def big_batch_grads():
    model = make_model()
    big = concatenated(MICRO_BATCHES)
    tokens = int((big["target"] != IGNORE_INDEX).sum())
    (token_loss_sum(model, big, "fp32", CPU) / tokens).backward()
    return grads(model)


def per_microbatch_mean_grads():
    """The classic bug: mean loss per micro-batch, divided by the number of micro-batches."""
    model = make_model()
    for batch in MICRO_BATCHES:
        tokens = int((batch["target"] != IGNORE_INDEX).sum())
        (token_loss_sum(model, batch, "fp32", CPU) / tokens / len(MICRO_BATCHES)).backward()
    return grads(model)


def relative_error(a, b):
    num = math.sqrt(sum(float(((a[k] - b[k]) ** 2).sum()) for k in a))
    return num / math.sqrt(sum(float((b[k] ** 2).sum()) for k in b))


def test_token_sum_accumulation_equals_one_big_batch_and_per_microbatch_means_do_not():
    assert [int((b["target"] != IGNORE_INDEX).sum()) for b in MICRO_BATCHES] == TOKEN_COUNTS == [500, 100, 400, 50]
    reference = big_batch_grads()
    model = make_model()
    result = accumulation_step(model, MICRO_BATCHES, world_size=1)
    assert result.tokens == 1050
    ours = grads(model)
    for name in reference:
        assert torch.allclose(ours[name], reference[name], rtol=1e-5, atol=1e-8), name
    assert relative_error(ours, reference) < 1e-5
    wrong = per_microbatch_mean_grads()
    error = relative_error(wrong, reference)
    # The 50-token micro-batch gets 10x the weight per token of the 500-token one: here the error is
    # larger than the gradient itself (relative error 1.25, printed with -s).
    print(f"per-micro-batch mean / K: relative gradient error {error:.3f}; token-sum: "
          f"{relative_error(ours, reference):.1e}")
    assert error > 0.05
    assert not all(torch.allclose(wrong[k], reference[k], rtol=1e-3) for k in reference)


def test_gradient_checkpointing_gives_identical_gradients():
    plain, recomputed = make_model(), make_model()
    recomputed.grad_checkpoint = True
    accumulation_step(plain, MICRO_BATCHES[:2], world_size=1)
    accumulation_step(recomputed, MICRO_BATCHES[:2], world_size=1)
    a, b = grads(plain), grads(recomputed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_bf16_autocast_keeps_fp32_weights_and_a_close_loss():
    model = make_model()
    fp32 = accumulation_step(model, MICRO_BATCHES[:1], world_size=1).loss
    model.zero_grad()
    bf16 = accumulation_step(model, MICRO_BATCHES[:1], world_size=1, precision="bf16").loss
    assert abs(bf16 - fp32) / fp32 < 0.02
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())


def test_fp16_with_loss_scaling_unscales_to_the_fp32_gradient():
    model = make_model()
    accumulation_step(model, MICRO_BATCHES[:1], world_size=1)
    fp32 = grads(model)
    model.zero_grad()
    scaler = make_scaler("fp16", CPU)
    accumulation_step(model, MICRO_BATCHES[:1], world_size=1, precision="fp16", scaler=scaler)
    assert scaler.get_scale() == 65536.0
    assert relative_error(grads(model), fp32) > 1000  # still scaled
    scaler.unscale_(torch.optim.SGD(model.parameters(), lr=0.0))
    unscaled = grads(model)
    error = relative_error(unscaled, fp32)
    print(f"fp16 + loss scale 65536, unscaled: relative gradient error vs fp32 {error:.2e}")
    assert error < 1e-2
    assert all(p.dtype == torch.float32 for p in unscaled.values())


def test_lr_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    lrs = [lr_at(s, 1.0, warmup=10, total=110, min_ratio=0.1) for s in range(111)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[10] == pytest.approx(1.0) and lrs[60] == pytest.approx(0.55) and lrs[110] == pytest.approx(0.1)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))


def test_spike_guard_skips_spikes_and_non_finite_values_and_asks_for_rollback():
    guard = SpikeGuard(SpikeConfig(factor=3.0, history=20, min_history=5, max_skips=3, skip_window=10), clip=0.0)
    assert guard.check(float("nan"), 1.0) == "non-finite loss"
    assert guard.check(2.0, float("inf")) == "non-finite grad norm"
    assert guard.check(100.0, 100.0) is None  # no history yet: early losses fall fast
    for step in range(10):
        guard.observe(2.0 + 0.01 * step, 1.0, step + 1)
    assert guard.check(2.5, 1.2) is None
    assert guard.check(7.0, 1.0).startswith("loss spike")
    assert guard.check(2.1, 3.5).startswith("grad-norm spike")
    assert guard.check(2.0, 3.5) is None  # the norm rises while the loss still falls: early training, not a spike
    clipped = SpikeGuard(guard.cfg, clip=1.0)
    for step in range(10):
        clipped.observe(2.0, 1.0, step + 1)
    assert clipped.check(2.1, 50.0) is None  # clipping bounds the update: a finite norm is no reason to skip
    assert clipped.check(7.0, 1.0).startswith("loss spike") and clipped.check(2.0, float("nan"))
    assert not guard.skipped(20) and not guard.skipped(25)
    assert not guard.skipped(31)  # step 20 left the 10-step window
    assert guard.skipped(33)


def test_spike_guard_ignores_warm_up_norms_and_adapts_to_a_lasting_shift():
    from training.spikes import TrainingDiverged

    guard = SpikeGuard(SpikeConfig(factor=3.0, history=10, min_history=4, max_rollbacks=2, rollback_window=100),
                       warmup=5)
    for step in range(1, 6):  # warm-up: tiny norms, not recorded
        guard.observe(5.0, 0.01, step)
    assert len(guard.norms) == 0 and len(guard.losses) == 5
    for step in range(6, 10):
        guard.observe(4.0, 2.0, step)
    assert guard.check(5.0, 124.0).startswith("grad-norm spike")  # loss not falling: a spike
    for step in range(10, 16):  # the new level persists: skipped values enter the history too
        guard.observe(4.0, 124.0, step)
    assert guard.check(5.0, 124.0) is None
    guard.rolled_back(50)
    guard.rolled_back(60)
    with pytest.raises(TrainingDiverged, match="at steps 50, 60, 70"):
        guard.rolled_back(70)
