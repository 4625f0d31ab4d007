"""One typed run configuration: defaults <- YAML file <- command-line flags.

The stage configs (`WarcConfig`, `ExtractConfig`, `LangIdConfig`) live next to
their stages; this module only assembles them and checks the YAML against them,
so a misspelt key is an error instead of a silently ignored setting.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

import yaml

from stages.c4 import C4Config
from stages.decontam import DecontamConfig
from stages.dedup import DedupConfig
from stages.extract import ExtractConfig
from stages.fineweb import FineWebConfig
from stages.gopher import GopherQualityConfig, GopherRepetitionConfig
from stages.langid import LangIdConfig
from stages.pii import KINDS as PII_KINDS, PiiConfig
from stages.quality import QualityConfig
from stages.textsource import TextSourceConfig
from stages.warc import WarcConfig


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class RunConfig:
    inputs: Tuple[str, ...] = ()        # WARC globs (local paths or any Beam filesystem: gs://, s3://)
    output: str = ""                    # output folder: data/, ledger/, report.json
    source: str = "web"                 # value of the `source` column for these inputs
    overwrite: bool = False             # replace an earlier run's outputs in `output`
    sources: Tuple[str, ...] = ()       # more sources as "NAME=GLOB" (WARC, or JSONL/Parquet text)
    strict: bool = False                # a run that keeps 0 documents fails (no manifest)
    mix: Optional[str] = None           # target token shares "web=0.7,code=0.3"; None keeps everything
    mix_max_epochs: int = 4             # at most this many copies of a document (Muennighoff et al. 2023:
                                        # up to ~4 epochs of repeated data are nearly as good as new data)
    seed: int = 0                       # shard shuffle and mix draws
    shard_size_mb: float = 256.0        # target uncompressed text per output shard
    row_group_rows: int = 4096          # Parquet row group size: the unit streaming readers fetch
    anneal_fraction: Optional[float] = None  # also write anneal/: high-quality docs, this share of the tokens
    anneal_min_quality: float = 0.8     # quality_score needed to enter the anneal split
    num_shards: int = 0                 # ledger files (0 lets the runner choose)
    inject_errors: Tuple[str, ...] = () # fault injection for tests: "STAGE=URL_SUBSTRING" raises ValueError there
    warc: WarcConfig = field(default_factory=WarcConfig)
    text: TextSourceConfig = field(default_factory=TextSourceConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    langid: LangIdConfig = field(default_factory=LangIdConfig)
    gopher_repetition: GopherRepetitionConfig = field(default_factory=GopherRepetitionConfig)
    gopher_quality: GopherQualityConfig = field(default_factory=GopherQualityConfig)
    c4: C4Config = field(default_factory=C4Config)
    fineweb: FineWebConfig = field(default_factory=FineWebConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    decontam: DecontamConfig = field(default_factory=DecontamConfig)
    pii: PiiConfig = field(default_factory=PiiConfig)

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def _build(cls, values: Mapping[str, Any], where: str):
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"unknown setting {where + '.' if where else ''}{key}; "
                              f"known: {', '.join(sorted(known))}")
        kwargs[key] = _coerce(hints[key], value, f"{where + '.' if where else ''}{key}")
    return cls(**kwargs)


def _coerce(hint, value, where: str):
    if dataclasses.is_dataclass(hint):
        return _build(hint, value or {}, where)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:  # Optional[X]
        if value is None:
            return None
        hint = next(a for a in args if a is not type(None))
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:  # Tuple[X, ...]
            return tuple(_coerce(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if args and len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} items, got {value!r}")
        return tuple(_coerce(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value))) if args else tuple(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        if hint is int and value != int(value):
            raise ConfigError(f"{where}: expected a whole number, got {value!r}")
        return hint(value)
    if hint is str and not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value


def load_config(yaml_path: Optional[str] = None, overrides: Optional[Mapping[str, Any]] = None) -> RunConfig:
    """Defaults, then the YAML file, then `overrides` given as dotted keys ("langid.threshold")."""
    values: Dict[str, Any] = {}
    if yaml_path:
        try:
            with open(yaml_path, encoding="utf-8") as fh:
                values = yaml.safe_load(fh) or {}
        except OSError as exc:
            raise ConfigError(f"--config {yaml_path}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
            raise ConfigError(f"--config {yaml_path}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{yaml_path}: the top level must be a mapping")
    for dotted, value in (overrides or {}).items():
        node = values
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    config = _build(RunConfig, values, "")
    _check(config)
    return config


def _check(config: RunConfig) -> None:
    if not 0.0 <= config.langid.threshold <= 1.0:
        raise ConfigError(f"langid.threshold must be in [0, 1], got {config.langid.threshold}")
    if config.extract.timeout_s is not None and config.extract.timeout_s <= 0:
        raise ConfigError("extract.timeout_s must be positive (or null for no limit)")
    if config.extract.max_html_bytes <= 0 or config.warc.max_record_bytes <= 0:
        raise ConfigError("size caps must be positive")
    if config.anneal_fraction is not None and not 0 < config.anneal_fraction <= 1:
        raise ConfigError("anneal_fraction must be in (0, 1]")
    if config.anneal_fraction is not None and not config.quality.enabled:
        raise ConfigError("the anneal split needs quality scores: enable the quality stage")
    if not (0 < config.shard_size_mb < 1e7) or config.row_group_rows < 1:  # also rejects .inf and .nan
        raise ConfigError(f"shard_size_mb must be a positive number of MB below 1e7 (got {config.shard_size_mb}) "
                          f"and row_group_rows >= 1 (got {config.row_group_rows})")
    if config.mix_max_epochs < 1:
        raise ConfigError("mix_max_epochs must be >= 1")
    caps = {"warc.max_header_line_bytes": config.warc.max_header_line_bytes,
            "warc.max_header_bytes": config.warc.max_header_bytes, "warc.max_url_chars": config.warc.max_url_chars,
            "text.max_record_bytes": config.text.max_record_bytes, "text.max_url_chars": config.text.max_url_chars}
    bad = [k for k, v in caps.items() if v <= 0]
    if bad:
        raise ConfigError(f"size caps must be positive: {', '.join(bad)}")
    if config.warc.max_url_chars > config.warc.max_header_line_bytes:
        raise ConfigError("warc.max_url_chars must not exceed warc.max_header_line_bytes")
    bad = [s for s in config.sources if "=" not in s or not s.split("=", 1)[0].strip()]
    if bad:
        raise ConfigError(f"sources: expected NAME=GLOB, got {bad}")
    if config.num_shards < 0:
        raise ConfigError("num_shards must be >= 0")
    bad = [s for s in config.inject_errors if "=" not in s or not all(part.strip() for part in s.split("=", 1))]
    if bad:
        raise ConfigError(f"inject_errors: expected STAGE=URL_SUBSTRING, got {bad}")
    if config.quality.threshold is not None and not 0.0 <= config.quality.threshold <= 1.0:
        raise ConfigError(f"quality.threshold must be in [0, 1] or null, got {config.quality.threshold}")
    d = config.dedup
    if d.threshold is not None and not 0.0 < d.threshold < 1.0:
        raise ConfigError(f"dedup.threshold must be in (0, 1), got {d.threshold}")
    if d.threshold is None and d.bands * d.rows > d.num_perm:
        raise ConfigError(f"dedup: bands x rows = {d.bands * d.rows} exceeds num_perm = {d.num_perm}")
    if d.max_rounds < 1 or d.shingle_words < 1:
        raise ConfigError("dedup.max_rounds and dedup.shingle_words must be >= 1")
    if config.decontam.policy not in ("excise", "drop"):
        raise ConfigError(f"decontam.policy must be excise or drop, got {config.decontam.policy!r}")
    if config.decontam.n < 1 or config.decontam.min_words < 1:
        raise ConfigError("decontam.n and decontam.min_words must be >= 1")
    if not config.pii.budget_s > 0:
        raise ConfigError("pii.budget_s must be positive")
    unknown = set(config.pii.kinds) - set(PII_KINDS)
    if unknown:
        raise ConfigError(f"pii.kinds: unknown {sorted(unknown)}; known: {', '.join(PII_KINDS)}")
