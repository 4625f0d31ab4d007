"""The signals clusters send (issue 54): SIGTERM (Slurm and Kubernetes preemption, time limits) and SIGINT (Ctrl-C)
make `refinery train` finish its step, save a checkpoint, print one line naming the command that resumes and exit
128 + the signal (143, 130); that command then continues bit for bit as if nothing had happened, with 1 and 2 ranks."""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.training.conftest import TINY, _env, losses_by_step, ok

STEPS = ["--steps", "14", "--checkpoint-every", "100", "--dropout", "0.1", "--log-every", "1"]


def command(shards, out, nproc: int, *extra) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "train", "--nproc-per-node", str(nproc), "--data", str(shards),
            "--out", str(out), *TINY, *STEPS, *extra]


def steps_logged(out) -> int:
    try:
        with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as fh:
            return max((json.loads(line).get("step", 0) for line in fh if '"loss"' in line), default=0)
    except (FileNotFoundError, ValueError):
        return 0


def tree(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def start_and_signal(cmd, out, sig, after_step: int = 3, to: str = "refinery"):
    """Start `cmd`, send `sig` once it logged `after_step` steps to `refinery train` alone, to its process group (a
    terminal's Ctrl-C) or to every process of the job (Slurm's scancel), and return (exit code, stderr)."""
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while steps_logged(out) < after_step and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    if to == "group":
        os.killpg(proc.pid, sig)
    else:
        for pid in tree(proc.pid) if to == "every process" else [proc.pid]:
            os.kill(pid, sig)
    _, err = proc.communicate(timeout=240)
    return proc.returncode, err


def resumed_with_the_printed_command(err: str) -> list[str]:
    (line,) = [row for row in err.splitlines() if row.strip()]  # one line, no traceback
    words = shlex.split(line.split("continue with: ", 1)[1])
    assert words[:2] == ["refinery", "train"] and words[-1] == "--resume" and "--overwrite" not in words
    return [sys.executable, "-m", "pipeline.cli", *words[1:]]


@pytest.fixture(scope="module")
def uninterrupted(shards, tmp_path_factory):
    """The runs a stopped and resumed one must repeat; the 1-rank one also saves by the clock (--checkpoint-minutes),
    which must not change a loss."""
    runs = {}
    for nproc in (1, 2):
        out = tmp_path_factory.mktemp(f"whole{nproc}")
        clock = ["--checkpoint-minutes", "0.00001", "--keep-checkpoints", "100"] if nproc == 1 else []
        ok(subprocess.run(command(shards, out, nproc, *clock), cwd=REPO, env=_env(), capture_output=True, text=True,
                          timeout=300))
        runs[nproc] = losses_by_step(out)
        if clock:
            runs["saved by the clock"] = sorted(p.name for p in (out / "checkpoints").glob("step-*.pt"))
    return runs


@pytest.mark.parametrize("nproc,sig,to", [(1, signal.SIGTERM, "refinery"), (2, signal.SIGTERM, "refinery"),
                                          (2, signal.SIGINT, "group"), (2, signal.SIGTERM, "every process")],
                         ids=["1 rank, SIGTERM", "2 ranks, SIGTERM to refinery train (Kubernetes)",
                              "2 ranks, Ctrl-C to the terminal's process group",
                              "2 ranks, SIGTERM to every process (Slurm's scancel)"])
def test_a_signal_saves_a_checkpoint_and_the_printed_command_resumes_exactly(shards, tmp_path, uninterrupted, nproc,
                                                                            sig, to):
    out = tmp_path / "run"
    code, err = start_and_signal(command(shards, out, nproc, "--overwrite"), out, sig, to=to)
    assert code == 128 + sig, err[-3000:]
    assert "Traceback" not in err and f"stopped by {signal.Signals(sig).name} at step" in err, err[-3000:]
    step = int(err.split(" at step ")[1].split(";")[0])
    assert f"checkpoint step {step} saved in {out / 'checkpoints'}" in err and 3 <= step < 14, err
    assert json.load(open(out / "checkpoints" / "latest.json"))["step"] == step
    ok(subprocess.run(resumed_with_the_printed_command(err), cwd=REPO, env=_env(), capture_output=True, text=True,
                      timeout=300))
    resumed, expected = losses_by_step(out), uninterrupted[nproc]
    assert sorted(resumed) == list(range(1, 15))
    for s in range(1, 15):
        assert (resumed[s]["loss"], resumed[s]["grad_norm"]) == (expected[s]["loss"], expected[s]["grad_norm"]), s


def test_checkpoints_by_the_clock(uninterrupted):
    """--checkpoint-minutes saves once that much time passed since the last checkpoint, whatever --checkpoint-every
    (100 here): a preempted job loses at most that much work; 0 is refused."""
    from common.settings import ConfigError
    from training.config import TrainConfig

    assert uninterrupted["saved by the clock"] == [f"step-{s:08d}.pt" for s in range(1, 15)]
    with pytest.raises(ConfigError, match="--checkpoint-minutes must be > 0"):
        TrainConfig(checkpoint_minutes=0)
