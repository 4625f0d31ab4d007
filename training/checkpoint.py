"""Atomic, verifiable checkpoints, and the RNG state of a process.

Layout of a checkpoint directory:
  step-00000100.pt   torch.save of {format, step, model, optimizer, scheduler, scaler, data, rng, ...}
  latest.json        {"file", "step", "sha256", "bytes"}: written (temp + rename) after the .pt file

A reader trusts only what latest.json names and checks its size and sha256, so a crash mid-write
leaves the previous checkpoint in force, and a truncated or altered file is an error that names the
file, never a silent restart from step 0.
"""
from __future__ import annotations

import json
import os
import random
from typing import Any

import numpy as np

from common import files
from common.files import file_sha256
from stages.formats import parse_json

# torch is imported where a checkpoint is written or read: what `refinery train --nproc-per-node N` checks before
# torchrun starts (check_out, existing) needs no torch (training/config.py says why).

FORMAT = "refinery-checkpoint/1"
LATEST = "latest.json"
REQUIRED = ("format", "step", "model", "optimizer", "scheduler", "data", "rng")


class CheckpointError(RuntimeError):
    pass


def _write_atomic(path: str, write) -> None:
    with files.atomic_writer(path, fsync=True) as fh:  # never through a link planted in a shared folder
        write(fh)


def save(directory: str, payload: dict[str, Any], keep: int = 2) -> str:
    """Write `payload` (which has a `step`) and point latest.json at it; keep the newest `keep` files."""
    os.makedirs(directory, exist_ok=True)
    name = f"step-{payload['step']:08d}.pt"
    path = os.path.join(directory, name)
    import torch

    _write_atomic(path, lambda fh: torch.save(dict(payload, format=FORMAT), fh))
    latest = {"file": name, "step": payload["step"], "bytes": os.path.getsize(path), "sha256": file_sha256(path)}
    _write_atomic(os.path.join(directory, LATEST), lambda fh: fh.write(json.dumps(latest, indent=1).encode()))
    # Only older steps are collected: a checkpoint newer than this one (a rollback, a run resumed
    # from an earlier step) is never deleted by it.
    older = sorted(f for f in os.listdir(directory) if _step_of(f) is not None and _step_of(f) < payload["step"])
    for stale in older[:max(0, len(older) - (keep - 1))]:
        os.remove(os.path.join(directory, stale))
    return path


def _step_of(name: str) -> int | None:
    if name.startswith("step-") and name.endswith(".pt"):
        try:
            return int(name[5:-3])
        except ValueError:
            return None
    return None


def existing(directory: str) -> list:
    """Checkpoint files in `directory` (step-*.pt, latest.json), whether or not latest.json is intact."""
    if not os.path.isdir(directory):
        return []
    return sorted(f for f in os.listdir(directory) if f == LATEST or _step_of(f) is not None)


def latest_step(directory: str) -> int | None:
    try:
        with open(os.path.join(directory, LATEST), encoding="utf-8") as fh:
            return int(parse_json(fh.read())["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load(directory: str, asked_by: str = "--resume") -> dict[str, Any]:
    """The checkpoint latest.json names, verified; CheckpointError with the reason otherwise (its message
    starts with `asked_by`, the option that pointed here)."""
    pointer = os.path.join(directory, LATEST)
    if not os.path.isfile(pointer):
        found = [f for f in os.listdir(directory) if f.endswith(".pt")] if os.path.isdir(directory) else []
        hint = f" ({len(found)} .pt file(s) there but no {LATEST}: an interrupted first save?)" if found else ""
        raise CheckpointError(f"{asked_by}: no checkpoint in {directory}{hint}")
    try:
        with open(pointer, encoding="utf-8") as fh:
            latest = parse_json(fh.read())
        name = latest["file"]
        path = os.path.join(directory, name)
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{pointer} is unreadable ({exc})") from exc
    if not isinstance(name, str) or _step_of(name) is None or os.path.basename(name) != name:
        # only a checkpoint of this folder: a pointer to ../elsewhere or /abs/path would load what it names
        raise CheckpointError(f"{pointer} names {name!r}, which is not a step-N.pt file of {directory}")
    if not os.path.isfile(path):
        raise CheckpointError(f"{pointer} names {latest['file']}, which does not exist")
    size = os.path.getsize(path)
    if size != latest.get("bytes"):
        raise CheckpointError(f"{path} is {size} bytes, {LATEST} recorded {latest.get('bytes')}: partial or replaced file")
    if file_sha256(path) != latest.get("sha256"):
        raise CheckpointError(f"{path} does not match its sha256 in {LATEST}: the file is corrupt")
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for damaged archives
        raise CheckpointError(f"{path} cannot be loaded: {exc}") from exc
    missing = [k for k in REQUIRED if k not in state]
    if missing or state.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a {FORMAT} checkpoint (missing {missing})")
    return state


def rng_state() -> dict[str, Any]:
    """This process's generators as plain lists and numbers: they travel through `gather_object` and
    load under `torch.load(weights_only=True)`."""
    import torch

    name, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {"python": [version, list(internal), gauss_next],
             "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(gauss)],
             "torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def check_out(cfg: Any) -> None:
    """Refuse a training config's OUT that holds checkpoint files (whatever latest.json says, even if it is gone)
    unless the run resumes or overwrites them: a fresh run there would clean up the newest good checkpoint."""
    if cfg.overwrite and cfg.resume:
        raise CheckpointError("--overwrite and --resume contradict each other")
    found = existing(os.path.join(cfg.out, "checkpoints"))
    if found and not (cfg.resume or cfg.overwrite):
        raise CheckpointError(f"{cfg.out} already holds checkpoints ({', '.join(found[:3])}): pass "
                              "--resume to continue, --overwrite to start over, or choose another --out")
