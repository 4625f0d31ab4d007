"""The run configuration: the job's own settings plus one section per stage of the stage table.

`RunConfig` is assembled from `stages/table.py`: a stage module that declares a config class
adds its section here, to the YAML file, to `refinery run --help` and to `--set`, with nothing
to edit in this file. Loading and checking are `common/settings.py`'s (shared with training).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from common.settings import ConfigError, check, load_values, read_yaml, to_yaml
from stages.mix import parse_rehydration, parse_weights
from stages.table import sections, stage_table

__all__ = ["ConfigError", "JobConfig", "RunConfig", "load_config", "default_yaml"]


@dataclass(frozen=True)
class JobConfig:
    """The job's own settings (what to read, where to write, how to shard and mix)."""

    inputs: tuple[str, ...] = ()        # WARC globs (local paths or any Beam filesystem: gs://, s3://)
    output: str = ""                    # output folder: data/, ledger/, report.json, manifest.json
    source: str = "web"                 # value of the `source` column for --input files
    overwrite: bool = False             # replace an earlier run's outputs in `output` (prepared parts too)
    resume: bool = False                # reuse `output`'s prepared parts (phase 1, per input file) of an interrupted
                                        # or earlier run whose input file and phase-1 settings match; redo the rest
    limit: int = 0                      # a quick look: read at most this many records, files taken in name order; 0: all
    sample_fraction: float = 1.0        # a quick look: read this share of the records (chosen by id, the same on
                                        # every rerun)
    plan: str | None = None             # a `refinery plan --save` file: report.json sets its whole-input
                                        # predictions next to what this run measured
    robots: tuple[str, ...] = ()         # robots.txt captures: Common Crawl robotstxt WARC files, Parquet tables of
                                         # host, fetch_date, status, body, or folders of HOST.txt files; opt-outs by
                                         # host (optout)
    dedup_against: tuple[str, ...] = ()  # earlier runs' output folders: new documents that duplicate (exactly or
                                         # near) one of their documents are dropped (their signatures/ folders)
    sources: tuple[str, ...] = ()       # more sources as "NAME=GLOB": WARC files, or JSONL[.gz]/Parquet text
                                        # joining after extraction
    strict: bool = False                # a run that keeps 0 documents fails (exit 3, no manifest)
    mix: str | None = None              # target token shares, e.g. "web=0.7,code=0.3" (tokens ~ UTF-8 bytes / 4);
                                        # none keeps everything
    mix_max_epochs: int = 4             # at most this many copies of a document (Muennighoff et al. 2023:
                                        # up to ~4 epochs of repeated data are nearly as good as new data)
    seed: int = 0                       # mix and anneal draws
    # FineWeb-2's rehydration: a document that dedup kept for a cluster of duplicates is written this many times
    # (`rehydrate_weights`, by cluster size; at most mix_max_epochs), as repeats like the mix's
    rehydrate: bool = False
    # cluster size -> copies: widespread text is upweighted a little, the largest clusters (templates, spam) not;
    # the shape of FineWeb-2's published table (check its dataset card for the per-language weights it used)
    rehydrate_weights: str = "1:1,2:2,3-4:3,5-100:5,101-1000:8,1001-:1"
    shard_size_mb: float = 256.0        # target uncompressed text per output shard
    row_group_rows: int = 4096          # Parquet row group size: the unit streaming readers fetch
    anneal_fraction: float | None = None  # e.g. 0.1: also write anneal/ with high-quality documents,
                                          # about this share of the output's tokens
    anneal_min_quality: float = 0.8     # quality_score needed to enter the anneal split
    # The anneal split's spread, so that no page, site or language owns it (the demo's split was once 52 % one
    # spam page; defaults stated in docs/quality.md):
    anneal_max_page_share: float = 0.05      # a page over this share of the split's tokens is left out of it
    anneal_max_site_share: float = 0.2       # a site's pages are drawn less, so it holds at most this share
    anneal_max_language_excess: float = 2.0  # a language holds at most this many times its share of data/
    holdout_fraction: float = 0.005     # share of documents written to valid/ instead of data/ (chosen by a
                                        # hash of the id: the same documents on every rerun); 0: no valid/
    num_shards: int = 0                 # files per ledger writer, phase 1 and 2 (0 lets the runner choose)
    ledger_snippet_chars: int = 300     # text kept per ledger row, to judge a drop by; 0 keeps no text (privacy)
    # A document a stage takes longer than this on is ledgered as error:StageTimeout (the stage named) and the
    # run goes on; a stage stuck inside one C call for 3x this ends the run with one line. none: no limit
    # (extraction has its own, extract.timeout_s)
    stage_timeout_s: float | None = 60.0
    inject_errors: tuple[str, ...] = () # testing only: "STAGE=URL_SUBSTRING" makes STAGE raise ValueError there
    # Per-language thresholds: a file `refinery calibrate` writes, or "bundled" (stages/models/thresholds.yaml:
    # rules calibrated on NTREX-128 news, language ID on NTREX, FLORES-200 and Tatoeba); none: every language is
    # judged by the thresholds of the sections below
    thresholds: str | None = "bundled"
    # The settings the user gave (--config values that differ from the default, --set, flags): load_config
    # fills it. They win over a thresholds file the user did not choose (precedence: defaults < bundled
    # thresholds < --config < --set < flags); a file they chose themselves keeps its per-language values.
    user_settings: frozenset = field(default=frozenset(), init=False, compare=False, repr=False)

    def __post_init__(self):
        check(self.anneal_fraction is None or 0 < self.anneal_fraction <= 1, "anneal_fraction must be in (0, 1]")
        check(0 < self.anneal_max_page_share <= 1 and 0 < self.anneal_max_site_share <= 1,
              "anneal_max_page_share and anneal_max_site_share must be in (0, 1]")
        check(self.anneal_max_language_excess >= 1, "anneal_max_language_excess must be >= 1")
        check(0 <= self.holdout_fraction < 1, f"holdout_fraction must be in [0, 1), got {self.holdout_fraction}")
        check(0 < self.shard_size_mb < 1e7, f"shard_size_mb must be a positive number of MB below 1e7, "
                                            f"got {self.shard_size_mb}")
        check(self.row_group_rows >= 1, f"row_group_rows must be >= 1, got {self.row_group_rows}")
        check(self.mix_max_epochs >= 1, "mix_max_epochs must be >= 1")
        check(self.num_shards >= 0, "num_shards must be >= 0")
        check(self.limit >= 0, f"limit must be >= 0 (0: no limit), got {self.limit}")
        check(0 < self.sample_fraction <= 1, f"sample_fraction must be in (0, 1], got {self.sample_fraction}")
        check(not (self.resume and self.overwrite), "resume and overwrite exclude each other: --resume keeps the "
                                                   "prepared parts, --overwrite deletes them")
        check(0 <= self.ledger_snippet_chars <= 2000, "ledger_snippet_chars must be in [0, 2000]")
        check(self.stage_timeout_s is None or self.stage_timeout_s > 0, "stage_timeout_s must be > 0 or none")
        bad = [s for s in self.sources if "=" not in s or not s.split("=", 1)[0].strip()]
        check(not bad, f"sources: expected NAME=GLOB, got {bad}")
        bad = [s for s in self.inject_errors if "=" not in s or not all(p.strip() for p in s.split("=", 1))]
        check(not bad, f"inject_errors: expected STAGE=URL_SUBSTRING, got {bad}")
        try:
            if self.mix:
                parse_weights(self.mix)
            parse_rehydration(self.rehydrate_weights)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        quality = getattr(self, "quality", None)
        check(self.anneal_fraction is None or getattr(quality, "enabled", False),
              "the anneal split needs quality scores: enable the quality stage")

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["user_settings"] = sorted(self.user_settings)
        return out

    def overriding(self) -> frozenset[str]:
        """The user's stage settings ("section.key") that override the thresholds file's: all of them, unless
        they chose the file."""
        return frozenset() if "thresholds" in self.user_settings else frozenset(k for k in self.user_settings if "." in k)


