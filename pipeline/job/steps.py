"""The job's steps, from the stage table: per-document stages as `Step`s for the stage runner, global
stages as the transforms phase 2 runs (dedup over signatures, decontamination with its index loaded,
stages that edit parts, the mix), the write check last; and the pre-flight check of every enabled stage."""
from __future__ import annotations

import collections
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pipeline.job.config import TABLE, ConfigError, RunConfig
from pipeline.job.dedup import ExactDedup, NearDedup
from pipeline.job.finish import FinishPart, WritePart
from pipeline.job.grouped import GroupedGlobal
from pipeline.job.inputs import source_groups
from pipeline.job.mix import STAGE as MIX_STAGE
from pipeline.job.mix import Anneal, Mix, Rehydration
from pipeline.job.part_hooks import PartEdit
from pipeline.job.prepare import PrepareFile, in_phase1, phase1_digest
from pipeline.job.readers import FileReader
from pipeline.job.robots import STAGE as ROBOTS_STAGE
from pipeline.job.robots import RobotsOptOut, robots_files
from pipeline.job.schema import OutputCheck
from pipeline.job.signatures import DedupAgainst, earlier_signature_files
from stages.decontam import DecontaminationIndex, Decontaminator, read_benchmarks
from stages.dedup import DEDUP_AGAINST
from stages.grouped import GroupedStage
from stages.mix import parse_rehydration, parse_weights
from stages.paragraphs import STAGE as PARAGRAPH_STAGE
from stages.runner import Step
from stages.table import DOCUMENT, EXTRACT, GLOBAL, WRITE, StageSpec

WRITE_STAGE = next(spec.name for spec in TABLE if spec.runs == WRITE)
TABLE_BY_NAME = {spec.name: spec for spec in TABLE}
# Global stages that edit parts (pipeline/job/part_hooks.py): stage name -> "module:class" of its PartEdit, built from
# the run config (imported when the stage is on).
PART_EDITS = {
    PARAGRAPH_STAGE: "pipeline.job.paragraphs:ParagraphDedup",
}


def enabled_stages(config: RunConfig) -> list[StageSpec]:
    return [spec for spec in TABLE if spec.is_enabled(config)]


def preflight(config: RunConfig) -> None:
    """Everything every worker will need, checked once here by each enabled stage: models load,
    language codes exist, the extractor runs, optional decoders are installed. A failure is one
    error line, before any work."""
    names = {name for name, _ in source_groups(config)}
    if config.thresholds:  # also sections of stages that are off, or that no stage has (a typo)
        from stages.thresholds import check_sections

        check_sections(config.thresholds, frozenset(s.section for s in TABLE if s.section),
                       frozenset(s.section for s in TABLE if s.section and getattr(s.build, "per_language", False)))
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
        return Step(Decontaminator(index, c), timeout_s=config.stage_timeout_s)
    if spec.name in PART_EDITS:
        module, _, name = PART_EDITS[spec.name].partition(":")
        return getattr(importlib.import_module(module), name)(config)
    if spec.name == MIX_STAGE:
        return Mix(parse_weights(config.mix), config.seed, config.mix_max_epochs)
    made = spec.make(config) if spec.build is not None else None
    if isinstance(made, GroupedStage):  # a stage that decides within groups (stages/grouped.py)
        return GroupedGlobal(spec.name, made, spec.reasons)
    raise ConfigError(f"stage {spec.name}: runs over all documents, but its build gives no GroupedStage and the "
                      "pipeline has no transform for it")


