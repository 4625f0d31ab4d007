"""Every count of the job goes through `count`: into Beam's metrics (namespace `refinery`, read back into
the report), the live tally of a local run's progress display, and the per-file capture phase 1 stores
with each prepared part (replayed when the part is reused). Names, the stages' and the job's own, are spelled
once, in stages/counters.py.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import math
import threading

from apache_beam.metrics import Metrics

from stages import counters as names
from stages.counters import (  # noqa: F401  (the names)
    ANNEAL_ROWS,
    BYTES_READ,
    HOLDOUT_VALID,
    HOLDOUT_VALID_TOKENS,
    REHYDRATE_REPEATS,
    cc_round,
    dropped,
    drops_of,
    entered,
    kept,
    kept_tokens,
    note,
    notes_of,
    of_reader,
    source_records,
)
from stages.mix import approx_tokens
from stages.record import Drop
from stages.runner import StageRunner, count_kept

NAMESPACE = "refinery"


class Tally:
    """Counts of this process, for a local run's live display (`on` only while it shows): never read back
    into results."""

    def __init__(self) -> None:
        self.on = False
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        if self.on:
            with self._lock:
                self.counts[name] = self.counts.get(name, 0) + n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)


TALLY = Tally()


@functools.lru_cache(maxsize=4096)
def _counter(name: str):
    """One Beam counter handle per name and process (it finds the running bundle's metrics itself; outside
    a bundle, as in a Slurm task or `refinery plan`, it counts nothing)."""
    return Metrics.counter(NAMESPACE, name)


_CAPTURE = threading.local()  # .counts: a Counter that also receives this thread's counts (capture_counts)


def count(name: str, n: int = 1) -> None:
    _counter(name).inc(n)
    TALLY.add(name, n)
    captured = getattr(_CAPTURE, "counts", None)
    if captured is not None:
        captured[name] += n


@contextlib.contextmanager
def capture_counts():
    """`with capture_counts() as counts:` the counts made by this thread inside the block, besides Beam's
    (phase 1 stores each input file's counts with its prepared part, to replay them when it is reused)."""
    outer = getattr(_CAPTURE, "counts", None)
    _CAPTURE.counts = counts = collections.Counter()
    try:
        yield counts
    finally:
        _CAPTURE.counts = outer
        if outer is not None:
            outer.update(counts)


@functools.lru_cache(maxsize=256)
def _distribution(name: str):
    return Metrics.distribution(NAMESPACE, name)


def record_time(stage: str, seconds: float, documents: int = 1) -> None:
    """Per-document time of `stage` (the report's time and throughput per stage), in whole microseconds rounded up:
    a stage faster than 1 µs a document (the opt-out verdict) was truncated to 0 and reported as taking no time."""
    per_document = math.ceil(seconds * 1e6 / max(documents, 1))
    dist = _distribution(names.time_us(stage))
    for _ in range(documents):
        dist.update(per_document)


def count_result(stage: str, result) -> None:
    """Count a record a reader made: a Drop by its reason, a document as kept (with its tokens)."""
    if isinstance(result, Drop):
        count(dropped(stage, result.label))
    else:
        count_kept(count, stage, approx_tokens(result.text) if result.text else 0)


def count_kept_tokens(stage: str, tokens: int) -> None:
    """A record that carries its token count instead of its text (dedup's signatures) leaving `stage`."""
    count_kept(count, stage, tokens)


def runner(steps) -> StageRunner:
    """A StageRunner that counts into the job's counters."""
    return StageRunner(steps, count=count, record_time=record_time)
