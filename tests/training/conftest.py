"""Shared fixtures for the training tests: real shards from the pipeline, and launchers for real
`torchrun` and single-process training runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, WARC_DIR, built_once

# Small enough for 2 cores: ~125k parameters, 128-token sequences.
TINY = ["--size", "tiny", "--seq-len", "128", "--micro-batch", "4", "--log-every", "5"]
# The demo WARCs hold few high-quality pages, most of them one site's: the anneal caps are set for that pool.
SPLITS = ["--holdout-fraction", "0.1", "--anneal-fraction", "0.3", "--anneal-max-page-share", "0.25",
          "--anneal-max-site-share", "0.5"]


@pytest.fixture(scope="session")
def shards(tmp_path_factory):
    """The pipeline's demo run on the bundled WARCs, written with small row groups so that two ranks
    and their DataLoader workers get several units each, with a valid/ split (10 % held out) and an
    anneal/ split (high-quality documents, 30 % of the tokens)."""
    from pipeline.job.run import run

    def build(out):
        run(["--input", str(WARC_DIR / "*.warc.gz"), "--output", str(out), "--quiet", "--overwrite",
             "--row-group-rows", "8", *SPLITS])
        return out

    return built_once(tmp_path_factory, "shards", build)


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    env.pop("WORLD_SIZE", None)
    return env


def torchrun(args: list[str], nproc: int = 2, timeout: int = 300) -> subprocess.CompletedProcess:
    """A real `torchrun --standalone` launch of `args` (a module's or script's command line)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    return subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)


def train(args: list[str], nproc: int = 0, timeout: int = 300) -> subprocess.CompletedProcess:
    """`training.train` under torchrun with `nproc` ranks, or as one plain process when nproc is 0."""
    if nproc:
        return torchrun(["-m", "training.train", *args], nproc=nproc, timeout=timeout)
    return subprocess.run([sys.executable, "-m", "training.train", *args], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    return proc


def metrics(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def losses_by_step(run_dir) -> dict:
    """The last logged record of each step (a rolled-back run logs the replayed steps again)."""
    return {r["step"]: r for r in metrics(run_dir) if "loss" in r}
