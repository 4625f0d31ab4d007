"""The main job: WARC files -> extracted, language-tagged Parquet shards + drop ledger + report.

    refinery run --input 'data/warc/*.warc.gz' --output out/ [--config configs/default.yaml] [beam flags]

`run(argv)` is what the console script calls and what tests call. Flags it does
not know are Beam pipeline options (--runner, --direct_num_workers, ...).
"""
from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

from pipeline import report as reporting
from pipeline.beam_options import check_beam_args, loopback_only_grpc
from pipeline.config import ConfigError, RunConfig, load_config
from pipeline.dedup import EXACT as EXACT_DEDUP, NEAR as NEAR_DEDUP, ExactDedup, NearDedup, dedup_report
from pipeline.mix import STAGE as MIX_STAGE, AnnealSplit, Mix
from pipeline.outdir import OutputLock, lock_note, prepare_output, remove_partial
from pipeline.output import STATS_DIR, WriteShards, collect_shards, write_manifest
from pipeline.schema import LEDGER_SCHEMA, OutputCheck, ledger_row
from pipeline.transforms import READ_STAGE, SOURCE_RECORDS, ApplyStage, Decontaminate, ReadFileFn, ReadSource
from stages.c4 import C4Filter
from stages.decontam import STAGE as DECONTAM_STAGE, DecontaminationIndex, read_benchmarks
from stages.extract import Extractor
from stages.fineweb import FineWebFilter
from stages.gopher import GopherQuality, GopherRepetition
from stages.pii import PiiRemover
from stages.quality import QualityScorer, load_model as load_quality_model
from stages.langid import LanguageIdentifier, load_model
from stages.mix import parse_weights
from stages.textsource import STAGE as TEXT_STAGE
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
    p.add_argument("--strict", action="store_true", default=None,
                   help="fail (exit 3, no manifest) when the run keeps no document")
    p.add_argument("--mix", metavar="NAME=W,...", help="target token shares, e.g. web=0.7,code=0.2,books=0.1: "
                   "sources are downsampled by hashed id or repeated (with an epoch field) to match")
    p.add_argument("--mix-max-epochs", type=int, metavar="N",
                   help="at most N copies of a document when --mix repeats a small source (default 4)")
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
    if args.languages is not None:
        args.languages = args.languages.lower()  # lid.176 labels are lower case: EN means en
    simple = {"input": "inputs", "output": "output", "languages": "langid.languages", "text_field": "text.field", "strict": "strict",
              "mix": "mix", "seed": "seed", "shard_size_mb": "shard_size_mb",
              "row_group_rows": "row_group_rows", "inject_errors": "inject_errors",
              "anneal_fraction": "anneal_fraction", "anneal_min_quality": "anneal_min_quality",
              "lang_threshold": "langid.threshold", "lid_model": "langid.model",
              "max_html_bytes": "extract.max_html_bytes", "extract_fast": "extract.fast", "quality_model": "quality.model",
              "quality_threshold": "quality.threshold", "dedup_threshold": "dedup.threshold",
              "dedup_verify": "dedup.verify", "decontaminate": "decontam.benchmarks",
              "decontam_policy": "decontam.policy", "num_shards": "num_shards", "overwrite": "overwrite",
              "mix_max_epochs": "mix_max_epochs"}
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


def check_inputs(patterns: Sequence[str]) -> Dict[str, int]:
    """Fail before the job starts if a pattern matches nothing (a typo would otherwise give an empty run)
    or names a folder; the distinct files matched, with their sizes."""
    files: Dict[str, int] = {}
    for pattern in patterns:
        if "://" not in pattern and os.path.isdir(pattern):
            raise ConfigError(f"--input {pattern!r} is a folder: give a glob of its files, e.g. "
                              f"'{os.path.join(pattern, '*.warc.gz')}'")
        match = FileSystems.match([pattern])[0]
        if not match.metadata_list:
            raise ConfigError(f"--input {pattern!r} matches no files")
        files.update((m.path, m.size_in_bytes) for m in match.metadata_list)
    return files


