"""The job's steps, from the stage table: per-document stages as `Step`s for the stage runner, global
stages as the transforms phase 2 runs (dedup over signatures, decontamination with its index loaded,
the mix), the write check last; and the pre-flight check of every enabled stage."""
from __future__ import annotations

import collections
import os
import sys
from typing import Any

from pipeline.job.config import TABLE, ConfigError, RunConfig
from pipeline.job.dedup import ExactDedup, NearDedup
from pipeline.job.inputs import source_groups
from pipeline.job.mix import STAGE as MIX_STAGE
from pipeline.job.mix import Mix
from pipeline.job.prepare import in_phase1
from pipeline.job.robots import STAGE as ROBOTS_STAGE
from pipeline.job.robots import RobotsOptOut, robots_files
from pipeline.job.schema import OutputCheck
from pipeline.job.signatures import DedupAgainst, earlier_signature_files
from stages.decontam import DecontaminationIndex, Decontaminator, read_benchmarks
from stages.dedup import DEDUP_AGAINST
from stages.mix import parse_weights
from stages.paragraphs import STAGE as PARAGRAPH_STAGE
from stages.paragraphs import ParagraphCut
from stages.runner import Step
from stages.table import DOCUMENT, EXTRACT, GLOBAL, WRITE, StageSpec

WRITE_STAGE = next(spec.name for spec in TABLE if spec.runs == WRITE)


def enabled_stages(config: RunConfig) -> list[StageSpec]:
    return [spec for spec in TABLE if spec.is_enabled(config)]


def preflight(config: RunConfig) -> None:
    """Everything every worker will need, checked once here by each enabled stage: models load,
    language codes exist, the extractor runs, optional decoders are installed. A failure is one
    error line, before any work."""
    names = {name for name, _ in source_groups(config)}
    for spec in enabled_stages(config):
        unknown = sorted(set(getattr(spec.settings(config), "sources", ())) - names)
        if unknown:  # a typo would silently run the stage on nothing
            raise ConfigError(f"{spec.section}.sources: no source named {', '.join(map(repr, unknown))} in this run "
                              f"(sources: {', '.join(sorted(names))})")
        spec.preflight(config)
    if config.plan and not os.path.isfile(config.plan):
        raise ConfigError(f"--plan {config.plan}: no such file (write one with `refinery plan ... --save FILE`)")
    if config.dedup_against:
        own = os.path.abspath(config.output)
        if any(os.path.abspath(folder) == own for folder in config.dedup_against):
            raise ConfigError("--dedup-against names this run's own --output; give earlier runs' folders")
        earlier_signature_files(config)  # checks them
    if config.robots:
        robots_files(config.robots)  # each glob names captures


def _global_step(spec: StageSpec, config: RunConfig, facts: dict[str, Any]):
    """What the job runs for a stage that needs all documents at once (what it loaded goes into `facts`):
    dedup transforms over signatures, decontamination (a per-document stage with the index loaded here),
    the mix (applied while shards are written)."""
    if spec.name == DEDUP_AGAINST:
        return DedupAgainst(config.dedup_against, config.dedup)
    if spec.name == ROBOTS_STAGE:
        return RobotsOptOut(config.robots, config.output, config.optout)
    if spec.name == "exact_dedup":
        return ExactDedup()
    if spec.name == "near_dedup":
        return NearDedup(config.dedup)
    if spec.name == "decontaminate":
        c = config.decontam
        index = DecontaminationIndex(read_benchmarks(c.benchmarks), c.n, c.min_words)
        loaded = collections.Counter(item.benchmark for item in index.items)
        facts["decontamination"] = {b: {"items": n, "too_short": index.skipped.get(b, 0)} for b, n in sorted(loaded.items())}
        print("[refinery] decontamination: " + ", ".join(
            f"{b} {n:,} items" + (f" ({index.skipped[b]} too short to match)" if index.skipped.get(b) else "")
            for b, n in sorted(loaded.items())), file=sys.stderr)
        return Step(Decontaminator(index, c))
    if spec.name == PARAGRAPH_STAGE:  # the cut; its counting is wired by the job (pipeline/job/paragraphs.py)
        return Step(ParagraphCut(config.paragraph_dedup))
    if spec.name == MIX_STAGE:
        return Mix(parse_weights(config.mix), config.seed, config.mix_max_epochs)
    raise ConfigError(f"stage {spec.name}: runs over all documents, but the pipeline has no transform for it")


def make_steps(config: RunConfig, facts: dict[str, Any] | None = None, phase: int | None = None) -> list[tuple]:
    """(name, transform) of every enabled stage after reading (of one phase: 1, per input file, or 2),
    in the stage table's order: stages before extraction (on the URL: every document), extraction (HTML
    documents only), the rest; the last is the write check."""
    faults: dict[str, list[str]] = {}
    for spec in config.inject_errors:
        stage_name, _, url_part = spec.partition("=")
        faults.setdefault(stage_name, []).append(url_part)
    steps, per_document = [], []
    for spec in enabled_stages(config):
        if spec.runs in (EXTRACT, DOCUMENT):
            per_document.append(spec.name)
        if phase is not None and in_phase1(spec) != (phase == 1):
            continue
        if spec.runs in (EXTRACT, DOCUMENT):
            steps.append((spec.name, Step(spec.make(config), fail_urls=tuple(faults.get(spec.name, ())),
                                          sources=frozenset(getattr(spec.settings(config), "sources", ())),
                                          html_only=spec.runs == EXTRACT)))
        elif spec.runs == GLOBAL:
            steps.append((spec.name, _global_step(spec, config, {} if facts is None else facts)))
        elif spec.runs == WRITE:  # the last check before a shard
            steps.append((spec.name, Step(OutputCheck())))
    unknown = set(faults) - set(per_document)
    if unknown:
        raise ConfigError(f"--inject-error: no per-document stage named {sorted(unknown)} in this run "
                          f"(stages: {', '.join(per_document)})")
    return steps


