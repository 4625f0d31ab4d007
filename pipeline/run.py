"""The main job: WARC files -> extracted, language-tagged Parquet shards + drop ledger + report.

    refinery run --input 'data/warc/*.warc.gz' --output out/ [--config configs/default.yaml] [beam flags]

`run(argv)` is what the console script calls and what tests call. Flags it does
not know are Beam pipeline options (--runner, --direct_num_workers, ...).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipeline import report as reporting
from pipeline.config import ConfigError, RunConfig, load_config
from pipeline.dedup import EXACT as EXACT_DEDUP, NEAR as NEAR_DEDUP, ExactDedup, NearDedup, dedup_report
from pipeline.schema import DOCUMENT_SCHEMA, LEDGER_SCHEMA, document_row, ledger_row
from pipeline.transforms import ApplyStage, Decontaminate, ReadWarc
from stages.c4 import C4Filter
from stages.decontam import STAGE as DECONTAM_STAGE, DecontaminationIndex, read_benchmarks
from stages.extract import Extractor
from stages.fineweb import FineWebFilter
from stages.gopher import GopherQuality, GopherRepetition
from stages.pii import PiiRemover
from stages.quality import QualityScorer, load_model as load_quality_model
from stages.langid import LanguageIdentifier, load_model
from stages.warc import STAGE as WARC_STAGE

DEFAULT_RUNNER = "FnApiRunner"  # in-process; DirectRunner first tries to download Prism
DATA_DIR, LEDGER_DIR, REPORT_FILE = "data", "ledger", "report.json"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="refinery run",
        description="Turn WARC files into clean text shards (Parquet, zstd) with a drop ledger and a report.",
        epilog="Any other --flag is a Beam pipeline option, e.g. --runner=FnApiRunner (default), "
               "--direct_running_mode=multi_processing --direct_num_workers=2 (local processes), "
               "--runner=PortableRunner --job_endpoint=HOST:PORT, --runner=DataflowRunner --project ... "
               "--setup_file ./setup.py. Outputs: OUTPUT/data/part-*.parquet (documents), "
               "OUTPUT/ledger/part-*.parquet (every dropped document with stage and reason), OUTPUT/report.json.")
    p.add_argument("--input", action="append", metavar="GLOB",
                   help="WARC file glob, local or on a Beam filesystem (gs://, s3://); repeat for more")
    p.add_argument("--output", help="output folder (created if missing)")
    p.add_argument("--config", metavar="YAML", help="YAML config file; flags below override it "
                   "(see configs/default.yaml for every setting and its default)")
    p.add_argument("--source", help="value of the `source` column (default: web)")
    p.add_argument("--languages", metavar="CODES", help="keep only these languages, e.g. en,de (default: all)")
    p.add_argument("--lang-threshold", type=float, metavar="P",
                   help="minimum top-language probability (default 0.65, FineWeb's)")
    p.add_argument("--lid-model", metavar="PATH",
                   help="fastText language-ID model (lid.176.bin/.ftz or GlotLID); default: the bundled lid.176.ftz")
    p.add_argument("--extract-timeout", metavar="SECONDS",
                   help="per-page extraction time limit (default 5); 'none' extracts in-process without a limit")
    p.add_argument("--quality-model", metavar="PATH",
                   help="fastText quality classifier (from `refinery train-quality`); default: the bundled one")
    p.add_argument("--quality-threshold", type=float, metavar="P",
                   help="drop documents whose quality score is below P (default: score only, drop nothing)")
    p.add_argument("--dedup-threshold", type=float, metavar="J",
                   help="near-duplicate Jaccard threshold; bands/rows then come from datasketch's optimal-parameter "
                        "search (default: 14 bands x 8 rows, FineWeb's, threshold ~0.72)")
    p.add_argument("--dedup-verify", action="store_true", default=None,
                   help="check each candidate link's exact shingle Jaccard and drop links below the threshold")
    p.add_argument("--no-dedup", action="store_true", help="skip exact and near-duplicate removal")
    p.add_argument("--decontaminate", nargs="+", metavar="PATH[:FIELDS]",
                   help="benchmark files or folders (JSONL[.gz], JSON, CSV, Parquet, text) whose 13-grams must not "
                        "appear in the output; PATH:question,answer picks fields (GSM8K, HumanEval, MBPP, MMLU, "
                        "NQ-open layouts are known)")
    p.add_argument("--decontam-policy", choices=("excise", "drop"),
                   help="excise matches with 200 characters around them, GPT-3 style (default), or drop the document")
    p.add_argument("--max-html-bytes", type=int, metavar="N", help="pages larger than this are ledgered as too_large")
    p.add_argument("--num-shards", type=int, metavar="N", help="number of output shards (default: runner decides)")
    p.add_argument("--overwrite", action="store_true", default=None,
                   help="replace the outputs of an earlier run in OUTPUT")
    p.add_argument("--quiet", action="store_true", help="do not print the funnel")
    return p


def config_from_args(args: argparse.Namespace) -> RunConfig:
    overrides: Dict[str, Any] = {}
    simple = {"input": "inputs", "output": "output", "source": "source", "languages": "langid.languages",
              "lang_threshold": "langid.threshold", "lid_model": "langid.model",
              "max_html_bytes": "extract.max_html_bytes", "quality_model": "quality.model",
              "quality_threshold": "quality.threshold", "dedup_threshold": "dedup.threshold",
              "dedup_verify": "dedup.verify", "decontaminate": "decontam.benchmarks",
              "decontam_policy": "decontam.policy", "num_shards": "num_shards", "overwrite": "overwrite"}
    for attr, key in simple.items():
        value = getattr(args, attr)
        if value is not None:
            overrides[key] = value
    if args.no_dedup:
        overrides["dedup.exact"] = overrides["dedup.near"] = False
    if args.extract_timeout is not None:
        t = args.extract_timeout.strip().lower()
        try:
            overrides["extract.timeout_s"] = None if t in ("none", "off", "0") else float(t)
        except ValueError:
            raise ConfigError(f"--extract-timeout: expected seconds or 'none', got {args.extract_timeout!r}")
    config = load_config(args.config, overrides)
    if not config.inputs:
        raise ConfigError("no input: pass --input GLOB (or `inputs:` in the config file)")
    if not config.output:
        raise ConfigError("no output: pass --output DIR")
    return config


def check_inputs(patterns: Sequence[str]) -> List[str]:
    """Fail before the job starts if a pattern matches nothing (a typo would otherwise give an empty run)."""
    files = []
    for pattern, match in zip(patterns, FileSystems.match(list(patterns))):
        if not match.metadata_list:
            raise ConfigError(f"--input {pattern!r} matches no files")
        files.extend(m.path for m in match.metadata_list)
    return files


def prepare_output(output: str, overwrite: bool) -> None:
    """Refuse to mix two runs' shards in one folder; with --overwrite, delete only our own outputs."""
    ours = [FileSystems.join(output, DATA_DIR, "part-*"), FileSystems.join(output, LEDGER_DIR, "part-*"),
            FileSystems.join(output, REPORT_FILE)]
    existing = [m.path for r in FileSystems.match(ours) for m in r.metadata_list]
    if existing and not overwrite:
        raise ConfigError(f"{output} already holds a run's outputs ({len(existing)} files); "
                          "pass --overwrite to replace them or choose another --output")
    if existing:
        FileSystems.delete(existing)
    if "://" not in output:
        os.makedirs(output, exist_ok=True)


