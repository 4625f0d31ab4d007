"""What the job asks of a global stage, each question optional (a stage answers the ones it needs):

- `decide(flow)`: its decision over the signature records of every part (pipeline/job/signed.py), the only part
  that builds Beam transforms: it takes `flow.signed` (packed records of the documents still in), sets it to those
  it keeps and returns a PCollection of Decisions for those it drops. A stage that decides runs before every
  per-document step of phase 2.
- `step`: its per-document step in phase 2 (stages/runner.py's Step), run by FinishPart in the table's order.
- `part_edit`: what it counts over all parts and hooks into each part's finishing (pipeline/job/part_hooks.py).
- `writes`: what it applies while each part's shards are written (the mix).
- `preflight(config)`, `report(config, counters, report)` and `problems(config, report)`: its check before any
  work (one clear error), its sections of report.json (or what it adds to one), and why the output must not be
  published (class methods: the checks and the report need no built stage).

What phase 1 records for the global stages (signatures, paragraph hashes) is the prepared part's
(pipeline/job/prepare.py, settings in the phase-1 digest); `Grouped` (grouped.py) is the shared grouping
of records by a key, for stages written in plain Python (stages/grouped.py)."""
from __future__ import annotations

from typing import Any


class Flow:
    """What the deciding stages pass along in phase 2: the part keys, the records still in (`signed`), and the
    records as they entered the first dedup stage (`entering`, set by it: near dedup bands every record that
    entered exact dedup)."""

    def __init__(self, signed, keys):
        self.signed, self.keys, self.entering = signed, keys, None


class GlobalStage:
    step = None           # its per-document Step in phase 2, or None
    edits_text = False    # its step cuts text from documents it keeps: the run writes the edit book
    deduplicates = False  # it drops copies for a kept document: cluster sizes are counted, the ledger names the
    #                       kept copy (one round of resolving kept copies per such stage)
    reads_site = False    # its decision reads the records' `site` and `lang`, which are filled only then (they
    #                       add ~25 B to each record every dedup grouping holds)

    def __init__(self, spec, config, facts: dict[str, Any]):
        self.spec, self.name, self.config = spec, spec.name, config

    def decide(self, flow: Flow):
        return None

    def part_edit(self):
        return None

    def writes(self):
        return None

    @classmethod
    def preflight(cls, config) -> None:
        pass

    @classmethod
    def report(cls, config, counters: dict[str, int] | None, report: dict[str, Any]) -> dict[str, Any]:
        return {}

    @classmethod
    def problems(cls, config, report: dict[str, Any]) -> list[str]:
        return []


class PartEditing(GlobalStage):
    """A global stage that edits parts: its `edit` (a PartEdit class, pipeline/job/part_hooks.py, built from the run
    config) gives its step and what it hooks into each part."""

    edit: type
    edits_text = True

    def __init__(self, spec, config, facts: dict[str, Any]):
        super().__init__(spec, config, facts)
        self._edit = self.edit(config)
        self.step = self._edit.step

    def part_edit(self):
        return self._edit


def decides(stage: GlobalStage) -> bool:
    return type(stage).decide is not GlobalStage.decide
