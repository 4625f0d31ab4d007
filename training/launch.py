"""`refinery train [--nproc-per-node N] ARGS`: one process, or N ranks through `torchrun --standalone`
(same as `torchrun --standalone --nproc_per_node=N -m training.train ARGS`). For several machines,
call torchrun yourself with --nnodes/--rdzv-endpoint."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence


def split_nproc(argv: Sequence[str]) -> tuple:
    """(ranks, the other arguments); ValueError for a --nproc-per-node that is no positive integer."""
    rest: list[str] = []
    value, it = "1", iter(argv)
    for arg in it:
        if arg == "--nproc-per-node":
            value = next(it, "")
        elif arg.startswith("--nproc-per-node="):
            value = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"--nproc-per-node: expected a positive integer, got {value!r}")
    return int(value), rest


def main(argv: Sequence[str]) -> int:
    try:
        nproc, rest = split_nproc(argv)
    except ValueError as exc:
        print(f"refinery train: error: {exc}", file=sys.stderr)
        return 2
    if nproc <= 1:
        from training.train import main as train_main

        return train_main(rest)
    from common.settings import ConfigError
    from training.checkpoint import CheckpointError
    from training.config import parse
    from training.train import check_out

    try:
        cfg = parse(rest)  # a bad option, config file or --out is reported once here, not once per rank
        check_out(cfg)
    except (ConfigError, CheckpointError) as exc:
        print(f"refinery train: error: {exc}", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "training.train", *rest]
    env = dict(os.environ)
    # torchrun would set 1 thread per rank; share the cores instead when the user has not chosen
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    return run_torchrun(cmd, env)


# The elastic agent's first line once a rank has failed; what follows is its own report (a traceback of
# the launcher and a table of the failure), which repeats what the rank already printed.
_AGENT_FAILURE = re.compile(r"^[EW]\d{4} .*\] failed \(exitcode: (-?\d+)\)")


def run_torchrun(cmd: list[str], env: dict) -> int:
    """torchrun with the ranks' output passed through as it comes, but without the launcher's report
    after a rank failed: the rank's own error line (exit 2) is the message. Returns the rank's code."""
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1)
    rank_code = None
    try:
        for line in proc.stderr:
            match = _AGENT_FAILURE.search(line) if rank_code is None else None
            if match:
                rank_code = int(match.group(1))
            if rank_code is None:
                sys.stderr.write(line)
                sys.stderr.flush()
    except KeyboardInterrupt:  # Ctrl-C reached the ranks too: rank 0 says where to --resume from
        for line in proc.stderr:
            if line.startswith("refinery train: interrupted"):
                sys.stderr.write(line)
        proc.wait()
        return 130
    code = proc.wait()
    if code and rank_code is not None:
        print(f"refinery train: a rank exited with code {rank_code} (its error is above); torchrun's report "
              "left out", file=sys.stderr)
        return rank_code if rank_code > 0 else code
    return code