def input_root(files: Sequence[str]) -> str:
    """The folder all input files lie in (ending with '/'), or "": files are named below it."""
    prefix = os.path.commonprefix(list(files))
    cut = prefix.rfind("/")
    return prefix[:cut + 1] if cut >= 0 else ""


def preflight(config: RunConfig) -> None:
    """Everything every worker will need, checked once here: models load, language codes exist,
    the extractor runs, optional decoders are installed. A failure is one error line, before any work."""
    lid = load_model(config.langid.model)
    if config.langid.languages:
        labels = sorted(label.replace("__label__", "") for label in lid.get_labels())
        unknown = [code for code in config.langid.languages if code not in labels]
        if unknown:
            hints = []
            for code in unknown:
                close = difflib.get_close_matches(code.lower(), labels, n=3)
                hints.append(f"{code!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
            raise ConfigError(f"--languages: not a label of the language-ID model: {'; '.join(hints)}; "
                              f"codes are ISO 639 as the model writes them ({', '.join(labels[:12])}, ...)")
    if config.quality.enabled:
        load_quality_model(config.quality.model)
    Extractor(config.extract).check()
    try:
        import brotli  # noqa: F401  (Content-Encoding: br pages)
    except ImportError as exc:
        raise ConfigError(f"brotli is not installed ({exc}): pip install 'brotli>=1.2'") from exc
    if not hasattr(brotli.Decompressor(), "can_accept_more_data"):
        raise ConfigError("brotli is too old for bounded decompression: pip install 'brotli>=1.2'")


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
    steps.append((OutputCheck.name, ApplyStage(OutputCheck())))
    return steps


def source_groups(config: RunConfig) -> List[tuple]:
    """[(source name, [globs])]: --input globs under --source, plus every --source NAME=GLOB. The reader
    (WARC or text) is chosen per file when it is read, not from the glob."""
    groups: Dict[str, List[str]] = {}
    for name, pattern in [(config.source, g) for g in config.inputs] + [tuple(spec.split("=", 1)) for spec in config.sources]:
        groups.setdefault(name.strip(), []).append(pattern)
    return list(groups.items())


def build_pipeline(p: beam.Pipeline, config: RunConfig, root: str = "") -> List[str]:
    """Adds the job to `p`; returns the stage names in order (for the report). Input files are named by
    their path below `root` (see `input_root`)."""
    html_docs, text_docs, ledgers = [], [], []
    for name, globs in source_groups(config):
        read = ReadFileFn(name, config.warc, config.text, config.extract.max_html_bytes, root)
        html, text, drops = p | f"Read_{name}" >> ReadSource(globs, read)
        html_docs.append(html)
        text_docs.append(text)
        ledgers.append(drops)
    names = [READ_STAGE, WARC_STAGE, TEXT_STAGE]
    (extract_name, extract), *steps = make_steps(config)
    html = html_docs[0] if len(html_docs) == 1 else html_docs | "AllHtml" >> beam.Flatten()
    extracted, drops = html | f"Stage_{extract_name}" >> extract
    ledgers.append(drops)
    names.append(extract_name)
    documents = [extracted, *text_docs] | "JoinTextSources" >> beam.Flatten()  # text skips extraction
    for name, step in steps[:-1]:
        documents, drops = documents | f"Stage_{name}" >> step
        ledgers.append(drops)
        names.append(name)
    if config.mix:
        documents, drops = documents | "Stage_mix" >> Mix(parse_weights(config.mix), config.seed, config.mix_max_epochs)
        ledgers.append(drops)
        names.append(MIX_STAGE)
    write_name, write_check = steps[-1]  # last: no document reaches a shard that cannot be stored
    documents, drops = documents | f"Stage_{write_name}" >> write_check
    ledgers.append(drops)
    names.append(write_name)
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


class RunFailed(RuntimeError):
    """The job ran, but a check failed: report.json says which; no manifest was written."""

    exit_code = 3


def run(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run the job; returns the report. Raises ConfigError/OutputError on bad settings (nothing
    written), RunFailed when a check after the job fails (report.json written, no manifest)."""
    parser = build_parser()
    args, beam_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    check_beam_args(beam_args, parser)
    config = config_from_args(args)
    files = check_inputs([pattern for _, globs in source_groups(config) for pattern in globs])
    preflight(config)
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = [f"--runner={DEFAULT_RUNNER}", *beam_args]
    options = PipelineOptions(beam_args)
    runner = options.view_as(StandardOptions).runner
    with OutputLock(config.output):
        prepare_output(config.output, config.overwrite)
        if not args.quiet:
            print(f"[refinery] {len(files)} input file(s), {sum(files.values()) / 1e6:.1f} MB; runner {runner}",
                  file=sys.stderr)
        started = time.monotonic()
        p = beam.Pipeline(options=options)
        root = input_root(files)
        names = build_pipeline(p, config, root)
        try:
            with loopback_only_grpc():  # FnApiRunner's worker servers listen on 127.0.0.1/::1 only
                result = p.run()
                result.wait_until_finish()
        except BaseException:  # also what Beam makes of a KeyboardInterrupt inside a bundle
            remove_partial(config.output)
            raise
        elapsed = time.monotonic() - started
        report = _finish(config, result, names, runner, elapsed, quiet=args.quiet, root=root)
    return report


def _finish(config: RunConfig, result, names: List[str], runner, elapsed: float, quiet: bool,
            root: str = "") -> Dict[str, Any]:
    """Count what reached storage, check it against what was read, write report.json; then, only if
    every check passed, the manifest (the commit point)."""
    counters = reporting.counters(result)
    shards = collect_shards(config.output, DATA_DIR)
    shard_paths = [FileSystems.join(config.output, s["path"]) for s in shards]
    ledger_files = reporting.list_files(FileSystems.join(config.output, LEDGER_DIR, "part-*.parquet"))
    originals = reporting.column_counts(shard_paths, ["epoch"])  # from the files, not the writers' stats
    if counters is not None:  # a read stage that saw nothing (no such files) stays out of the funnel
        names = [n for n in names if n not in reporting.READ_STAGES or counters.get(f"{n}.in", 0)]
        if not counters.get(f"{WARC_STAGE}.in", 0):
            names = [n for n in names if n != Extractor.name]  # text sources alone: nothing to extract
    report = reporting.build_report(
        stages=names, beam_counters=counters,
        shard_rows={"all": originals.get((0,), 0)},
        ledger_rows=reporting.parquet_row_counts(ledger_files),
        ledger_reasons=reporting.column_counts(ledger_files, ["stage", "reason"]),
        languages={lang: n for (lang,), n in reporting.column_counts(shard_paths, ["lang"]).items()},
        config=config.to_dict(), runner=str(runner), elapsed_s=elapsed)
    report["shards"] = [{"path": s["path"], "rows": s["rows"]} for s in shards]
    report["input_root"] = root  # file names in ids, metadata and the ledger are relative to it
    rows = sum(originals.values())
    tokens = sum(s["tokens"] for s in shards)
    by_source: Dict[str, Dict[str, int]] = {}
    for s in shards:
        for k in s["rows_by_source"]:
            entry = by_source.setdefault(k, {"rows": 0, "tokens": 0})
            entry["rows"] += s["rows_by_source"][k]
            entry["tokens"] += s["tokens_by_source"].get(k, 0)
    report["output"] = {"rows": rows, "repeats": rows - report["kept"], "tokens": tokens,
                        "sources": dict(sorted(by_source.items()))}
    if config.mix:
        report["mix"] = {"requested": parse_weights(config.mix),
                         "achieved": {k: round(v["tokens"] / max(tokens, 1), 4) for k, v in sorted(by_source.items())},
                         "max_epochs": config.mix_max_epochs,
                         "capped_sources": sorted(k.split(".", 3)[3] for k, v in (counters or {}).items()
                                                  if k.startswith(f"{MIX_STAGE}.note.capped.") and v)}
    if config.dedup.exact or config.dedup.near:
        report["dedup"] = dedup_report(config.dedup, counters or {})
    note = lock_note(config.output)
    if note:
        report["lock"] = note
    problems = _checks(config, report, counters, shards)
    report["status"] = "failed" if problems else "ok"
    report["problems"] = problems
    reporting.write_json(FileSystems.join(config.output, REPORT_FILE), report)
    if not quiet:
        print(reporting.format_funnel(report))
    if report["kept"] == 0:
        print("[refinery] WARNING: this run kept 0 documents (see the funnel above and the ledger); "
              "--strict makes that an error", file=sys.stderr)
    if report.get("mix", {}).get("capped_sources"):
        print(f"[refinery] warning: the mix shares of {', '.join(report['mix']['capped_sources'])} cannot be "
              f"reached with at most {config.mix_max_epochs} copies per document "
              f"(achieved {report['mix']['achieved']})", file=sys.stderr)
    if problems:
        raise RunFailed(f"run failed its checks, no manifest written ({REPORT_FILE} has details): " + "; ".join(problems))

    extra = {"config": config.to_dict(), "refinery_version": VERSION}
    if config.anneal_fraction:
        anneal = FileSystems.join(config.output, ANNEAL_DIR)
        anneal_manifest = write_manifest(anneal, collect_shards(anneal, DATA_DIR), extra)
        extra["anneal"] = {"manifest": f"{ANNEAL_DIR}/manifest.json", "rows": anneal_manifest["rows"],
                           "tokens": anneal_manifest["tokens"]}
        report["anneal"] = dict(extra["anneal"], fraction_of_tokens=round(extra["anneal"]["tokens"] / max(tokens, 1), 4),
                                requested_fraction=config.anneal_fraction)
        reporting.write_json(FileSystems.join(config.output, REPORT_FILE), report)
    write_manifest(config.output, shards, extra)  # last: its presence means every check passed
    if not quiet:
        print(f"shards: {FileSystems.join(config.output, DATA_DIR)} ({len(shards)} file(s)); "
              f"ledger: {FileSystems.join(config.output, LEDGER_DIR)}; "
              f"report: {FileSystems.join(config.output, REPORT_FILE)}; {elapsed:.1f} s")
    return report


def _checks(config: RunConfig, report: Dict[str, Any], counters: Optional[Dict[str, int]],
            shards: List[Dict[str, Any]]) -> List[str]:
    """Why this run's output must not be published (empty when it may)."""
    problems = []
    written = sum(s["rows"] for s in shards)
    if written != report["output"]["rows"]:
        problems.append(f"shard writers reported {written} rows but the shard files hold {report['output']['rows']}")
    if report.get("dedup", {}).get("converged") is False:
        problems.append(f"near-duplicate clustering did not converge in {config.dedup.max_rounds} rounds: "
                        "raise dedup.max_rounds")
    conservation = report["conservation"]
    if conservation["holds"] is None:
        print("[refinery] warning: this runner reported no metrics, so conservation could not be checked "
              "against an independent count", file=sys.stderr)
    elif not conservation["holds"]:
        problems.append(f"documents lost or double-counted: read {conservation['read']} != kept "
                        f"{conservation['kept']} + ledger {conservation['ledger']} (or counters disagree with the ledger)")
    if counters is not None:
        for name, _ in source_groups(config):
            if not counters.get(f"{SOURCE_RECORDS}{name}", 0):
                problems.append(f"source {name!r} yielded no records: its files hold no WARC response, JSONL or "
                                "Parquet record (the ledger's `read` rows say why)")
    if config.strict and report["kept"] == 0:
        problems.append("the run kept 0 documents (--strict)")
    return problems