def document_step(spec: StageSpec, config: RunConfig, fail_urls: tuple[str, ...] = ()) -> Step:
    """The Step of a per-document stage (extraction or a document stage) with this run's settings."""
    return Step(spec.make(config), fail_urls=fail_urls, sources=frozenset(getattr(spec.settings(config), "sources", ())),
                html_only=spec.runs == EXTRACT, timeout_s=config.stage_timeout_s)


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
            steps.append((spec.name, document_step(spec, config, tuple(faults.get(spec.name, ())))))
        elif spec.runs == GLOBAL:
            step = _global_step(spec, config, {} if facts is None else facts)
            after = [name for name, done in steps
                     if isinstance(done, (Step, PartEdit)) and not in_phase1(TABLE_BY_NAME[name])]
            if isinstance(step, GroupedGlobal) and after:  # its decisions reach the parts before those stages run
                raise ConfigError(f"stage {spec.name} decides within groups of signatures, so it runs before the "
                                  f"per-document stages of phase 2; its order ({spec.order}) is after "
                                  f"{', '.join(after)}'s")
            steps.append((spec.name, step))
        elif spec.runs == WRITE:  # the last check before a shard
            steps.append((spec.name, Step(OutputCheck())))
    unknown = set(faults) - set(per_document)
    if unknown:
        raise ConfigError(f"--inject-error: no per-document stage named {sorted(unknown)} in this run "
                          f"(stages: {', '.join(per_document)})")
    return steps


def file_reader(config: RunConfig, source: str, root: str) -> FileReader:
    """The reader of one source's files with this run's settings (--sample-fraction included)."""
    return FileReader(source, config.warc, config.text, config.extract.max_html_bytes, root, config.sample_fraction)


def phase1_task(config: RunConfig, root: str, facts: dict[str, Any] | None = None,
                run_id: str = "") -> tuple[PrepareFile, list]:
    """Phase 1's task for this run's settings and its steps: the job runs it over each input file, `refinery
    plan` over a sample, a Slurm array task over its share of the files (after `setup()`)."""
    phase1 = make_steps(config, facts, phase=1)
    readers = {name: file_reader(config, name, root) for name, _ in source_groups(config)}
    paragraphs = config.paragraph_dedup if config.paragraph_dedup.enabled else None
    return PrepareFile(config.output, readers, phase1, root, phase1_digest(config), config.dedup,
                       config.ledger_snippet_chars, run_id, paragraphs), phase1


class Phase2Tasks(NamedTuple):
    """Phase 2's two tasks for a run, and the mix and anneal split they apply (whose side inputs the
    scheduler computes: rates from every part's finished tokens, the anneal split's totals)."""

    finish: FinishPart
    write: WritePart
    mix: Mix | None
    anneal: Anneal | None


def phase2_tasks(config: RunConfig, steps: Sequence[tuple[str, Any]], file_index: Mapping[str, int],
                 deduplicated: bool) -> Phase2Tasks:
    """FinishPart over phase 2's per-document steps of `steps` (`make_steps(config, phase=2)`: decontamination and
    the steps of stages that edit parts included; the transforms over signatures are the scheduler's), WritePart with the mix
    and the write check; `file_index` numbers each part's shards, `deduplicated`: cluster sizes will be known."""
    per_document = [(name, step.step if isinstance(step, PartEdit) else step) for name, step in steps
                    if isinstance(step, (Step, PartEdit)) and name != WRITE_STAGE]
    mix = next((step for _, step in steps if isinstance(step, Mix)), None)
    write_check = next((step for name, step in steps if name == WRITE_STAGE), None)
    c = config
    rehydrate = Rehydration(parse_rehydration(c.rehydrate_weights), c.mix_max_epochs) if c.rehydrate else None
    anneal = Anneal(c.anneal_fraction, c.anneal_min_quality, c.seed, c.anneal_max_page_share,
                    c.anneal_max_site_share, c.anneal_max_language_excess) if c.anneal_fraction else None
    finish = FinishPart(c.output, per_document, bool(mix or c.anneal_fraction), c.ledger_snippet_chars, deduplicated,
                        rehydrate, {name: step.hook() for name, step in steps if isinstance(step, PartEdit)})
    write = WritePart(c.output, file_index, write_check, mix, c.holdout_fraction, anneal, c.shard_size_mb,
                      c.row_group_rows, rehydrate)
    return Phase2Tasks(finish, write, mix, anneal)
