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

import dataclasses
import functools
import importlib
import pkgutil
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Where a stage runs. "document" stages are per-document classes (`Stage`); the others are wired
# by the pipeline: reading files, extraction (HTML documents only, before text sources join), global
# stages over all documents (dedup, decontamination, mixing: each a GlobalStage, its spec's `job`), and
# the last check before a shard is written.
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
    scores: tuple[str, ...] = ()                   # score columns the stage writes (`doc.with_score(name, x)`): each
                                                   # a float column of the shards
    plugin: str = ""                               # "distribution==version" of a stage from another package
    job: Any = ""                                  # of a global stage: "module:Class" of its GlobalStage in the job
                                                   # (pipeline/job/globals/), imported when on; without it, `build`
                                                   # gives a GroupedStage (stages/grouped.py)

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
    label: str = ""                                # how an error line names it (default: its name)
    plugin: str = ""                               # "distribution==version" of a format from another package


@functools.cache
def format_table(package: str = "stages") -> tuple[InputFormat, ...]:
    """Every InputFormat declared in the package's modules (and the stage packages installed), in the order of
    their modules' names."""
    found: list[InputFormat] = []
    for module, plugin in stage_modules(package):
        found.extend(dataclasses.replace(f, plugin=plugin) if plugin else f for f in getattr(module, "FORMATS", ())
                     if isinstance(f, InputFormat))
    names = [f.name for f in found]
    shared = sorted({n for n in names if names.count(n) > 1})
    if shared:
        raise PluginError(f"input formats share a name: {shared}")
    return tuple(found)


ERROR_REASON = "error"  # any stage: the ledger says error:<ExceptionType>
ANY_STAGE_REASONS = {f"{ERROR_REASON}:<Type>": "a stage raised, e.g. `error:ValueError`; the document is "
                     "ledgered and the job goes on (detail: the message). `--inject-error STAGE=URL_PART` "
                     "provokes one, to test this on any runner"}


def specs_in(module) -> tuple[StageSpec, ...]:
    found = getattr(module, "SPECS", ()) + ((module.SPEC,) if hasattr(module, "SPEC") else ())
    return tuple(s for s in found if isinstance(s, StageSpec))


PLUGIN_GROUP = "refinery.stages"  # entry points of other packages: a module declaring SPEC(S) and/or FORMATS


class PluginError(ValueError):
    """A stage package that cannot be loaded or clashes with the table: one line naming it."""


@functools.cache
def stage_modules(package: str = "stages") -> tuple[tuple[Any, str], ...]:
    """(module, plugin) of every module of the package (sub-packages included; plugin "") and of every module
    another installed package registers in the `refinery.stages` entry-point group (plugin "NAME==VERSION")."""
    root = importlib.import_module(package)
    found = [(importlib.import_module(info.name), "") for info in pkgutil.walk_packages(root.__path__, prefix=package + ".")
             if not info.name.rsplit(".", 1)[-1].startswith("_") and _declares_stages(info)]
    if package == "stages":
        found += plugin_modules()
    return tuple(found)


_DECLARATION = re.compile(rb"^(SPECS|SPEC|FORMATS)\s*[:=]", re.M)


def _declares_stages(info: pkgutil.ModuleInfo) -> bool:
    """Whether a module of the package declares stages or formats at its top level, read from its source
    without importing it: the table imports stage modules only, not the recipes and evaluations beside them
    (calibration, model training, benchmarks' readers). A sub-package is walked whatever its __init__ says."""
    if info.ispkg:
        return True
    spec = info.module_finder.find_spec(info.name.rsplit(".", 1)[-1])
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return True  # compiled or frozen: import it and look
    with open(origin, "rb") as fh:
        return _DECLARATION.search(fh.read()) is not None


def plugin_modules() -> list[tuple[Any, str]]:
    from importlib.metadata import entry_points

    found = []
    for point in sorted(entry_points(group=PLUGIN_GROUP), key=lambda p: (p.dist.name if p.dist else "", p.name)):
        plugin = f"{point.dist.name}=={point.dist.version}" if point.dist else point.name
        try:
            loaded = point.load()
        except Exception as exc:
            raise PluginError(f"stage plugin {plugin} (entry point {point.name} = {point.value}) does not load: "
                              f"{type(exc).__name__}: {exc}") from None
        found.append((loaded, plugin))
    return found


def plugins() -> dict[str, list[str]]:
    """{"NAME==VERSION": [its stages and formats]} of the stage packages installed (the manifest names them)."""
    out: dict[str, list[str]] = {}
    for spec in stage_table():
        if spec.plugin:
            out.setdefault(spec.plugin, []).append(spec.name)
    for fmt in format_table():
        if fmt.plugin:
            out.setdefault(fmt.plugin, []).append(f"format {fmt.name}")
    return dict(sorted(out.items()))


def missing_plugin_stages(recorded: Mapping[str, Sequence[str]]) -> list[str]:
    """What a run's record of stage packages ({"NAME==VERSION": [stages and formats]}, as `plugins()` wrote it into
    a manifest or a part's marker) names that this installation lacks, one phrase each ("stage wordcap of
    refinery-wordcap 1.0.0 (not installed)"); another version of a package that has the stage is not missing."""
    installed = {name.split("==", 1)[0]: (name.split("==", 1)[1], set(stages)) for name, stages in plugins().items()}
    found = []
    for name, stages in sorted(recorded.items()):
        package, _, version = name.partition("==")
        here_version, here_stages = installed.get(package, (None, set()))
        for stage in stages:
            if stage not in here_stages:
                what = "not installed" if here_version is None else f"{here_version} installed, without it"
                found.append(f"{'' if stage.startswith('format ') else 'stage '}{stage} of {package} {version} "
                             f"({what})")
    return found


def _specs_of(loaded: Any) -> tuple[StageSpec, ...]:
    """A module's SPEC/SPECS, or a StageSpec, or a sequence of them (what an entry point may name)."""
    if isinstance(loaded, StageSpec):
        return (loaded,)
    if isinstance(loaded, (tuple, list)):
        return tuple(s for s in loaded if isinstance(s, StageSpec))
    return specs_in(loaded)


@functools.cache
def stage_table(package: str = "stages") -> tuple[StageSpec, ...]:
    """Every StageSpec declared in the package's modules (sub-packages included) and, for `stages`, in the stage
    packages installed (`refinery.stages` entry points), ordered."""
    specs: list[StageSpec] = []
    for module, plugin in stage_modules(package):
        specs.extend(dataclasses.replace(s, plugin=plugin) if plugin else s for s in _specs_of(module))
    for what, key in (("name", lambda s: s.name), ("order number", lambda s: s.order)):
        values = [key(s) for s in specs]
        shared = sorted({v for v in values if values.count(v) > 1})
        if shared:
            who = sorted({s.plugin or "refinery" for s in specs if key(s) in shared})
            raise PluginError(f"stages share a {what}: {shared} (declared by {', '.join(who)})")
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
