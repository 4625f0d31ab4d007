"""`refinery train [--nproc-per-node N] ARGS`: one process, or N ranks through `torchrun --standalone`
(same as `torchrun --standalone --nproc_per_node=N -m training.train ARGS`). For several machines,
call torchrun yourself with --nnodes/--rdzv-endpoint."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import List, Sequence


def split_nproc(argv: Sequence[str]) -> tuple:
    rest: List[str] = []
    nproc, it = 1, iter(argv)
    for arg in it:
        if arg == "--nproc-per-node":
            nproc = int(next(it, "1"))
        elif arg.startswith("--nproc-per-node="):
            nproc = int(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return nproc, rest


def main(argv: Sequence[str]) -> int:
    nproc, rest = split_nproc(argv)
    if nproc <= 1:
        from training.train import main as train_main

        return train_main(rest)
    from training.config import parse

    parse(rest)  # a bad option or config file is reported once here, not once per rank
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "training.train", *rest]
    env = dict(os.environ)
    # torchrun would set 1 thread per rank; share the cores instead when the user has not chosen
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    return subprocess.call(cmd, env=env)
