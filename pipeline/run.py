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
from pipeline.schema import LEDGER_SCHEMA, ledger_row
from pipeline.mix import STAGE as MIX_STAGE, AnnealSplit, Mix
from pipeline.output import MANIFEST, STATS_DIR, WriteShards, write_manifest
from pipeline.transforms import ApplyStage, Decontaminate, ReadTextFiles, ReadWarc
from stages.c4 import C4Filter
from stages.decontam import STAGE as DECONTAM_STAGE, DecontaminationIndex, read_benchmarks
from stages.extract import Extractor
from stages.fineweb import FineWebFilter
from stages.gopher import GopherQuality, GopherRepetition
from stages.pii import PiiRemover
from stages.quality import QualityScorer, load_model as load_quality_model
from stages.langid import LanguageIdentifier, load_model
from stages.mix import parse_weights
from stages.textsource import STAGE as TEXT_STAGE, is_text_source
from stages.warc import STAGE as WARC_STAGE

VERSION = "0.1.0"
DEFAULT_RUNNER = "FnApiRunner"  # in-process; DirectRunner first tries to download Prism
DATA_DIR, LEDGER_DIR, REPORT_FILE, ANNEAL_DIR = "data", "ledger", "report.json", "anneal"


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
    p.add_argument("--source", action="append", metavar="NAME or NAME=GLOB",
                   help="NAME: the `source` value of --input files (default: web). NAME=GLOB (repeatable): another "
                        "source; WARC files are extracted, JSONL[.gz]/Parquet text (e.g. code, books) joins after "
                        "extraction")
    p.add_argument("--text-field", help="text field of JSONL/Parquet sources (default: text)")
    p.add_argument("--mix", metavar="NAME=W,...", help="target token shares, e.g. web=0.7,code=0.2,books=0.1: "
                   "sources are downsampled by hashed id or repeated (with an epoch field) to match")
    p.add_argument("--anneal-fraction", type=float, metavar="F",
                   help="also write OUT/anneal/: documents with quality_score >= --anneal-min-quality, about F of "
                        "the output's tokens, for the final (annealing) phase of training")
    p.add_argument("--anneal-min-quality", type=float, metavar="Q", help="default 0.8")
    p.add_argument("--seed", type=int, help="seed of the shard shuffle and the mix draws (default 0)")
    p.add_argument("--shard-size-mb", type=float, metavar="MB",
                   help="target uncompressed text per output shard (default 256)")
    p.add_argument("--inject-error", action="append", metavar="STAGE=URL_PART", dest="inject_errors",
                   help="fault injection (testing): STAGE raises ValueError on documents whose URL contains "
                        "URL_PART; they must end in the ledger as error:ValueError while the job goes on")
    p.add_argument("--row-group-rows", type=int, metavar="N",
                   help="documents per Parquet row group, the unit training readers fetch (default 4096)")
    p.add_argument("--languages", metavar="CODES", help="keep only these languages, e.g. en,de (default: all)")
    p.add_argument("--lang-threshold", type=float, metavar="P",
                   help="minimum top-language probability (default 0.65, FineWeb's)")
    p.add_argument("--lid-model", metavar="PATH",
                   help="fastText language-ID model (lid.176.bin/.ftz or GlotLID); default: the bundled lid.176.ftz")
    p.add_argument("--extract-timeout", metavar="SECONDS",
                   help="per-page extraction time limit (default 5); 'none' extracts in-process without a limit")
    p.add_argument("--extract-fast", action="store_true", default=None,
                   help="trafilatura's fast mode: no fallback extractors; 1.5x faster extraction, gold-snippet "
                        "recall 0.881 instead of 0.907, boilerplate leak 0.069 instead of 0.072 (bench/RESULTS.md)")
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
    simple = {"input": "inputs", "output": "output", "languages": "langid.languages", "text_field": "text_field",
              "mix": "mix", "seed": "seed", "shard_size_mb": "shard_size_mb",
              "row_group_rows": "row_group_rows", "inject_errors": "inject_errors",
              "anneal_fraction": "anneal_fraction", "anneal_min_quality": "anneal_min_quality",
              "lang_threshold": "langid.threshold", "lid_model": "langid.model",
              "max_html_bytes": "extract.max_html_bytes", "extract_fast": "extract.fast", "quality_model": "quality.model",
              "quality_threshold": "quality.threshold", "dedup_threshold": "dedup.threshold",
              "dedup_verify": "dedup.verify", "decontaminate": "decontam.benchmarks",
              "decontam_policy": "decontam.policy", "num_shards": "num_shards", "overwrite": "overwrite"}
    for attr, key in simple.items():
        value = getattr(args, attr)
        if value is not None:
            overrides[key] = value
    for value in args.source or []:
        if "=" in value:
            overrides.setdefault("sources", []).append(value)
        else:
            overrides["source"] = value
    if args.no_dedup:
        overrides["dedup.exact"] = overrides["dedup.near"] = False
    if args.extract_timeout is not None:
        t = args.extract_timeout.strip().lower()
        try:
            overrides["extract.timeout_s"] = None if t in ("none", "off", "0") else float(t)
        except ValueError:
            raise ConfigError(f"--extract-timeout: expected seconds or 'none', got {args.extract_timeout!r}")
    config = load_config(args.config, overrides)
    if not config.inputs and not config.sources:
        raise ConfigError("no input: pass --input GLOB or --source NAME=GLOB (or `inputs:` in the config file)")
    if config.mix:
        try:
            parse_weights(config.mix)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
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
            FileSystems.join(output, REPORT_FILE), FileSystems.join(output, MANIFEST),
            FileSystems.join(output, STATS_DIR, "*"), FileSystems.join(output, ANNEAL_DIR, "*", "*"),
            FileSystems.join(output, ANNEAL_DIR, MANIFEST)]
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
    faults: Dict[str, List[str]] = {}
    for spec in config.inject_errors:
        stage_name, _, url_part = spec.partition("=")
        faults.setdefault(stage_name, []).append(url_part)
    steps = [(stage.name, ApplyStage(stage, progress=progress, fail_urls=faults.get(stage.name, ())))
             for stage, progress in stages]
    unknown = set(faults) - {stage.name for stage, _ in stages} - ({PiiRemover.name} if config.pii.enabled else set())
    if unknown:
        raise ConfigError(f"--inject-error: no per-document stage named {sorted(unknown)} in this run "
                          f"(stages: {', '.join(s.name for s, _ in stages)}{', pii' if config.pii.enabled else ''})")
    if config.dedup.exact:
        steps.append((EXACT_DEDUP, ExactDedup()))
    if config.dedup.near:
        steps.append((NEAR_DEDUP, NearDedup(config.dedup)))
    if config.decontam.benchmarks:
        index = DecontaminationIndex(read_benchmarks(config.decontam.benchmarks), config.decontam.n,
                                     config.decontam.min_words)
        steps.append((DECONTAM_STAGE, Decontaminate(index, config.decontam)))
    if config.pii.enabled:
        steps.append((PiiRemover.name, ApplyStage(PiiRemover(config.pii), fail_urls=faults.get(PiiRemover.name, ()))))
    return steps


