"""The job's steps, from the stage table: per-document stages as `Step`s for the stage runner, global
stages as their GlobalStage (pipeline/job/globals/: what phase 2 asks of each), the write check last; and
the pre-flight check of every enabled stage."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pipeline.job.config import TABLE, ConfigError, RunConfig
from pipeline.job.finish import FinishPart, WritePart
from pipeline.job.globals import build, stage_class
from pipeline.job.globals.base import GlobalStage, decides
from pipeline.job.inputs import source_groups
from pipeline.job.mix import Anneal, Mix, Rehydration
from pipeline.job.prepare import PrepareFile, in_phase1, phase1_digest
from pipeline.job.readers import FileReader
from pipeline.job.schema import OutputCheck
from stages.mix import parse_rehydration
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
        if spec.runs == GLOBAL:
            stage_class(spec).preflight(config)
    if config.plan and not os.path.isfile(config.plan):
        raise ConfigError(f"--plan {config.plan}: no such file (write one with `refinery plan ... --save FILE`)")


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
            stage = build(spec, config, {} if facts is None else facts)
            after = [name for name, done in steps if _document_step(done) is not None]
            if decides(stage) and after:  # its decisions reach the parts before those stages run
                raise ConfigError(f"stage {spec.name} decides over the signatures of all parts, so it runs before "
                                  f"the per-document stages of phase 2; its order ({spec.order}) is after "
                                  f"{', '.join(after)}'s")
            steps.append((spec.name, stage))
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


def _document_step(done) -> Step | None:
    """The per-document Step of one of make_steps' entries (a global stage's own, if it has one)."""
    return done.step if isinstance(done, GlobalStage) else done


def global_stages(steps: Sequence[tuple[str, Any]]) -> list[GlobalStage]:
    return [done for _, done in steps if isinstance(done, GlobalStage)]


def phase2_tasks(config: RunConfig, steps: Sequence[tuple[str, Any]], file_index: Mapping[str, int],
                 deduplicated: bool) -> Phase2Tasks:
    """FinishPart over phase 2's per-document steps of `steps` (`make_steps(config, phase=2)`: those of global stages
    included, in the table's order; their decisions over signatures are the scheduler's), WritePart with what a
    global stage applies while shards are written (the mix) and the write check; `file_index` numbers each part's
    shards, `deduplicated`: cluster sizes will be known."""
    per_document = [(name, _document_step(done)) for name, done in steps
                    if _document_step(done) is not None and name != WRITE_STAGE]
    stages = global_stages(steps)
    edits = [edit for edit in (stage.part_edit() for stage in stages) if edit is not None]
    mix = next((drawn for drawn in (stage.writes() for stage in stages) if drawn is not None), None)
    write_check = next((step for name, step in steps if name == WRITE_STAGE), None)
    c = config
    rehydrate = Rehydration(parse_rehydration(c.rehydrate_weights), c.mix_max_epochs) if c.rehydrate else None
    anneal = Anneal(c.anneal_fraction, c.anneal_min_quality, c.seed, c.anneal_max_page_share,
                    c.anneal_max_site_share, c.anneal_max_language_excess) if c.anneal_fraction else None
    finish = FinishPart(c.output, per_document, bool(mix or c.anneal_fraction), c.ledger_snippet_chars, deduplicated,
                        rehydrate, {edit.name: edit.hook() for edit in edits})
    write = WritePart(c.output, file_index, write_check, mix, c.holdout_fraction, anneal, c.shard_size_mb,
                      c.row_group_rows, rehydrate)
    return Phase2Tasks(finish, write, mix, anneal)
