"""Child processes that end with their parent, and that start without importing the caller's script."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Linux: this process gets `sig` (SIGKILL; SIGTERM for one that should tidy up) when its parent dies, however
    the parent dies (kill -9 included). Call it in a child (or as a Popen `preexec_fn`); elsewhere it does nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


def start_child(target: str, *args) -> tuple[subprocess.Popen, Connection]:
    """A fresh interpreter (`python -m stages.child`) that calls `target` ("module:function") with a connection to
    this process and `args` (pickled): (the process, this side's connection).

    Not multiprocessing's spawn: it re-imports the caller's `__main__`, so a user's script without an
    `if __name__ == "__main__":` guard would run its job again in every child. The child sees the same sys.path."""
    ours, theirs = socket.socketpair()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "stages.child", str(theirs.fileno())], env=env,
                                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    finally:
        theirs.close()
    conn = Connection(ours.detach())
    conn.send((target, args))
    return proc, conn