TABLE = stage_table()

RunConfig = dataclasses.make_dataclass(
    "RunConfig", [(name, cls, field(default_factory=cls)) for name, cls in sections(TABLE)],
    bases=(JobConfig,), frozen=True,
    namespace={"__doc__": "Every setting of `refinery run`: the job's, then one section per stage.",
               "__module__": __name__})


def load_config(yaml_path: str | None = None, overrides: Mapping[str, Any] | None = None) -> RunConfig:
    """Defaults, then the YAML file, then `overrides` given as dotted keys ("langid.threshold"); the result
    knows which settings the user gave (`user_settings`)."""
    values = read_yaml(yaml_path) if yaml_path else {}  # once: `--config <(...)` is a pipe
    _check_sections(values, overrides)
    config = load_values(RunConfig, values, overrides)
    given = set(overrides or {})
    if yaml_path:  # a file restating a default (a generated one) sets nothing
        given |= set(differing(load_values(RunConfig, values), RunConfig()))
    object.__setattr__(config, "user_settings", frozenset(given))
    return config


def _check_sections(values: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> None:
    """A section no stage of this installation has (its package uninstalled, or a typo) is one line naming it."""
    from stages.table import plugins

    named = list(values) if isinstance(values, Mapping) else []
    named += [key.split(".", 1)[0] for key in (overrides or {})]
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted({str(name) for name in named if str(name).replace("-", "_") not in known})
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0].replace("-", "_"), sorted(known), n=1)
        installed = ", ".join(plugins()) or "none"
        raise ConfigError(f"unknown setting {unknown[0]}: no stage or setting of that name in this installation"
                          + (f" (did you mean {close[0]}?)" if close else
                             f" (a stage of another package that is not installed? stage packages: {installed})"))


def differing(config: Any, default: Any, prefix: str = "") -> dict[str, Any]:
    """{"section.key": value} of the settings of `config` that differ from `default`'s (what a user gave)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if not f.init:
            continue
        value, base = getattr(config, f.name), getattr(default, f.name)
        if dataclasses.is_dataclass(value):
            out.update(differing(value, base, f"{prefix}{f.name}."))
        elif value != base:
            out[prefix + f.name] = value
    return out


DEFAULT_YAML_HEADER = """\
Every setting of `refinery run`, at its default. Command-line flags override this file
(`refinery run --help` lists them; `--set section.key=value` reaches any of them).
Defaults follow FineWeb's published recipe (datatrove: Trafilatura(favour_precision) ->
LanguageFilter(0.65) -> Gopher -> MinHash 14x8) unless a comment says why not.
Generated from the config classes: `python -m pipeline.commands.docs --write` after changing one."""


def default_yaml() -> str:
    return to_yaml(RunConfig(), header=DEFAULT_YAML_HEADER)


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in a command line (`--flag V` or `--flag=V`), None when absent."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None
