"""Live progress of a `refinery run`: bytes of input read (of the total, with rate and ETA) and documents
done per stage (of the documents read so far), as tqdm bars on a terminal or a plain line every few
seconds in a log.

Three sources, one display. In-process runs (FnApiRunner, one worker or threads) report from the DoFns
into this process's `Tally`: display only, never read back into results. Runners whose workers live
elsewhere (portable, Dataflow, Flink, Spark) are polled through the PipelineResult's Beam metrics
(attempted counters: `<stage>.in`, `warc.bytes_read`), and where those say nothing yet (a job service
reports them at the end; local worker processes report none while the job runs), through the phase-1
markers written so far (`pipeline.job.prepare.MarkerCounts`).
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from stages.extraction.warc import STAGE as WARC_STAGE
from stages.textsource import STAGE as TEXT_STAGE

BYTES_READ = "read.bytes"  # counter: compressed input bytes consumed by the readers
DOCUMENT_READERS = (WARC_STAGE, TEXT_STAGE)  # the read stages whose `.in` are documents (WARC and text records)


def documents_read(counts: Mapping[str, int]) -> int:
    """Documents read so far, from every reader: the total each later stage works through."""
    return sum(counts.get(f"{stage}.in", 0) for stage in DOCUMENT_READERS)


class Tally:
    """Counts of this process, written by DoFns when a local run switched them on."""

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


def progress_line(counts: Mapping[str, int], before: Mapping[str, int], seconds: float, stages: Sequence[str],
                  total_bytes: int) -> str:
    """One line: input bytes read (share, rate), documents done per stage of those read so far (rate over
    the last `seconds`), and an ETA from the first stage still behind the reader (the bottleneck)."""
    seconds = max(seconds, 1e-9)
    done = counts.get(BYTES_READ, 0)
    byte_rate = (done - before.get(BYTES_READ, 0)) / seconds
    parts = [f"read {done / 1e6:.1f}/{total_bytes / 1e6:.1f} MB ({100 * done / max(total_bytes, 1):.0f}%, "
             f"{byte_rate / 1e6:.2f} MB/s)"]
    eta = (total_bytes - done) / byte_rate if byte_rate > 0 and done < total_bytes else None
    read = documents_read(counts)
    for stage in stages:
        n = counts.get(f"{stage}.in", 0)
        if not n:
            continue
        rate = (n - before.get(f"{stage}.in", 0)) / seconds
        reader = stage in DOCUMENT_READERS
        parts.append(f"{stage} {n:,}" + (f"/{read:,}" if not reader and read else "") + f" ({rate:.0f}/s)")
        if eta is None and not reader and n < read and rate > 0:
            eta = (read - n) / rate  # documents not yet through this stage, at its current rate
    return "[refinery] " + " · ".join(parts) + (f" · ETA {_eta(eta)}" if eta is not None else "")


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
        self._before: Mapping[str, int] = {}
        self._last = self._started = time.monotonic()

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
            now = time.monotonic()
            if not any(counts.values()):  # e.g. a portable job service reports metrics only at the end
                print(f"[refinery] job running for {_eta(now - self._started)} ({self.nothing_yet})",
                      file=self.stream, flush=True)
            elif self.tty:
                self._draw_bars(counts)
            else:
                print(progress_line(counts, self._before, now - self._last, self.stages, self.total_bytes),
                      file=self.stream, flush=True)
            self._before, self._last = counts, now

    def _draw_bars(self, counts: Mapping[str, int]) -> None:
        from tqdm import tqdm

        read = documents_read(counts)
        wanted = [("read", BYTES_READ, self.total_bytes)] + [(s, f"{s}.in", None if s in DOCUMENT_READERS else read or None)
                                                             for s in self.stages]
        for position, (label, key, total) in enumerate(wanted):
            value = counts.get(key, 0)
            if label != "read" and not value:
                continue
            bar = self._bars.get(label)
            if bar is None:
                bar = self._bars[label] = tqdm(
                    total=total, desc=f"{label:<18}", position=position, file=self.stream, leave=True,
                    unit="B" if label == "read" else " docs", unit_scale=label == "read", dynamic_ncols=True)
            if total and label != "read":
                bar.total = max(total, value)
            bar.update(value - bar.n)
