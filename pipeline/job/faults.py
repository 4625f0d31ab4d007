"""Testing: kill the process at a named point, as a crash or an OOM kill would (the resume tests).

    REFINERY_KILL_AT=prepared:3 refinery run ...   # SIGKILL right after the 3rd input file's part is committed
    REFINERY_KILL_AT=shard:1 refinery run ...      # ... after the first output shard is written (phase 2)
"""
from __future__ import annotations

import os
import signal

KILL_ENV = "REFINERY_KILL_AT"
_passed: dict[str, int] = {}


def kill_point(name: str) -> None:
    """SIGKILL this process the N-th time it passes `name`, if REFINERY_KILL_AT=name:N (unset in real runs)."""
    point, _, n = os.environ.get(KILL_ENV, "").partition(":")
    if point == name:
        _passed[name] = _passed.get(name, 0) + 1
        if _passed[name] >= int(n or 1):
            os.kill(os.getpid(), signal.SIGKILL)
