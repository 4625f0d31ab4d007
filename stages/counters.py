"""The names of the job's counters, spelled once: the stage runner counts with them, the job's readers and
global stages count with them (pipeline/counters.py), and the report and progress display read them back.

    <stage>.in            documents entering a stage
    <stage>.kept          documents leaving it towards the output
    <stage>.kept_tokens   their tokens (UTF-8 bytes / 4)
    <stage>.drop.<reason> documents sent to the ledger
    <stage>.note.<name>   anything else a stage counts (a rule skipped for a language, a cluster size)
    <stage>.time_us       (a distribution) microseconds per document
"""
from __future__ import annotations

from collections.abc import Mapping

DROP, NOTE = ".drop.", ".note."


def entered(stage: str) -> str:
    return f"{stage}.in"


def kept(stage: str) -> str:
    return f"{stage}.kept"


def kept_tokens(stage: str) -> str:
    return f"{stage}.kept_tokens"


def dropped(stage: str, reason: str) -> str:
    return f"{stage}{DROP}{reason}"


def note(stage: str, name: str) -> str:
    return f"{stage}{NOTE}{name}"


def time_us(stage: str) -> str:
    return f"{stage}.time_us"


def drops_of(counters: Mapping[str, int], stage: str) -> dict[str, int]:
    """{reason: count} of `stage`'s drop counters."""
    prefix = f"{stage}{DROP}"
    return {k[len(prefix):]: v for k, v in counters.items() if k.startswith(prefix)}


def notes_of(counters: Mapping[str, int], stage: str, under: str = "") -> dict[str, int]:
    """{name: count} of `stage`'s notes (only those whose name starts with `under`, which is cut off)."""
    prefix = f"{stage}{NOTE}{under}"
    return {k[len(prefix):]: v for k, v in counters.items() if k.startswith(prefix)}
