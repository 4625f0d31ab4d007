"""Global stages that change the documents they keep, part by part (paragraph dedup cuts repeated paragraphs): what
the job asks of such a stage, so that the job's graph, its tasks and their Beam adapters name none of them. Its
GlobalStage (pipeline/job/globals/) gives it as `part_edit()`; pipeline/job/globals/paragraphs.py is the example.

Phase 2 runs it in three places:
- `counts(decided_by_part, file_index)`: a Beam transform over (part key, [Decision]) of every part (what document
  dedup dropped) -> (per part: (part key, value) pairs, each joined to its part; side: one value every part sees);
- in FinishPart, `step` with the other per-document stages (in the stage table's order), and the part hook of
  `hook()`: `begin(inputs)` before the part's documents pass, with (the values joined to the part, the side value);
  `see(doc, row)` for each document that reaches the stages (its prepared row holds what phase 1 stored for the
  stage); `end()` what it emits once the part is done, under the tags of `outputs`;
- `report(emitted, side)`: writes what it reports from what the hooks emitted ({tag: PCollection}) and the side value.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipeline.job.finish import Output
from stages.record import Document
from stages.runner import Step


class PartHook:
    def begin(self, inputs: Any) -> None:
        pass

    def see(self, doc: Document, row: dict[str, Any]) -> None:
        pass

    def end(self) -> Iterator[Output]:
        return iter(())


class PartEdit:
    """The job's side of a global stage that edits parts (see the module's docstring)."""

    name = ""
    outputs: tuple[str, ...] = ()  # tags of what its hooks emit
    step: Step

    def hook(self) -> PartHook:
        return PartHook()

    def counts(self, decided_by_part, file_index: dict[str, int]):
        raise NotImplementedError

    def report(self, emitted: dict[str, Any], side) -> None:
        pass
