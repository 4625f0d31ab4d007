"""What a run cost, measured by the run itself (report.json's `resources`), and set against what
`refinery plan` predicted for it (report.json's `plan`, when the run was given `--plan PLAN.json`)."""
from __future__ import annotations

import resource
from typing import Any


class ResourceUsage:
    """CPU and peak memory of this process and its children from now on: `refinery run` measures itself so
    (also when called in a process that ran other work before, e.g. a notebook or a test session)."""

    def __init__(self):
        _reset_peak_memory()
        self._cpu = self._cpu_now()

    @staticmethod
    def _cpu_now() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    def measured(self) -> dict[str, Any]:
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        return {"cpu_hours": round((self._cpu_now() - self._cpu) / 3600, 5),
                "peak_memory_bytes": max(_peak_memory(), children),
                "note": "CPU of the run's process and its ended children (extraction worker, local workers); peak "
                        "memory: the largest of them"}


def _reset_peak_memory() -> None:
    try:  # Linux: "5" resets the process's peak resident set size (VmHWM)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _peak_memory() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def read_plan(plan_path: str) -> dict[str, Any]:
    """The whole-input prediction of a `refinery plan --save` file; ValueError in one line for a file that is not
    one (checked before the run starts: a run must not end in an error over its report)."""
    from stages.formats import parse_json

    try:
        with open(plan_path, encoding="utf-8") as fh:
            predicted = parse_json(fh.read())["input"]
        return {"cpu_hours": float(predicted["cpu_hours"]),
                "peak_memory_bytes": float(predicted["peak_memory_per_worker_bytes"]["phase2_one_local_process"]),
                "prepared_bytes": float(predicted["prepared_bytes"]),
                "output_bytes": float(predicted["output_bytes_at_most"]), "records": float(predicted["records"])}
    except OSError as exc:
        raise ValueError(f"--plan {plan_path}: {exc.strerror.lower() if exc.strerror else exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--plan {plan_path} is not a `refinery plan --save` file ({type(exc).__name__}: "
                         f"{exc})") from None


def compare(plan_path: str, measured: dict[str, Any]) -> dict[str, Any]:
    """report.json's `plan`: the whole-input prediction next to what the run measured, and their ratios."""
    try:
        pairs = read_plan(plan_path)
    except ValueError as exc:
        return {"error": str(exc)}
    return {"file": plan_path, "predicted": pairs, "measured": measured,
            "measured_over_predicted": {k: round(measured[k] / v, 3) if v and measured.get(k) is not None else None
                                        for k, v in pairs.items()}}
