"""`refinery calibrate`: per-language thresholds from a corpus (a Beam job sharing `run`'s reading and extraction).

    refinery calibrate --source ref=GLOB ... --output thresholds.yaml [--min-docs 30] [--max-docs 2000]

Every document is extracted (WARC) or read (JSONL/Parquet text), its language identified (no threshold),
and what each rule measures recorded (`stages.calibration.measure`); per language, a deterministic sample
(the documents whose id hashes highest) reaches the driver, which applies `stages.calibration.RULE` and
writes the file `refinery run --thresholds` reads. Calibrate on clean prose in many languages, ideally
parallel (the same documents translated): the shipped file is built from NTREX-128 (`make thresholds`).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence

import apache_beam as beam
import yaml
from apache_beam.options.pipeline_options import PipelineOptions

from common.settings import add_set_flag, set_values
from pipeline.job.beam_options import check_beam_args, loopback_only_grpc
from pipeline.job.config import ConfigError, load_config
from pipeline.job.graph import read_sources
from pipeline.job.inputs import as_written, check_inputs, input_root, source_groups
from pipeline.job.run import DEFAULT_RUNNER
from pipeline.job.transforms import ApplyStage
from stages.calibration import calibrate, content_rates, content_totals, langid_thresholds
from stages.extraction.extract import Extractor
from stages.langid import LangIdConfig, LanguageIdentifier
from stages.record import Document
from stages.thresholds import script_family

LID_ONLY = "lid."  # source-name prefix of documents that only calibrate the language-ID thresholds


class IdentifyFn(beam.DoFn):
    """document -> (language, sample key, text) for the rule thresholds; with declared languages also, on the
    `lid` output, (lid.176's label, declared language, score bin), counted per distinct triple downstream."""

    LID = "lid"

    def __init__(self, langid_model: str | None, declared: bool):
        self._lid = LanguageIdentifier(LangIdConfig(model=langid_model, threshold=0.0, second_opinion=None))
        self._declared = declared  # the source name is the documents' language (reference corpora)

    def setup(self) -> None:
        self._lid.setup()

    def process(self, doc: Document) -> Iterable:
        from stages.calibration import score_bin

        detected, score = self._lid.predict(doc.text)
        lid_only = doc.source.startswith(LID_ONLY)
        lang = doc.source.removeprefix(LID_ONLY) if self._declared else detected
        if self._declared:
            yield beam.pvalue.TaggedOutput(self.LID, (detected, lang, score_bin(score)))
        if not (lid_only or (self._declared and lang not in self._lid.labels())):  # rule thresholds: only for
            key = int.from_bytes(hashlib.blake2b(doc.id.encode(), digest_size=8).digest(), "big")  # labels it gives
            yield lang, key, doc.text


def measure_page(row: tuple, short_line_chars: int, rates: dict) -> tuple:
    """(language, key, text) -> (language, (key, what each rule measures)); n-gram rules in words of content
    for the languages `rates` gives chars_per_word, else at every n (`RAW`)."""
    from stages.calibration import measure

    lang, key, text = row
    return lang, (key, measure(text, lang, short_line_chars, ngram_scale=None, chars_per_word=rates.get(lang)))


def _sum_totals(rows: Iterable[Sequence[int]]) -> tuple[int, ...]:
    return tuple(map(sum, zip(*rows))) or (0, 0, 0, 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="refinery calibrate",
        description="Measure every rule per detected language over a corpus and write per-language thresholds "
                    "(stages/calibration.py states the rule) for `refinery run --thresholds FILE`.")
    p.add_argument("--input", action="append", metavar="GLOB", default=[], help="WARC/JSONL/Parquet glob (repeatable)")
    p.add_argument("--source", action="append", metavar="NAME=GLOB", default=[], help="more inputs (repeatable)")
    p.add_argument("--lid-source", action="append", metavar="LANG=GLOB", default=[],
                   help="documents in language LANG (any ISO 639 code, also ones the model cannot name) that calibrate "
                        "only the language-ID thresholds (repeatable; needs --source-is-language)")
    p.add_argument("--output", required=True, metavar="YAML", help="the thresholds file to write")
    p.add_argument("--config", metavar="YAML", help="run config (reading, extraction and language-ID settings)")
    add_set_flag(p)
    p.add_argument("--min-docs", type=int, default=30,
                   help="documents a language needs for its own entry; fewer: its script family's (default 30)")
    p.add_argument("--max-docs", type=int, default=2000, help="documents sampled per language (default 2000)")
    p.add_argument("--reference", default="en", help="the language whose thresholds are moved (default en)")
    p.add_argument("--parallel", action="store_true",
                   help="the sources hold the same documents in each language (translations): word counts then give "
                        "each language's gopher_repetition.ngram_scale, and character counts the chars_per_word of "
                        "languages written without spaces")
    p.add_argument("--source-is-language", action="store_true",
                   help="each source's name is its documents' language (lid.176 code: --source de=GLOB); without it "
                        "documents count under the language the language-ID model detects")
    return p


def calibrate_corpus(argv: Sequence[str]) -> dict:
    parser = build_parser()
    args, beam_args = parser.parse_known_args(list(argv))
    check_beam_args(beam_args, parser)
    if args.lid_source and not args.source_is_language:
        raise ConfigError("--lid-source needs --source-is-language (its documents' language is the source name)")
    if args.min_docs < 2 or args.max_docs < args.min_docs:
        raise ConfigError("--min-docs must be >= 2 and --max-docs >= --min-docs")
    overrides = set_values(args.set_values, type(load_config()))
    overrides.update({"inputs": args.input, "output": args.output,
                      "sources": [*args.source, *(LID_ONLY + spec for spec in args.lid_source)]})
    config = load_config(args.config, overrides)
    if not config.inputs and not config.sources:
        raise ConfigError("no input: pass --input GLOB or --source NAME=GLOB")
    files = check_inputs([g for _, globs in source_groups(config) for g in globs], as_written(config))
    if not any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        beam_args = [f"--runner={DEFAULT_RUNNER}", *beam_args]
    root = input_root(files)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "samples")
        with loopback_only_grpc(), beam.Pipeline(options=PipelineOptions(beam_args)) as p:
            html, text, _ = read_sources(p, config, root)
            extracted, _ = html | "Extract" >> ApplyStage(Extractor(config.extract))
            identified = ([extracted, text]
                          | "AllDocuments" >> beam.Flatten()
                          | "Identify" >> beam.ParDo(IdentifyFn(config.langid.model, args.source_is_language))
                          .with_outputs(IdentifyFn.LID, main="rules"))
            rates = ((identified.rules
                      | "ContentTotals" >> beam.Map(lambda row: (row[0], content_totals(row[2], row[0])))
                      | "SumPerLanguage" >> beam.CombinePerKey(_sum_totals)
                      | "AllLanguages" >> beam.combiners.ToDict()
                      | "CharsPerWord" >> beam.Map(content_rates, args.reference))
                     if args.parallel else p | "NoRates" >> beam.Create([{}]))
            _ = (rates | "RatesAsJson" >> beam.Map(lambda r: json.dumps(["chars_per_word", r]))
                 | "WriteRates" >> beam.io.WriteToText(os.path.join(tmp, "rates"), file_name_suffix=".jsonl"))
            measured = identified.rules | "Measure" >> beam.Map(measure_page, config.fineweb.short_line_chars,
                                                                beam.pvalue.AsSingleton(rates))
            _ = (identified[IdentifyFn.LID]
                 | "CountLabels" >> beam.combiners.Count.PerElement()
                 | "LabelsAsJson" >> beam.Map(lambda kv: json.dumps(["label", *kv[0], kv[1]]))
                 | "WriteLabels" >> beam.io.WriteToText(os.path.join(tmp, "labels"), file_name_suffix=".jsonl"))
            _ = (measured
                 | "SamplePerLanguage" >> beam.combiners.Top.PerKey(args.max_docs, key=lambda item: item[0])
                 | "AsJson" >> beam.Map(lambda kv: json.dumps({"lang": kv[0], "metrics": [m for _, m in kv[1]]}))
                 | "Write" >> beam.io.WriteToText(prefix, file_name_suffix=".jsonl"))
        samples: dict[str, dict[str, list[float]]] = {}
        labelled: dict[str, dict[str, dict[int, int]]] = {}  # lid.176 label -> declared language -> bin -> pages
        pages: dict[str, int] = {}                           # declared language -> pages
        chars_per_word: dict[str, float] = {}               # languages without spaces -> content rate
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), encoding="utf-8") as fh:
                for line in fh:
                    row = json.loads(line)
                    if isinstance(row, list) and row[0] == "chars_per_word":
                        chars_per_word = row[1]
                        continue
                    if isinstance(row, list):  # ["label", lid.176 label, declared, bin, pages]
                        _, label, declared, score_bin, n = row
                        labelled.setdefault(label, {}).setdefault(declared, {})[score_bin] = n
                        pages[declared] = pages.get(declared, 0) + n
                        continue
                    per_key = samples.setdefault(row["lang"], {})
                    for metrics in row["metrics"]:
                        for key, value in metrics.items():
                            per_key.setdefault(key, []).append(value)
    fitted = langid_thresholds(labelled, pages, min_docs=args.min_docs) if labelled else None
    try:
        result = calibrate(samples, {lang: script_family(lang) for lang in {*samples, *labelled}}, args.min_docs,
                           args.reference, fitted, parallel=args.parallel, chars_per_word=chars_per_word)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    with open(args.output, "w", encoding="utf-8") as fh:
        yaml.safe_dump(result, fh, sort_keys=True, allow_unicode=True, width=120)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = calibrate_corpus(sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(f"refinery calibrate: error: {exc}", file=sys.stderr)
        return 2
    docs = result["calibration"]["documents"]
    rates = result["calibration"].get("langid", {})
    if rates:
        print("language-ID thresholds (kept-true: share of the label's own pages kept; let-through: the most any "
              "other language's pages pass as it):", file=sys.stderr)
        for label, row in rates.items():
            fitted = result["languages"][label]["langid"]
            print(f"  {label:>4} threshold {fitted['threshold']:.2f} confident {fitted['confident']:.2f}  kept-true "
                  + (f"{row['kept_true']:.1%}" if row["kept_true"] is not None else "   -  ")
                  + f" of {row['own_pages']}, let-through {row['let_through_worst']:.1%}"
                  + (f" ({row['worst_foreign']})" if row["worst_foreign"] else "")
                  + (f"; left to the second opinion: {', '.join(row['held_back_by_second'])}"
                     if row["held_back_by_second"] else ""), file=sys.stderr)
    print(f"[refinery] calibrated {len(result['languages'])} languages ({sum(docs.values())} documents), "
          f"{len(result['scripts'])} script families; languages under the minimum: "
          f"{', '.join(sorted(k for k in docs if k not in result['languages'])) or 'none'}", file=sys.stderr)
    return 0