def source_groups(config: RunConfig) -> List[tuple]:
    """[(source name, kind, [globs])]: --input globs under --source, plus every --source NAME=GLOB."""
    groups: Dict[tuple, List[str]] = {}
    for name, pattern in [(config.source, g) for g in config.inputs] + [tuple(spec.split("=", 1)) for spec in config.sources]:
        kind = "text" if is_text_source(pattern) else "warc"
        groups.setdefault((name, kind), []).append(pattern)
    return [(name, kind, globs) for (name, kind), globs in groups.items()]


def build_pipeline(p: beam.Pipeline, config: RunConfig) -> List[str]:
    """Adds the job to `p`; returns the stage names in order (for the report)."""
    warc_docs, text_docs, ledgers, names = [], [], [], []
    for name, kind, globs in source_groups(config):
        if kind == "warc":
            docs, drops = p | f"ReadWarc_{name}" >> ReadWarc(globs, name, config.warc)
            warc_docs.append(docs)
        else:
            docs, drops = p | f"ReadText_{name}" >> ReadTextFiles(globs, name, config.text_field)
            text_docs.append(docs)
        ledgers.append(drops)
    names += [WARC_STAGE] if warc_docs else []
    names += [TEXT_STAGE] if text_docs else []
    (extract_name, extract), *steps = make_steps(config)
    streams = list(text_docs)  # pre-extracted text joins right after extraction
    if warc_docs:
        html = warc_docs[0] if len(warc_docs) == 1 else warc_docs | "AllWarc" >> beam.Flatten()
        extracted, drops = html | f"Stage_{extract_name}" >> extract
        ledgers.append(drops)
        names.append(extract_name)
        streams.insert(0, extracted)
    documents = streams[0] if len(streams) == 1 else streams | "JoinTextSources" >> beam.Flatten()
    for name, step in steps:
        documents, drops = documents | f"Stage_{name}" >> step
        ledgers.append(drops)
        names.append(name)
    if config.mix:
        documents, drops = documents | "Stage_mix" >> Mix(parse_weights(config.mix), config.seed)
        ledgers.append(drops)
        names.append(MIX_STAGE)
    _ = documents | "WriteShards" >> WriteShards(
        FileSystems.join(config.output, DATA_DIR), FileSystems.join(config.output, STATS_DIR, "stats"),
        config.shard_size_mb, config.seed, config.row_group_rows)
    if config.anneal_fraction:
        anneal = FileSystems.join(config.output, ANNEAL_DIR)
        _ = (documents
             | "Anneal" >> AnnealSplit(config.anneal_fraction, config.anneal_min_quality, config.seed)
             | "WriteAnneal" >> WriteShards(FileSystems.join(anneal, DATA_DIR), FileSystems.join(anneal, STATS_DIR, "stats"),
                                            config.shard_size_mb, config.seed, config.row_group_rows))
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
    files = check_inputs([pattern for _, _, globs in source_groups(config) for pattern in globs])
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
        size = sum(m.size_in_bytes for r in FileSystems.match(files) for m in r.metadata_list)
        print(f"[refinery] {len(files)} input file(s), {size / 1e6:.1f} MB; runner {runner}", file=sys.stderr)

    started = time.monotonic()
    p = beam.Pipeline(options=options)
    names = build_pipeline(p, config)
    result = p.run()
    result.wait_until_finish()
    elapsed = time.monotonic() - started

    extra = {"config": config.to_dict(), "refinery_version": VERSION}
    if config.anneal_fraction:
        anneal_manifest = write_manifest(FileSystems.join(config.output, ANNEAL_DIR), DATA_DIR, extra)
        extra["anneal"] = {"manifest": f"{ANNEAL_DIR}/{MANIFEST}", "rows": anneal_manifest["rows"],
                           "tokens": anneal_manifest["tokens"]}
    manifest = write_manifest(config.output, DATA_DIR, extra)  # last: its presence means everything is written
    shards = [FileSystems.join(config.output, s["path"]) for s in manifest["shards"]]
    ledger_files = reporting.list_files(FileSystems.join(config.output, LEDGER_DIR, "part-*.parquet"))
    report = reporting.build_report(
        stages=names,
        beam_counters=reporting.counters(result),
        shard_rows={s["path"]: s["originals"] for s in manifest["shards"]},
        ledger_rows=reporting.parquet_row_counts(ledger_files),
        ledger_reasons=reporting.column_counts(ledger_files, ["stage", "reason"]),
        languages={lang: n for (lang,), n in reporting.column_counts(shards, ["lang"]).items()},
        config=config.to_dict(), runner=str(runner), elapsed_s=elapsed)
    report["output"] = {"rows": manifest["rows"], "repeats": manifest["rows"] - report["kept"],
                        "tokens": manifest["tokens"], "sources": manifest["sources"]}
    if config.anneal_fraction:
        report["anneal"] = dict(extra["anneal"], fraction_of_tokens=round(
            extra["anneal"]["tokens"] / max(manifest["tokens"], 1), 4), requested_fraction=config.anneal_fraction)
    if config.mix:
        requested = parse_weights(config.mix)
        achieved = {k: v["tokens"] / max(manifest["tokens"], 1) for k, v in manifest["sources"].items()}
        report["mix"] = {"requested": requested, "achieved": {k: round(v, 4) for k, v in achieved.items()}}
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
