"""The stage table: every step of the recipe, in order, found in the modules of `stages/`.

A stage module declares `SPEC = StageSpec(...)` (or `SPECS = (...)`): the stage's name, its
config dataclass (its section of the YAML file and its flags), where in the job it runs, when
it is on, its pre-flight check and its drop reasons. The job (`pipeline/job/run.py`), the
pre-flight checks, the funnel, the default config file and docs/stages.md's reason table are all
derived from this table, so adding a filter is one file in `stages/` and its test:

    SPEC = StageSpec(name="short_pages", order=65, config=ShortPagesConfig, build=ShortPages,
                      reasons={"too_short": "fewer than min_chars characters"})
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# Where a stage runs. "document" stages are per-document classes (`Stage`); the others are wired
# by the pipeline, which knows them by name: reading files, extraction (HTML documents only, before
# text sources join), global steps over all documents (dedup, decontamination, mixing), and the
# last check before a shard is written.
READ, EXTRACT, DOCUMENT, GLOBAL, WRITE = "read", "extract", "document", "global", "write"
PLACES = (READ, EXTRACT, DOCUMENT, GLOBAL, WRITE)


@dataclass(frozen=True)
class StageSpec:
    name: str                                      # funnel and ledger name
    order: int                                     # position in the recipe (the table is sorted by it)
    reasons: Mapping[str, str]                     # drop reason -> what it means (docs/stages.md's table)
    config: type | None = None                     # config dataclass: the YAML section `section` and its flags
    section: str | None = None                     # YAML section (default: the name); stages may share one
    runs: str = DOCUMENT
    build: Callable[[Any], Any] | None = None      # config -> Stage (document stages)
    enabled: Callable[[Any], bool] | None = None   # run config -> on? (default: section's `enabled`, else on)
    check: Callable[[Any], None] | None = None     # run config -> raises if the stage cannot run (pre-flight)
    inputs: Callable[[Any], Mapping[str, Any]] | None = None  # run config -> keyword arguments of `build` from
                                                   # other sections (the model of another stage it asks)
    about: str = ""                                # one line for docs/stages.md's stage column

    def __post_init__(self):
        if self.runs not in PLACES:
            raise ValueError(f"stage {self.name}: runs must be one of {PLACES}, not {self.runs!r}")
        if self.runs == DOCUMENT and self.build is None:
            raise ValueError(f"stage {self.name}: a document stage needs `build`")
        if self.config is not None and self.section is None:
            object.__setattr__(self, "section", self.name)

    def settings(self, run_config: Any) -> Any:
        """This stage's section of a run config (None without a config)."""
        return getattr(run_config, self.section) if self.section else None

    def is_enabled(self, run_config: Any) -> bool:
        if self.enabled is not None:
            return bool(self.enabled(run_config))
        return bool(getattr(self.settings(run_config), "enabled", True))

    def make(self, run_config: Any):
        """The per-document stage, built from its settings (and the run's per-language thresholds file)."""
        settings = self.settings(run_config)
        stage = self.build(settings, **(self.inputs(run_config) if self.inputs else {}))
        path = getattr(run_config, "thresholds", None)
        if path and self.section:
            from stages.thresholds import attach

            attach(stage, settings, self.section, path, getattr(run_config, "overriding", lambda: frozenset())())
        return stage

    def preflight(self, run_config: Any) -> None:
        """Fail now, with one line, if this stage could not run (missing model, bad language code)."""
        if self.check is not None:
            self.check(run_config)
        elif self.runs in (DOCUMENT, EXTRACT) and self.build is not None:
            self.make(run_config).check()


@dataclass(frozen=True)
class InputFormat:
    """A kind of input file, declared by its reader's module as `FORMATS = (InputFormat(...),)`: the readers'
    table, so a new format (WET text, a Hugging Face folder) is one module and its test.

    `sniff(path, head, inner)`: 2 when the file's first bytes are this format's (`inner`: the first bytes
    inside a gzip file), 1 when only its name says so (a file damaged from its first byte is still read by
    its reader, which ledgers what it cannot read), 0 otherwise; the highest wins.
    `read(stream, *, source, filename, gzipped, settings, count)`: the file's Documents and Drops (`settings`:
    `stages.formats.ReadSettings`; `count(name)` a note of the read stage `stage`); `html`: its documents
    are HTML still to extract."""

    name: str
    stage: str
    html: bool
    sniff: Callable[[str, bytes, bytes], int]
    read: Callable[..., Any]


@functools.cache
def format_table(package: str = "stages") -> tuple[InputFormat, ...]:
    """Every InputFormat declared in the package's modules, in the order of their modules' names."""
    root = importlib.import_module(package)
    found: list[InputFormat] = []
    for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
        if not info.name.rsplit(".", 1)[-1].startswith("_"):
            found.extend(f for f in getattr(importlib.import_module(info.name), "FORMATS", ())
                         if isinstance(f, InputFormat))
    names = [f.name for f in found]
    shared = sorted({n for n in names if names.count(n) > 1})
    if shared:
        raise ValueError(f"input formats share a name: {shared}")
    return tuple(found)


ERROR_REASON = "error"  # any stage: the ledger says error:<ExceptionType>
ANY_STAGE_REASONS = {f"{ERROR_REASON}:<Type>": "a stage raised, e.g. `error:ValueError`; the document is "
                     "ledgered and the job goes on (detail: the message). `--inject-error STAGE=URL_PART` "
                     "provokes one, to test this on any runner"}


def specs_in(module) -> tuple[StageSpec, ...]:
    found = getattr(module, "SPECS", ()) + ((module.SPEC,) if hasattr(module, "SPEC") else ())
    return tuple(s for s in found if isinstance(s, StageSpec))


@functools.cache
def stage_table(package: str = "stages") -> tuple[StageSpec, ...]:
    """Every StageSpec declared in the package's modules (sub-packages included), ordered."""
    root = importlib.import_module(package)
    specs: list[StageSpec] = []
    for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
        if not info.name.rsplit(".", 1)[-1].startswith("_"):
            specs.extend(specs_in(importlib.import_module(info.name)))
    for what, values in (("name", [s.name for s in specs]), ("order number", [s.order for s in specs])):
        shared = sorted({v for v in values if values.count(v) > 1})
        if shared:
            raise ValueError(f"stages share a {what}: {shared}")
    return tuple(sorted(specs, key=lambda s: s.order))


def sections(table: tuple[StageSpec, ...]) -> list[tuple[str, type]]:
    """(section, config class) in table order, each section once."""
    seen: dict[str, type] = {}
    for spec in table:
        if spec.config is None:
            continue
        if spec.section in seen and seen[spec.section] is not spec.config:
            raise ValueError(f"section {spec.section!r} has two config classes")
        seen.setdefault(spec.section, spec.config)
    return list(seen.items())


def reason_rows(table: tuple[StageSpec, ...]) -> list[tuple[str, str, str]]:
    """(stage, reason, meaning) for every declared reason, in table order, then errors of any stage."""
    rows = [(spec.name, reason, meaning) for spec in table for reason, meaning in spec.reasons.items()]
    return rows + [("any", reason, meaning) for reason, meaning in ANY_STAGE_REASONS.items()]


SPECS = (StageSpec(name="write", order=1000, runs=WRITE, about="the last check before a shard", reasons={
    "unwritable": "the record cannot be stored as the output schema requires (checked before any shard)"}),)
