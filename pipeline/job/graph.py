"""The Beam graph of a run: phase 1 prepares each input file (pipeline/job/prepare.py); phase 2 runs the
global stages over signatures, finishes each part and writes its shards (pipeline/job/finish.py) and
the ledger. The tasks' Beam adapters are in pipeline/job/phases.py."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.job.config import TABLE, RunConfig
from pipeline.job.globals.base import Flow
from pipeline.job.globals.groupings import cluster_sizes
from pipeline.job.inputs import InputFile, source_groups
from pipeline.job.ledger import ResolveKeptCopies
from pipeline.job.outdir import EDITS_DIR, LEDGER_DIR
from pipeline.job.parts import file_part_key
from pipeline.job.phases import Finish, Prepare, PrepareFiles, ReadSigned
from pipeline.job.readers import FileReader
from pipeline.job.schema import EDITS_SCHEMA, LEDGER_SCHEMA, ledger_row
from pipeline.job.steps import global_stages, make_steps, phase1_task, phase2_tasks
from pipeline.job.transforms import ReadSource
from stages.table import READ


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
    phase2 = make_steps(config, facts, phase=2)
    names += [name for name, _ in phase2]
    stages = global_stages(phase2)
    site = any(stage.reads_site for stage in stages)
    signed = keys | "ReadSigned" >> beam.ParDo(ReadSigned(config.output, config.dedup, file_index, site))
    flow = Flow(signed, keys)
    decisions = [decided for decided in (stage.decide(flow) for stage in stages) if decided is not None]  # in order
    edits = [edit for edit in (stage.part_edit() for stage in stages) if edit is not None]
    decided = (decisions or [p | "NoDecisions" >> beam.Create([])]) | "AllDecisions" >> beam.Flatten()
    dedup_stages = sum(1 for stage in stages if stage.deduplicates)
    sizes = (flow.signed | "ClusterSizes" >> beam.FlatMap(cluster_sizes) if dedup_stages
             else p | "NoSizes" >> beam.Create([]))
    tasks = phase2_tasks(config, phase2, file_index, bool(dedup_stages))
    drops, prepared_rows, edited = (keys, decided, sizes) | "Finish" >> Finish(config, tasks, edits, file_index)
    phase2_rows = (drops
                   | "ResolveKeptCopies" >> ResolveKeptCopies(rounds=dedup_stages)
                   | "LedgerRows" >> beam.Map(ledger_row, config.ledger_snippet_chars))
    # Two writers: phase 1's rows stream from the parts to their files, never held with phase 2's.
    for name, rows, prefix in (("WriteLedger", phase2_rows, "part-p2"), ("WritePreparedLedger", prepared_rows, "part-p1")):
        _ = rows | name >> beam.io.WriteToParquet(FileSystems.join(config.output, LEDGER_DIR, prefix), LEDGER_SCHEMA,
                                                  codec="zstd", file_name_suffix=".parquet", num_shards=config.num_shards)
    if any(stage.edits_text for stage in stages):  # the edit book
        _ = edited | "WriteEdits" >> beam.io.WriteToParquet(FileSystems.join(config.output, EDITS_DIR, "part"), EDITS_SCHEMA,
                                                           codec="zstd", file_name_suffix=".parquet",
                                                           num_shards=config.num_shards)
    return names


