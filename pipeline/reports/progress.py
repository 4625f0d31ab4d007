"""Live progress of a `refinery run`: bytes of input read (of the total, with rate and ETA) and documents
done per stage (of the documents read so far), as tqdm bars on a terminal or a plain line every few
seconds in a log.

Three sources, one display. In-process runs (FnApiRunner, one worker or threads) report from the DoFns
into this process's `Tally`: display only, never read back into results. Runners whose workers live
elsewhere (portable, Dataflow, Flink, Spark) are polled through the PipelineResult's Beam metrics
(attempted counters: `<stage>.in`, `warc.bytes_read`), and where those say nothing yet (a job service
reports them at the end; local worker processes report none while the job runs), through the phase-1
markers written so far (`pipeline.job.parts.MarkerCounts`).
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from pipeline.counters import BYTES_READ, entered
from stages.table import format_table

DOCUMENT_READERS = tuple(dict.fromkeys(f.stage for f in format_table()))  # the read stages whose `.in` are documents


def documents_read(counts: Mapping[str, int]) -> int:
    """Documents read so far, from every reader: the total each later stage works through."""
    return sum(counts.get(entered(stage), 0) for stage in DOCUMENT_READERS)


def runner_or_markers(runner_poll: Callable[[], Mapping[str, int]], markers: Callable[[], Mapping[str, int]]):
    """The runner's counts while it reports any, else the markers'."""
    def poll() -> Mapping[str, int]:
        counts = runner_poll()
        return counts if any(counts.values()) else markers()
    return poll


@contextlib.contextmanager
def workers_logging_aside():
    """Local worker processes (Beam's multi-processing mode) inherit this process's stderr and log ~50 lines
    of INFO there; while the job runs, file descriptor 2 goes to a temporary log, and the progress display
    writes to the real stderr (yielded). The log is kept, and named, only when the job fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    log = tempfile.NamedTemporaryFile(prefix="refinery-workers-", suffix=".log", delete=False)
    os.dup2(log.fileno(), 2)
    stream = os.fdopen(os.dup(saved), "w", buffering=1)
    failed = True
    try:
        yield stream
        failed = False
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        stream.close()
        log.close()
        if failed:
            print(f"[refinery] the local workers' log: {log.name}", file=sys.stderr)
        else:
            os.unlink(log.name)


def _eta(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"


# The estimate needs this much evidence: input bytes are read in bursts (a file's head, then its pages as they are
# processed), so an estimate from the first seconds, or from the last few seconds' rate, said "2 s" with minutes left.
MIN_SHARE, MIN_SECONDS = 0.02, 10.0


def estimate(done: int, total: int, elapsed: float) -> str:
    """When reading the input ends, from the bytes read since the job started (the average, never a recent rate),
    or why there is no estimate. Phase 2 (dedup, shards) comes after reading and has none."""
    if total <= 0:
        return "no estimate (the input's size is unknown)"
    if done >= total:
        return "input read; no estimate for the rest"
    if done <= 0 or elapsed < MIN_SECONDS or done < MIN_SHARE * total:
        return "no estimate yet"
    return f"reading ETA {_eta((total - done) * elapsed / done)}"


def progress_line(counts: Mapping[str, int], elapsed: float, stages: Sequence[str], total_bytes: int) -> str:
    """One line: input bytes read (share, average rate since the start), documents through each stage (of those
    read, once every input byte is read), and `estimate`."""
    done = counts.get(BYTES_READ, 0)
    parts = [f"read {done / 1e6:.1f}/{total_bytes / 1e6:.1f} MB ({100 * done / max(total_bytes, 1):.0f}%, "
             f"{done / max(elapsed, 1e-9) / 1e6:.2f} MB/s)"]
    read, all_read = documents_read(counts), done >= total_bytes > 0
    for stage in stages:
        n = counts.get(entered(stage), 0)
        if n:
            parts.append(f"{stage} {n:,}" + (f"/{read:,}" if all_read and stage not in DOCUMENT_READERS else ""))
    return "[refinery] " + " · ".join(parts) + " · " + estimate(done, total_bytes, elapsed)


class Display:
    """A thread that shows progress every `every_s` seconds until stopped: tqdm bars on a terminal,
    plain lines otherwise. `poll()` returns the current counts (the local Tally, or runner metrics)."""

    def __init__(self, poll: Callable[[], Mapping[str, int]], stages: Sequence[str], total_bytes: int,
                 every_s: float | None = None, stream=None, nothing_yet: str = "the runner has reported no progress "
                 "metrics yet"):
        self.poll, self.stages, self.total_bytes, self.nothing_yet = poll, list(stages), total_bytes, nothing_yet
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every_s = every_s if every_s is not None else (1.0 if self.tty else 10.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="refinery-progress", daemon=True)
        self._bars: dict[str, object] = {}
        self._started = time.monotonic()

    def __enter__(self):
        if self.every_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._bars:  # the bars end where the job ended, not at the last poll (a read bar left at 0 %)
            try:
                self._draw_bars(self.poll())
            except Exception:  # noqa: BLE001 - display only
                pass
        for bar in self._bars.values():
            bar.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                counts = self.poll()
            except Exception:  # a runner that cannot report metrics yet: try again next time
                continue
            elapsed = time.monotonic() - self._started
            if not any(counts.values()):  # e.g. a portable job service reports metrics only at the end
                print(f"[refinery] job running for {_eta(elapsed)} ({self.nothing_yet}; no estimate yet)",
                      file=self.stream, flush=True)
            elif self.tty:
                self._draw_bars(counts)
            else:
                print(progress_line(counts, elapsed, self.stages, self.total_bytes), file=self.stream, flush=True)

    def _draw_bars(self, counts: Mapping[str, int]) -> None:
        """The read bar against the input's size, with `estimate` (not tqdm's, from a recent rate); each stage a
        count with its average rate: a share of the documents read so far would show 100 % while reading goes on."""
        from tqdm import tqdm

        elapsed = time.monotonic() - self._started
        for position, (label, key) in enumerate([("read", BYTES_READ)] + [(s, entered(s)) for s in self.stages]):
            value = counts.get(key, 0)
            if label != "read" and not value:
                continue
            bar = self._bars.get(label)
            if bar is None:
                reading = label == "read"
                bar = self._bars[label] = tqdm(
                    total=self.total_bytes or None if reading else None, desc=f"{label:<18}", position=position,
                    file=self.stream, leave=True, unit="B" if reading else " docs", unit_scale=reading,
                    dynamic_ncols=True, smoothing=0,
                    bar_format="{desc}{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"
                    if reading and self.total_bytes else None)
            if label == "read":
                bar.set_postfix_str(estimate(value, self.total_bytes, elapsed), refresh=False)
            bar.update(value - bar.n)
