"""The names of the job's counters, spelled once: the stage runner counts with them, the job's readers and
global stages count with them (pipeline/counters.py), and the report and progress display read them back.

    <stage>.in            documents entering a stage
    <stage>.kept          documents leaving it towards the output
    <stage>.kept_tokens   their tokens (UTF-8 bytes / 4)
    <stage>.drop.<reason> documents sent to the ledger
    <stage>.note.<name>   anything else a stage counts (a rule skipped for a language, a cluster size)
    <stage>.time_us       (a distribution) microseconds per document

and the job's own (below): bytes read, records per source, the holdout's and the anneal split's rows, the
rehydration's repeats, the connected-components rounds of near dedup.
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


# The job's own counters, besides the stages'
BYTES_READ = "read.bytes"                 # compressed input bytes the readers consumed (progress, its ETA)
HOLDOUT_VALID = "holdout.valid"           # documents written to valid/ (their tokens: HOLDOUT_VALID_TOKENS)
HOLDOUT_VALID_TOKENS = "holdout.valid_tokens"
ANNEAL_ROWS = "anneal.rows"               # documents written to anneal/
REHYDRATE_REPEATS = "rehydrate.repeats"   # copies the rehydration added


def source_records(source: str) -> str:
    """Records a source's files held (file-level read errors aside)."""
    return f"source_records.{source}"


def cc_round(stage: str, round_name: str, what: str) -> str:
    """A connected-components round's count (`what`: edges it took in, large/small: it changed something, settled)."""
    return f"{stage}.cc.{round_name}.{what}"


def of_reader(stage: str, name: str) -> str:
    """A count a reader of records names itself (`record.<type>`, `note.<name>`), under its read stage."""
    return f"{stage}.{name}"
