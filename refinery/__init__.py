"""Refinery's Python API and the surface a stage package builds on; nothing else is supported for use from
outside. Names are imported when first used, so a stage package that takes `Stage` and `StageSpec` does not
load Beam.

Run a job and read it (README "Python API"; pipeline/api.py): `run`, `apply`, `open_run`, `Run`, `RunResult`,
`RunError`, `RunConfig`, `load_config`.
Write a stage or an input format (docs/stages.md "Stages from other packages"): `Document`, `Drop`, `DropReason`,
`Stage`, `RuleStage` with its verdict helpers `over` and `under`, `StageSpec` with the places a stage runs
(`DOCUMENT`, `EXTRACT`, `GLOBAL`), `InputFormat`, `ReadSettings`; a global stage in plain Python deciding within
groups of documents: `GroupedStage`, `GroupDrop`, `best_first`; one with Beam transforms of its own: `GlobalStage`
(pipeline/job/globals/base.py) with `Flow`, and `PartEditing`, `PartEdit`, `PartHook` for one that edits parts.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "pipeline.api": ("Run", "RunError", "RunResult", "apply", "open_run", "run"),
    "pipeline.job.config": ("RunConfig", "load_config"),
    "stages.record": ("Document", "Drop", "DropReason", "RuleStage", "Stage", "over", "under"),
    "stages.table": ("DOCUMENT", "EXTRACT", "GLOBAL", "InputFormat", "StageSpec"),
    "stages.formats": ("ReadSettings",),
    "stages.grouped": ("GroupDrop", "GroupedStage", "best_first"),
    "pipeline.job.globals.base": ("Flow", "GlobalStage", "PartEditing"),
    "pipeline.job.part_hooks": ("PartEdit", "PartHook"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'refinery' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return __all__
