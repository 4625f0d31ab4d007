"""Global stages that decide within groups: the plain-Python form of a stage that needs more than one document
at a time (a cap per site, one copy per key), so such a stage is one module in `stages/` and its test.

The stage's spec says `runs=GLOBAL` (and no `job`: pipeline/job/globals/grouped.py runs it); its `build` returns an
object with two methods:

    group(record) -> str | None        the group of one document, from its signature record (fields `id`,
                                       `part`, `exact_key`, `quality`, `chars`, `tokens`, `site`: its host
                                       without "www.", `lang`); None: in no group
    decide(group, records) -> [GroupDrop]   the documents of one group to drop, each with its reason

The job groups the records by `group` (a GroupByKey: one group's records meet on one worker, so a group
must be small enough for one worker's memory), calls `decide` once per group, ledgers what it drops with
its url, language and snippet, and counts the stage in the funnel at its place. Such a stage runs before
the per-document stages of phase 2 (its order below paragraph dedup's and decontamination's).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from stages.dedup import survivor_rank


class GroupDrop(NamedTuple):
    id: str
    reason: str                 # one of the stage's declared reasons
    detail: str = ""
    kept_id: str | None = None  # the copy kept in its place, if the drop is a duplicate's


@runtime_checkable
class GroupedStage(Protocol):
    def group(self, record: Any) -> str | None: ...

    def decide(self, group: str, records: Sequence[Any]) -> Iterable[GroupDrop]: ...


def best_first(records: Sequence[Any]) -> list[Any]:
    """Records by the rank dedup keeps survivors by: highest quality, then longest text, then smallest id."""
    return sorted(records, key=lambda r: survivor_rank(r.quality, r.chars, r.id))
