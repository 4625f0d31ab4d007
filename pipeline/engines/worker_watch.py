"""What a local Dask cluster's workers held, and faults put into it: `local_cluster --engine dask`'s watcher.

Each `dask worker` command is a nanny process whose child is the worker (and the worker's children: the
extraction process). The watcher reads every such process's peak resident memory (VmHWM, which the kernel keeps
between samples) from /proc, per worker name and across restarts, and can SIGKILL a worker process at given times,
as a node lost mid-run: its nanny starts a new one and the scheduler recomputes what the dead one held.
"""
from __future__ import annotations

import glob
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

POLL_S = 0.25
MEMORY_KILL_LINE = "exceeded 95% memory budget"  # what a nanny logs when it kills its worker for memory


@dataclass
class WorkerMemory:
    peak_rss_bytes: int = 0           # the worker process (what Dask's memory_limit caps)
    children_peak_rss_bytes: int = 0  # its children (the extraction process), each on its own
    pids: set[int] = field(default_factory=set)  # worker processes seen: a restart adds one


def _children(pid: int) -> list[int]:
    """Child processes of `pid` (each thread's: a nanny starts its worker from another thread), but multiprocessing's
    resource tracker (a nanny starts one beside its worker)."""
    pids = []
    try:
        for thread in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{thread}/children", encoding="ascii") as fh:
                pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    return [p for p in pids if b"resource_tracker" not in _cmdline(p)]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _peak_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class WorkerWatch(threading.Thread):
    """Polls the workers' memory until `stop()`; kills worker `victim`'s process `kill_after` seconds (each) after
    `start()`, and the scheduler (`scheduler`, a PID) once a file matches `kill_scheduler_on` (a glob)."""

    def __init__(self, nannies: Mapping[str, int], kill_after: Sequence[float] = (), victim: str | None = None,
                 scheduler: int | None = None, kill_scheduler_on: str | None = None):
        super().__init__(daemon=True)
        self.nannies = dict(nannies)
        self.memory = {name: WorkerMemory() for name in nannies}
        self.kill_after, self.victim = sorted(kill_after), victim or next(iter(nannies), None)
        self.scheduler, self.kill_scheduler_on = scheduler, kill_scheduler_on
        self.kills: list[dict] = []
        self._stopped = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        pending = list(self.kill_after)
        scheduler_pending = bool(self.kill_scheduler_on) and self.scheduler is not None
        while not self._stopped.is_set():
            self._sample()
            now = time.monotonic() - started
            if pending and now >= pending[0]:
                self._kill(pending.pop(0), now)
            if scheduler_pending and glob.glob(self.kill_scheduler_on):
                scheduler_pending = False
                self._kill_scheduler(now)
            self._stopped.wait(POLL_S)
        self._sample()

    def _kill_scheduler(self, at: float) -> None:
        try:
            os.kill(self.scheduler, signal.SIGKILL)
            pids = [self.scheduler]
        except ProcessLookupError:
            pids = []
        self.kills.append({"worker": "scheduler", "on": self.kill_scheduler_on, "at_s": round(at, 1), "pids": pids})

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=10)

    def _sample(self) -> None:
        for name, nanny in self.nannies.items():
            memory = self.memory[name]
            for worker in _children(nanny):
                memory.pids.add(worker)
                memory.peak_rss_bytes = max(memory.peak_rss_bytes, _peak_rss(worker))
                for child in _children(worker):
                    memory.children_peak_rss_bytes = max(memory.children_peak_rss_bytes, _peak_rss(child))

    def _kill(self, planned: float, at: float) -> None:
        workers = _children(self.nannies[self.victim]) if self.victim else []
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        self.kills.append({"worker": self.victim, "planned_s": planned, "at_s": round(at, 1), "pids": workers})

    def summary(self, memory_limit_bytes: int | None, logs: Mapping[str, str]) -> dict:
        """Per worker: peak memory, incarnations, the nanny's memory kills (from its log); the kills made here."""
        workers = {}
        for name, memory in self.memory.items():
            try:
                with open(logs[name], encoding="utf-8", errors="replace") as fh:
                    memory_kills = fh.read().count(MEMORY_KILL_LINE)
            except (OSError, KeyError):
                memory_kills = None
            workers[name] = {"peak_rss_mb": round(memory.peak_rss_bytes / 2**20),
                             "children_peak_rss_mb": round(memory.children_peak_rss_bytes / 2**20),
                             "processes": len(memory.pids), "memory_kills": memory_kills}
        peak = max((m.peak_rss_bytes for m in self.memory.values()), default=0)
        return {"memory_limit_mb": memory_limit_bytes and round(memory_limit_bytes / 2**20),
                "peak_rss_mb": round(peak / 2**20),
                "over_limit": bool(memory_limit_bytes and peak > memory_limit_bytes),
                "workers": workers, "kills": self.kills}
