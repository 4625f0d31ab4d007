"""A time limit per document for every stage: a stage that does not return (a plugin's endless loop, a rule that
backtracks for minutes on one page) gets `StageTimeout` raised in the thread that runs it, and the runner ledgers the
document (`error:StageTimeout`, the stage named) and goes on. Extraction has its own limit, in a child process.

One watchdog thread per process serves every runner and thread: a call registers its deadline and deregisters on
return (a dict under a lock: about a microsecond). The exception is raised with `PyThreadState_SetAsyncExc`, which
takes effect at the thread's next Python bytecode: code stuck inside one C call (a regex engine, a socket read without
a timeout) does not see it, and for that case, after HARD_FACTOR times the limit, the watchdog ends the process with
one line naming the stage and the document, rather than let the run hang."""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time
from collections.abc import Iterator


class StageTimeout(BaseException):
    """A stage ran past its time limit on one document. A BaseException, so that a stage's own `except Exception`
    does not swallow it."""


def _set_async_exc(tid: int, exc: type[BaseException] | None) -> None:
    """Raise `exc` in thread `tid` at its next bytecode; None (a NULL pointer) takes back one not yet raised."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None if exc is None else ctypes.py_object(exc))


class _Watchdog:
    HARD_FACTOR = 3.0  # past this many times the limit without returning: the process ends, in one line

    def __init__(self):
        self._lock = threading.Condition()
        self._calls: dict[int, list] = {}  # thread id -> [deadline, limit, stage, document, fired]
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
            self._pid = os.getpid()
            self._thread = threading.Thread(target=self._watch, name="refinery-stage-time-limit", daemon=True)
            self._thread.start()

    @contextlib.contextmanager
    def limit(self, seconds: float, stage: str, document: str) -> Iterator[None]:
        tid = threading.get_ident()
        if tid in self._calls:  # a stage run inside another's call (a rescue's model): the outer limit holds
            yield
            return
        with self._lock:
            self._ensure_thread()
            self._calls[tid] = [time.monotonic() + seconds, seconds, stage, document, False]
            self._lock.notify()
        try:
            yield
        finally:
            with self._lock:
                entry = self._calls.pop(tid, None)
                if entry is not None and entry[4]:
                    _set_async_exc(tid, None)  # a raise not yet delivered must not land after the call returned

    def _watch(self) -> None:
        with self._lock:
            while True:
                now = time.monotonic()
                wake = now + 3600
                for tid, entry in list(self._calls.items()):
                    deadline, seconds, stage, document, fired = entry
                    if now >= deadline + (self.HARD_FACTOR - 1) * seconds:
                        print(f"error: stage {stage} did not return in {self.HARD_FACTOR * seconds:g} s on document "
                              f"{document} and does not answer its time limit (stuck outside Python code): the run "
                              "stops; lower what it is given, or disable the stage", file=sys.stderr, flush=True)
                        os._exit(2)
                    if now >= deadline:
                        _set_async_exc(tid, StageTimeout)  # again each second, until the thread gets it
                        entry[4] = True
                        wake = min(wake, now + min(1.0, seconds))
                    else:
                        wake = min(wake, deadline)
                self._lock.wait(max(wake - time.monotonic(), 0.001))


_WATCHDOG = _Watchdog()


def time_limit(seconds: float | None, stage: str, document: str):
    """A context in which `StageTimeout` is raised after `seconds` (None: no limit)."""
    return contextlib.nullcontext() if seconds is None else _WATCHDOG.limit(seconds, stage, document)
