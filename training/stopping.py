"""Stopping on the signals clusters send, and checkpoints by the clock.

Slurm and Kubernetes end a job with SIGTERM (preemption, a time limit, `scancel`), a terminal with SIGINT. A rank
that receives one only notes it and finishes its step; at the end of every step the ranks agree (one all-reduce of
two numbers, over gloo even when training runs on NCCL) whether any rank was signalled and whether a checkpoint is
due by the clock (`--checkpoint-minutes`), so they all save at the same step. Then the run saves its checkpoint,
rank 0 prints one line naming the command that resumes, and every rank exits with 128 + the signal's number (143
for SIGTERM, 130 for SIGINT), as shells and schedulers expect. A second signal some seconds after the first stops
at once, with the last checkpoint named (one that comes with the first, as when Slurm signals every process and
torchrun forwards the signal again, is the same request).
"""
from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence

import torch
import torch.distributed as dist

SIGNALS = (signal.SIGTERM, signal.SIGINT)
REPEAT_S = 3.0  # a signal this long after the first one stops at once


class Stopped(Exception):
    """The ranks agreed to stop after a signal; `saved`: the step of the checkpoint to resume from (0: none)."""

    def __init__(self, signum: int, step: int, saved: int):
        super().__init__(f"stopped by {signal.Signals(signum).name} at step {step}")
        self.signum, self.step, self.saved = signum, step, saved

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class SignalFlag:
    """Notes SIGTERM/SIGINT instead of raising in the middle of a step; a repeat after REPEAT_S raises."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._first_at = 0.0
        self._previous: dict[int, object] = {}

    def install(self) -> SignalFlag:
        self._previous = {sig: signal.signal(sig, self._noted) for sig in SIGNALS}
        return self

    def restore(self) -> None:
        """The handlers from before `install` (`refinery ablate` trains several times in one process: a Ctrl-C
        between two trainings must not be noted by a flag nobody reads any more)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _noted(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum, self._first_at = signum, time.monotonic()
        elif time.monotonic() - self._first_at > REPEAT_S:
            raise KeyboardInterrupt


class Control:
    """What the ranks decide together at the end of a step: stop (a signal reached any rank) and checkpoint by the
    clock (the slowest clock's view is taken: every rank saves at the same step)."""

    def __init__(self, flag: SignalFlag, minutes: float | None, world_size: int) -> None:
        self.flag, self.minutes = flag, minutes
        self._group = None
        if world_size > 1 and dist.is_initialized():
            self._group = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else dist.group.WORLD
        self.saved_at = time.monotonic()

    def saved(self) -> None:
        self.saved_at = time.monotonic()

    def decide(self) -> tuple[int | None, bool]:
        """(the signal to stop for, or None; whether a checkpoint is due by the clock), the same on every rank."""
        due = self.minutes is not None and time.monotonic() - self.saved_at >= self.minutes * 60
        state = torch.tensor([float(self.flag.signum or 0), float(due)])
        if self._group is not None:
            dist.all_reduce(state, op=dist.ReduceOp.MAX, group=self._group)
        signum = int(state[0].item())
        return (signum or None), bool(state[1].item())


def resume_command(argv: Sequence[str]) -> str:
    """The command that continues this run: the user's own (`refinery train` passes it down to its ranks), with
    --resume instead of --overwrite."""
    given = os.environ.get("REFINERY_TRAIN_COMMAND")
    words = shlex.split(given) if given else [sys.executable, "-m", "training.train", *argv]
    words = [w for w in words if w not in ("--overwrite", "--resume")]
    return shlex.join([*words, "--resume"])


def stop_message(stop: Stopped, argv: Sequence[str], checkpoints: str) -> str:
    name = signal.Signals(stop.signum).name
    if stop.saved:
        where = (f"checkpoint step {stop.saved} saved in {checkpoints}" if stop.saved == stop.step
                 else f"no update since the checkpoint of step {stop.saved} in {checkpoints}")
        return f"refinery train: stopped by {name} at step {stop.step}; {where}; continue with: {resume_command(argv)}"
    return (f"refinery train: stopped by {name} at step {stop.step} with no checkpoint (no update was applied); "
            "run the same command again to start over")
