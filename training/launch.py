"""`refinery train [--nproc-per-node N] ARGS`: one process, or N ranks through `torchrun --standalone`
(same as `torchrun --standalone --nproc_per_node=N -m training.train ARGS`). For several machines,
call torchrun yourself with --nnodes/--rdzv-endpoint."""
from __future__ import annotations

import os
import re
import shlex
import signal
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
    # what the ranks print as the command that resumes this run after a signal (training/stopping.py)
    me = sys.argv[0] if os.path.basename(sys.argv[0]) == "refinery" else "refinery"
    os.environ["REFINERY_TRAIN_COMMAND"] = shlex.join([me, "train", *argv])
    try:
        nproc, rest = split_nproc(argv)
    except ValueError as exc:
        print(f"refinery train: error: {exc}", file=sys.stderr)
        return 2
    if nproc <= 1:
        from training.train import main as train_main

        return train_main(rest)
    from common.settings import ConfigError
    from training.checkpoint import CheckpointError, check_out
    from training.config import parse

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
SHUTDOWN_S = 120  # what torchrun gives the ranks to save a checkpoint after a signal before it kills them


def run_torchrun(cmd: list[str], env: dict) -> int:
    """torchrun with the ranks' output passed through as it comes, but without the launcher's own report after a
    rank failed or a signal: the rank's line is the message. SIGTERM or SIGINT reaching this process (Kubernetes
    signals only the container's first process; a terminal, the foreground one) is passed to torchrun, which passes
    it to the ranks: they save a checkpoint and stop (training/stopping.py). Returns the ranks' code."""
    from stages.processes import die_with_parent

    received: list[int] = []
    # its own session: a terminal's Ctrl-C reaches it through us only (once); SIGTERM if we die: it stops the ranks
    proc = subprocess.Popen([*cmd[:3], f"--shutdown-timeout={SHUTDOWN_S}", *cmd[3:]], env=env, stderr=subprocess.PIPE,
                            text=True, errors="replace", bufsize=1, start_new_session=True,
                            preexec_fn=lambda: die_with_parent(signal.SIGTERM))

    def forward(signum, frame):
        received.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    rank_code, stopped = None, None
    try:
        for line in proc.stderr:
            if line.startswith("refinery train: stopped"):
                stopped = line
            match = _AGENT_FAILURE.search(line) if rank_code is None else None
            if match:
                rank_code = int(match.group(1))
            if line.startswith("refinery train:") or (rank_code is None and not received and stopped is None):
                sys.stderr.write(line)  # after a signal, only the ranks' own lines: not torchrun's shutdown report
                sys.stderr.flush()
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received or stopped:
        return 128 + received[0] if received else rank_code or code
    if code and rank_code is not None:
        print(f"refinery train: a rank exited with code {rank_code} (its error is above); torchrun's report "
              "left out", file=sys.stderr)
        return rank_code if rank_code > 0 else code
    return code
