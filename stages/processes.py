"""Child processes that end with their parent."""
from __future__ import annotations

import signal

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Linux: this process gets `sig` (SIGKILL; SIGTERM for one that should tidy up) when its parent dies, however
    the parent dies (kill -9 included). Call it in a child (or as a Popen `preexec_fn`); elsewhere it does nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass
