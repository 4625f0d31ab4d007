"""The Beam graph of a run: phase 1 prepares each input file (pipeline/job/prepare.py); phase 2 runs the
global stages over signatures, finishes each part and writes its shards (pipeline/job/finish.py) and
the ledger. The tasks' Beam adapters are in pipeline/job/phases.py."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.job.config import TABLE, RunConfig
from pipeline.job.dedup import EXACT, NEAR, cluster_sizes
from pipeline.job.grouped import GroupedGlobal
from pipeline.job.inputs import InputFile, source_groups
from pipeline.job.ledger import ResolveKeptCopies
from pipeline.job.outdir import EDITS_DIR, LEDGER_DIR
from pipeline.job.part_hooks import PartEdit
from pipeline.job.parts import file_part_key
from pipeline.job.phases import Finish, Prepare, PrepareFiles, ReadSigned
from pipeline.job.readers import FileReader
from pipeline.job.robots import STAGE as ROBOTS_STAGE
from pipeline.job.schema import EDITS_SCHEMA, LEDGER_SCHEMA, ledger_row
from pipeline.job.steps import make_steps, phase1_task, phase2_tasks
from pipeline.job.transforms import ReadSource
from stages.decontam import STAGE as DECONTAM_STAGE
from stages.dedup import DEDUP_AGAINST
from stages.table import READ

EDITING_STAGES = (DECONTAM_STAGE,)  # stages that cut text from documents they keep (besides the PartEdits)


def read_sources(p: beam.Pipeline, config: RunConfig, root: str = "") -> tuple:
    """(HTML documents, text documents, read drops) of every source, each read by its own files' reader
    (`refinery run` and `refinery calibrate` read alike)."""
    html_docs, text_docs, drops = [], [], []
    for name, globs in source_groups(config):
        read = FileReader(name, config.warc, config.text, config.extract.max_html_bytes, root)
        html, text, dropped = p | f"Read_{name}" >> ReadSource(globs, read)
        html_docs.append(html)
        text_docs.append(text)
        drops.append(dropped)
    return tuple(pcolls[0] if len(pcolls) == 1 else pcolls | f"All{what}" >> beam.Flatten()
                 for what, pcolls in (("Html", html_docs), ("Text", text_docs), ("ReadDrops", drops)))


def build_pipeline(p: beam.Pipeline, config: RunConfig, files: Sequence[InputFile], root: str = "",
                   facts: dict[str, Any] | None = None, run_id: str = "") -> list[str]:
    """Adds the job to `p`; returns the stage names in order (for the report). Phase 1 prepares each input
    file (pipeline/job/prepare.py), phase 2 runs the global stages and the rest on the prepared documents.
    Input files are named by their path below `root` (see `input_root`); what the stages loaded is added
    to `facts`."""
    prepare, phase1 = phase1_task(config, root, facts, run_id)
    keys = p | "Prepare" >> Prepare(files, PrepareFiles(prepare, config.limit), one_task=bool(config.limit))
    names = [spec.name for spec in TABLE if spec.runs == READ] + [name for name, _ in phase1]
    file_index = {file_part_key(f, root): i for i, f in enumerate(files)}  # numbers shards and dedup's nodes
    signed = keys | "ReadSigned" >> beam.ParDo(ReadSigned(config.output, config.dedup, file_index))
    decisions, entering, edits = [], None, []
    phase2 = make_steps(config, facts, phase=2)
    for name, step in phase2:
        names.append(name)
        if name == ROBOTS_STAGE:  # on signatures and the parts' URLs, before dedup
            signed, decided = {"signed": signed, "keys": keys} | f"Stage_{name}" >> step
            decisions.append(decided)
        elif name in (DEDUP_AGAINST, EXACT, NEAR):  # on signatures only
            if name != DEDUP_AGAINST and entering is None:
                entering = signed  # near dedup bands every record that enters exact dedup (NearDedup says why)
            signed, decided = ({"kept": signed, "signed": entering} if name == NEAR else signed) | f"Stage_{name}" >> step
            decisions.append(decided)
        elif isinstance(step, GroupedGlobal):  # a stage that decides within groups of signatures
            signed, decided = signed | f"Stage_{name}" >> step
            decisions.append(decided)
        elif isinstance(step, PartEdit):  # a stage that edits parts: its counts, then its step in FinishPart
            edits.append(step)
    decided = (decisions or [p | "NoDecisions" >> beam.Create([])]) | "AllDecisions" >> beam.Flatten()
    deduplicated = any(name in (EXACT, NEAR) for name in names)
    sizes = signed | "ClusterSizes" >> beam.FlatMap(cluster_sizes) if deduplicated else p | "NoSizes" >> beam.Create([])
    tasks = phase2_tasks(config, phase2, file_index, deduplicated)
    drops, prepared_rows, edited = (keys, decided, sizes) | "Finish" >> Finish(config, tasks, edits, file_index)
    dedup_stages = sum(1 for name in names if name in (EXACT, NEAR))
    phase2_rows = (drops
                   | "ResolveKeptCopies" >> ResolveKeptCopies(rounds=dedup_stages)
                   | "LedgerRows" >> beam.Map(ledger_row, config.ledger_snippet_chars))
    # Two writers: phase 1's rows stream from the parts to their files, never held with phase 2's.
    for name, rows, prefix in (("WriteLedger", phase2_rows, "part-p2"), ("WritePreparedLedger", prepared_rows, "part-p1")):
        _ = rows | name >> beam.io.WriteToParquet(FileSystems.join(config.output, LEDGER_DIR, prefix), LEDGER_SCHEMA,
                                                  codec="zstd", file_name_suffix=".parquet", num_shards=config.num_shards)
    if edits or any(name in EDITING_STAGES for name in names):  # the edit book
        _ = edited | "WriteEdits" >> beam.io.WriteToParquet(FileSystems.join(config.output, EDITS_DIR, "part"), EDITS_SCHEMA,
                                                           codec="zstd", file_name_suffix=".parquet",
                                                           num_shards=config.num_shards)
    return names


