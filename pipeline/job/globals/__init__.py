"""Global stages in the job: stages that need more than one document at a time (dedup, robots.txt, paragraph dedup,
decontamination, the mix, and any stage deciding within groups). Each is one module here with a `GlobalStage`
(base.py), named by its spec's `job`; the job's graph, tasks and report ask every global stage the same questions
and name none of them."""
from __future__ import annotations

import importlib
from typing import Any

from pipeline.job.globals.base import GlobalStage

GROUPED = "pipeline.job.globals.grouped:Grouped"  # a spec without `job`: its build gives a GroupedStage


def stage_class(spec) -> type[GlobalStage]:
    """The GlobalStage class of a global stage's spec (`job`: "module:Class", or the class)."""
    job = spec.job or GROUPED
    if not isinstance(job, str):
        return job
    module, _, name = job.partition(":")
    return getattr(importlib.import_module(module), name)


def build(spec, config, facts: dict[str, Any]) -> GlobalStage:
    """The stage with this run's settings; what it loads is added to `facts` (the report's)."""
    return stage_class(spec)(spec, config, facts)