def make_steps(config: RunConfig) -> list:
    """The steps after reading, in order: (name, transform). FineWeb's order: filters, then dedup, then PII."""
    stages = [(Extractor(config.extract), True), (LanguageIdentifier(config.langid), False)]
    optional = [(config.gopher_repetition, GopherRepetition), (config.gopher_quality, GopherQuality),
                (config.c4, C4Filter), (config.fineweb, FineWebFilter), (config.quality, QualityScorer)]
    stages += [(make(cfg), False) for cfg, make in optional if cfg.enabled]
    steps = [(stage.name, ApplyStage(stage, progress=progress)) for stage, progress in stages]
    if config.dedup.exact:
        steps.append((EXACT_DEDUP, ExactDedup()))
    if config.dedup.near:
        steps.append((NEAR_DEDUP, NearDedup(config.dedup)))
    if config.decontam.benchmarks:
        index = DecontaminationIndex(read_benchmarks(config.decontam.benchmarks), config.decontam.n,
                                     config.decontam.min_words)
        steps.append((DECONTAM_STAGE, Decontaminate(index, config.decontam)))
    if config.pii.enabled:
        steps.append((PiiRemover.name, ApplyStage(PiiRemover(config.pii))))
    return steps


def build_pipeline(p: beam.Pipeline, config: RunConfig) -> List[str]:
    """Adds the job to `p`; returns the stage names in order (for the report)."""
    documents, read_drops = p | "ReadWarc" >> ReadWarc(config.inputs, config.source, config.warc)
    ledgers, names = [read_drops], [WARC_STAGE]
    for name, step in make_steps(config):
        documents, drops = documents | f"Stage_{name}" >> step
        ledgers.append(drops)
        names.append(name)
    _ = (documents
         | "DocumentRows" >> beam.Map(document_row)
         | "WriteShards" >> beam.io.WriteToParquet(
             FileSystems.join(config.output, DATA_DIR, "part"), DOCUMENT_SCHEMA, codec="zstd",
             file_name_suffix=".parquet", num_shards=config.num_shards))
    _ = (ledgers
         | "MergeLedger" >> beam.Flatten()
         | "LedgerRows" >> beam.Map(ledger_row)
         | "WriteLedger" >> beam.io.WriteToParquet(
             FileSystems.join(config.output, LEDGER_DIR, "part"), LEDGER_SCHEMA, codec="zstd",
             file_name_suffix=".parquet", num_shards=config.num_shards))
    return names


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run the job; returns the report. Raises ConfigError on bad settings, ConservationError on lost documents."""
    args, beam_args = build_parser().parse_known_args(list(sys.argv[1:] if argv is None else argv))
    config = config_from_args(args)
    files = check_inputs(config.inputs)
    # A missing model or a broken extractor install fails here, before any worker starts.
    load_model(config.langid.model)
    if config.quality.enabled:
        load_quality_model(config.quality.model)
    Extractor(config.extract).check()
    prepare_output(config.output, config.overwrite)

    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = [f"--runner={DEFAULT_RUNNER}", *beam_args]
    options = PipelineOptions(beam_args)
    runner = options.view_as(StandardOptions).runner
    if not args.quiet:
        size = sum(m.size_in_bytes for r in FileSystems.match(list(config.inputs)) for m in r.metadata_list)
        print(f"[refinery] {len(files)} input file(s), {size / 1e6:.1f} MB; runner {runner}", file=sys.stderr)

    started = time.monotonic()
    p = beam.Pipeline(options=options)
    names = build_pipeline(p, config)
    result = p.run()
    result.wait_until_finish()
    elapsed = time.monotonic() - started

    shards = reporting.list_files(FileSystems.join(config.output, DATA_DIR, "part-*.parquet"))
    ledger_files = reporting.list_files(FileSystems.join(config.output, LEDGER_DIR, "part-*.parquet"))
    report = reporting.build_report(
        stages=names,
        beam_counters=reporting.counters(result),
        shard_rows=reporting.parquet_row_counts(shards),
        ledger_rows=reporting.parquet_row_counts(ledger_files),
        ledger_reasons=reporting.column_counts(ledger_files, ["stage", "reason"]),
        languages={lang: n for (lang,), n in reporting.column_counts(shards, ["lang"]).items()},
        config=config.to_dict(), runner=str(runner), elapsed_s=elapsed)
    if config.dedup.exact or config.dedup.near:
        report["dedup"] = dedup_report(config.dedup, reporting.counters(result) or {})
    reporting.write_json(FileSystems.join(config.output, REPORT_FILE), report)
    if not args.quiet:
        print(reporting.format_funnel(report))
        print(f"shards: {FileSystems.join(config.output, DATA_DIR)} ({len(shards)} file(s)); "
              f"ledger: {FileSystems.join(config.output, LEDGER_DIR)}; "
              f"report: {FileSystems.join(config.output, REPORT_FILE)}; {elapsed:.1f} s")
    if report.get("dedup", {}).get("converged") is False:
        raise RuntimeError(f"near-duplicate clustering did not converge in {config.dedup.max_rounds} rounds: "
                           "raise dedup.max_rounds (the output holds unresolved clusters)")
    if report["conservation"]["holds"] is None:
        print("[refinery] warning: this runner reported no metrics, so conservation could not be checked "
              "against an independent count", file=sys.stderr)
    elif not report["conservation"]["holds"]:
        raise reporting.ConservationError(f"documents lost or double-counted: {report['conservation']}")
    return report
