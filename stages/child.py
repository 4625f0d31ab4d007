"""The entry of a child process started by stages.processes.start_child: `python -m stages.child FD`."""
from __future__ import annotations

import importlib
import sys
from multiprocessing.connection import Connection


def main() -> None:
    conn = Connection(int(sys.argv[1]))
    try:
        target, args = conn.recv()
    except (EOFError, OSError):
        return  # the parent went away before it said what to run
    module, function = target.split(":")
    getattr(importlib.import_module(module), function)(conn, *args)


if __name__ == "__main__":
    main()
