"""Shared by the bench scripts (run as `python bench/NAME.py`, so this folder is on sys.path)."""
import statistics
import time


def median_time(fn, repeat=3):
    """(median seconds over `repeat` runs, result of the last run)."""
    runs, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), result
