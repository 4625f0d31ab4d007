"""Run under torchrun (2 ranks, gloo): gradients of this project's DDP/FSDP step on a fixed global
batch, saved for tests/training/test_parallel_parity.py to compare with a single process.

Usage: torchrun --standalone --nproc_per_node=2 tests/training/parity_worker.py STRATEGY OUT_DIR
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.training.fixed_batches import MICRO_BATCHES_BY_RANK, make_model  # noqa: E402
from training.distributed import gradient_sync, gradients, init, shutdown, wrap  # noqa: E402
from training.step import accumulation_step, token_loss_sum  # noqa: E402


def main() -> None:
    strategy, out = sys.argv[1], sys.argv[2]
    env = init("cpu")
    model = wrap(make_model(), strategy, env)
    mine = MICRO_BATCHES_BY_RANK[env.rank]

    # 1. DDP: one micro-batch without gradient sync; each rank keeps its own local gradient. (FSDP2
    # keeps unsynchronized gradients unsharded inside the module until a synchronizing backward, so
    # there is nothing per rank to inspect, and zero_grad would not clear them.)
    if strategy == "ddp":
        with gradient_sync(model, enabled=False):
            token_loss_sum(model, mine[0], "fp32", env.device).backward()
        torch.save(gradients(model, full=False), os.path.join(out, f"nosync_rank{env.rank}.pt"))
        model.zero_grad(set_to_none=True)

    # 2. a full accumulation step (uneven token counts per micro-batch and per rank)
    result = accumulation_step(model, mine, env.world_size)
    grads = gradients(model)  # collective under FSDP
    if env.rank == 0:
        torch.save({"grads": grads, "loss": result.loss, "tokens": result.tokens}, os.path.join(out, "step.pt"))
    shutdown()


if __name__ == "__main__":
    # Leave as training.train does: a native abort at interpreter teardown ("terminate called without an
    # active exception", seen once in CI here after every file was written) would fail the launch.
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
