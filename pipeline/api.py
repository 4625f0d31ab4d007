"""Refinery from Python: the job, the stages and a run's outputs, with the same settings and guarantees as the
`refinery` command (which is a thin layer over `run_argv`). Imported as `refinery`:

    import refinery

    result = refinery.run(inputs=["data/warc/*.warc.gz"], output="out/py", overwrite=True,
                          settings={"quality.enabled": False})          # any key of configs/default.yaml
    result.conservation["holds"], result.rows, result.funnel[0]
    for doc, drop in refinery.apply(["A paragraph of text ...", {"html": "<html>...", "url": "https://..."}],
                                    stages=["extract", "langid", "gopher_quality"]):
        ...                                                             # doc kept, or drop with stage and reason
    run = refinery.open_run("out/py")
    run.table("train"), run.ledger(), run.hf_dataset("train")           # pyarrow tables, a datasets.Dataset

Every way a run can fail is one `RunError` whose `line` is the line the command prints and `exit_code` the
command's exit code (docs/guarantees.md, "Exit codes"); the original exception is its `__cause__`.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from pipeline import storage
from pipeline.engines import EngineLost
from pipeline.job.config import ConfigError, RunConfig, differing, load_config
from stages.record import Document, Drop, StageEnvironmentError, stable_id
from stages.runner import StageRunner, chunks, held_chars
from stages.table import DOCUMENT, EXTRACT, stage_table


class RunError(Exception):
    """A run that did not finish: `line` says why in one line (as `refinery run` prints it), `exit_code` is the
    command's (2 a mistake in the settings or inputs, 3 a check after the job failed, 1 anything else)."""

    def __init__(self, line: str, exit_code: int, internal: bool = False):
        super().__init__(line)
        self.line, self.exit_code, self.internal = line, exit_code, internal


class _ReportFacts:
    report: dict[str, Any]

    @property
    def funnel(self) -> list[dict[str, Any]]:
        """Per stage, in order: in, kept, dropped, dropped_by_reason, notes."""
        return self.report["funnel"]

    @property
    def conservation(self) -> dict[str, Any]:
        """read = kept + held out + ledger, and whether it holds (it does in every run that finished)."""
        return self.report["conservation"]


@dataclasses.dataclass(frozen=True)
class RunResult(_ReportFacts):
    """What a finished run wrote (the same facts as OUTPUT/report.json, which `report` holds whole)."""

    output: str
    report: dict[str, Any]

    @property
    def rows(self) -> int:
        return self.report["output"]["rows"]

    @property
    def shards(self) -> list[str]:
        """Paths of the training shards (data/part-*.parquet)."""
        return [storage.join(self.output, s["path"]) for s in self.open().manifest["shards"]]

    @property
    def ledger(self) -> str:
        """The folder of the drop ledger's Parquet files."""
        return storage.join(self.output, "ledger")

    def open(self) -> Run:
        return open_run(self.output)


def run(*, output: str, inputs: str | Sequence[str] = (), sources: Mapping[str, str | Sequence[str]] | None = None,
        config: RunConfig | str | None = None, settings: Mapping[str, Any] | None = None,
        overwrite: bool | None = None, resume: bool | None = None, beam_args: Sequence[str] = (),
        quiet: bool = True) -> RunResult:
    """Run the job: `inputs` (globs, source `web`) and `sources` ({name: glob(s)}) into `output`. Settings come from
    `config` (a RunConfig, or a YAML file as `--config` reads it), then `settings` ({"section.key": value}, as
    `--set` and YAML give them); `beam_args` are Beam pipeline options (default: the local FnApiRunner)."""
    from pipeline.job.beam_options import check_beam_args
    from pipeline.job.run import build_parser, checked, run_config

    overrides: dict[str, Any] = dict(settings or {})
    if inputs:
        overrides["inputs"] = [inputs] if isinstance(inputs, str) else list(inputs)
    for name, globs in (sources or {}).items():
        for glob in [globs] if isinstance(globs, str) else globs:
            overrides.setdefault("sources", []).append(f"{name}={glob}")
    overrides["output"] = output
    overrides.update({k: v for k, v in (("overwrite", overwrite), ("resume", resume)) if v is not None})  # else the config's
    try:
        found = load_config(None, {**differing(config, RunConfig()), **overrides}) if isinstance(config, RunConfig) \
            else load_config(config, overrides)
        check_beam_args(beam_args, build_parser())
        report = run_config(checked(found), beam_args, quiet=quiet)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        raise error_of(exc, output) from exc
    return RunResult(output, report)


def run_argv(argv: Sequence[str], interrupted: Callable[[], int] = lambda: 0) -> RunResult:
    """`refinery run ARGV` (flags exactly as the command takes them). `interrupted()`: the signal that interrupted
    the run, 0 if none (the command's handler sets it)."""
    from pipeline.job.config import flag_value
    from pipeline.job.run import run as run_job

    try:
        report = run_job(argv, interrupted=lambda: bool(interrupted()))
    except BaseException as exc:  # noqa: B036  (every way out is one RunError; see error_of)
        raise error_of(exc, flag_value(argv, "--output"), interrupted()) from exc
    return RunResult(flag_value(argv, "--output") or "", report)


def error_of(exc: BaseException, output: str | None = None, signum: int = 0) -> RunError:
    """The one line and exit code for a run that ended with `exc` (`signum`: the signal that interrupted it)."""
    from pipeline.job.publish import RunFailed

    if signum or isinstance(exc, KeyboardInterrupt):  # first: Beam may re-raise an interrupt as another type
        sig = signal.Signals(signum or signal.SIGINT)
        where = f" {output}" if output else ""
        state = (f"{where} holds the previous complete output again (put back)"
                 if output and storage.exists(storage.join(output, "manifest.json"))
                 else f" the output{where} is incomplete and has no manifest")
        return RunError(f"interrupted by {sig.name};{state}. Run the same command with --resume to continue (input "
                        "files already prepared are not read again), or with --overwrite to start over.", 128 + sig)
    if isinstance(exc, RunFailed):
        return RunError(f"error: {exc}", RunFailed.exit_code)
    cause = _cause(exc)
    if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
        return RunError(f"error: no space left on the device ({one_line(exc)}); nothing was published. Free space, "
                        "then run the same command with --resume (input files already prepared are kept)", 1)
    if isinstance(cause, EngineLost):
        return RunError(f"error: {one_line(exc)}", 1)
    if is_grpc_error(cause):
        return RunError(f"error: the Beam job service stopped answering ({_grpc_summary(cause)}); the job's state is "
                        "unknown and nothing was published: check the runner, then rerun with --resume", 1)
    if isinstance(cause, (ConfigError, StageEnvironmentError, OSError, ValueError)):
        return RunError(f"error: {one_line(exc)}", 2)
    return RunError(f"internal error: {one_line(exc)} (set REFINERY_DEBUG=1 for the traceback)", 1, internal=True)


def _cause(exc: BaseException) -> BaseException:
    """The exception behind Beam's wrapping: Beam re-raises a DoFn's error as RuntimeError('OSError: ... [while
    running STEP]') when it cannot rebuild its type (an OSError with an errno), from inside the handler."""
    seen = exc
    for _ in range(10):
        if not isinstance(seen, RuntimeError) or type(seen).__module__ != "builtins":
            return seen
        inner = seen.__cause__ or seen.__context__
        if inner is None:
            return seen
        seen = inner
    return seen


def is_grpc_error(exc: BaseException) -> bool:
    return any(cls.__module__.startswith("grpc") for cls in type(exc).__mro__)


def _grpc_summary(exc: BaseException) -> str:
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    try:
        return f"{code().name}: {details()}" if callable(code) and callable(details) else type(exc).__name__
    except Exception:
        return type(exc).__name__


def one_line(exc: BaseException) -> str:
    from common.settings import error_text

    return error_text(exc)


# ---------------------------------------------------------------- the stages over documents in memory

def apply(documents: Iterable[Document | str | Mapping[str, Any]], stages: Sequence[str] | None = None,
          config: RunConfig | str | None = None, settings: Mapping[str, Any] | None = None,
          count: Callable[[str, int], None] | None = None) -> Iterator[tuple[Document | None, Drop | None]]:
    """The per-document stages of the table (all that are enabled, or those named in `stages`, in the table's
    order) over `documents`, through the job's stage runner: one (document, None) or (None, drop) per input, in
    order. A document is a `Document`, a text, or a mapping with `text` or `html` (HTML is extracted first) and
    optionally `url`, `id`, `source`, `lang`. Global stages (dedup, decontamination, the mix) need a run.
    `count(name, n)` receives the job's counters (`<stage>.in`, `.drop.<reason>`, ...)."""
    from pipeline.job.steps import document_step

    run_config = load_config(None, {**differing(config, RunConfig()), **(settings or {})}) if isinstance(config, RunConfig) \
        else load_config(config, settings)
    per_document = [spec for spec in stage_table() if spec.runs in (EXTRACT, DOCUMENT)]
    if stages is None:
        chosen = [spec for spec in per_document if spec.is_enabled(run_config)]
    else:
        known = {spec.name: spec for spec in per_document}
        unknown = [name for name in stages if name not in known]
        if unknown:
            raise ConfigError(f"apply: no per-document stage named {', '.join(map(repr, unknown))} (per-document "
                              f"stages: {', '.join(known)}; the global ones need refinery.run)")
        chosen = [spec for spec in per_document if spec.name in set(stages)]
    runner = StageRunner([document_step(spec, run_config) for spec in chosen], **({"count": count} if count else {}))
    with runner:
        items = (_as_document(item, n) for n, item in enumerate(documents))
        for chunk in chunks(items, lambda item: held_chars(item[1])):
            ids = [doc.id for _, doc in chunk]
            if len(set(ids)) < len(ids):  # a chunk's results are matched to its inputs by id
                twice = next(i for i in ids if ids.count(i) > 1)
                raise ConfigError(f"apply: two inputs have the id {twice!r}; ids must be unique")
            kept, drops = runner.run([doc for _, doc in chunk], [is_html for is_html, _ in chunk])
            by_id: dict[str, Document | Drop] = {doc.id: doc for doc in kept}
            by_id.update((drop.id, drop) for drop in drops)
            for _, doc in chunk:
                result = by_id[doc.id]
                yield (result, None) if isinstance(result, Document) else (None, result)


def _as_document(item: Document | str | Mapping[str, Any], n: int) -> tuple[bool, Document]:
    """(read as HTML?, the Document) of one input of `apply`."""
    if isinstance(item, Document):
        return item.html is not None and not item.text, item
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, Mapping) or not isinstance(item.get("text", item.get("html")), str):
        raise ConfigError(f"apply: input {n} is neither a Document, a text, nor a mapping with `text` or `html`")
    source = str(item.get("source", "python"))
    doc = Document(id=str(item.get("id") or stable_id("apply", source, str(n))), url=str(item.get("url", "")),
                   source=source, text=item.get("text", "") or "", html=item.get("html"), lang=item.get("lang"))
    return doc.html is not None and not doc.text, doc


# ---------------------------------------------------------------- a finished run's outputs

SPLITS = {"train": "", "valid": "valid", "anneal": "anneal"}


class Run(_ReportFacts):
    """A finished run's outputs (`open_run`): shards per split, the ledger, the edit book, the report."""

    def __init__(self, path: str):
        self.path = path
        self.manifest: dict[str, Any] = _read_json(storage.join(path, "manifest.json"))
        self.report: dict[str, Any] = _read_json(storage.join(path, "report.json"))

    def split_manifest(self, split: str = "train") -> dict[str, Any] | None:
        """The manifest of a split (None when the run made none)."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}: one of {', '.join(SPLITS)}")
        if split == "train":
            return self.manifest
        path = storage.join(self.path, SPLITS[split], "manifest.json")
        return _read_json(path) if storage.exists(path) else None

    def shard_paths(self, split: str = "train") -> list[str]:
        manifest = self.split_manifest(split)
        folder = storage.join(self.path, SPLITS[split]) if SPLITS[split] else self.path
        return [storage.join(folder, s["path"]) for s in (manifest or {}).get("shards", [])]

    def table(self, split: str = "train", columns: Sequence[str] | None = None):
        """The split's documents as one pyarrow Table (a split the run did not make raises ValueError)."""
        import pyarrow.parquet as pq

        paths = self.shard_paths(split)
        if self.split_manifest(split) is None:
            raise ValueError(f"{self.path} has no {split} split")
        if not paths:
            from pipeline.job.schema import DOCUMENT_SCHEMA

            return DOCUMENT_SCHEMA.empty_table().select(list(columns)) if columns else DOCUMENT_SCHEMA.empty_table()
        filesystem, paths = storage.arrow_paths(paths)
        return pq.ParquetDataset(paths, filesystem=filesystem).read(columns=list(columns) if columns else None)

    def ledger(self, columns: Sequence[str] | None = None):
        """Every document not in the output, with stage and reason (a pyarrow Table)."""
        return self._folder_table("ledger", columns)

    def edits(self, columns: Sequence[str] | None = None):
        """What stages cut from documents they kept (a pyarrow Table; None when no stage cut anything)."""
        return self._folder_table("edits", columns) if storage.holds_files(storage.join(self.path, "edits")) else None

    def hf_dataset(self, split: str = "train"):
        """The split as a Hugging Face `datasets.Dataset` (needs the `datasets` package)."""
        import datasets

        return datasets.Dataset(self.table(split))

    def _folder_table(self, folder: str, columns: Sequence[str] | None):
        import pyarrow.dataset as ds

        return ds.dataset(storage.join(self.path, folder), format="parquet").to_table(
            columns=list(columns) if columns else None)


def open_run(path: str) -> Run:
    """A finished run's outputs; a folder without a manifest (no run, or one that did not finish) is a RunError."""
    if not storage.exists(storage.join(path, "manifest.json")):
        raise RunError(f"error: {path} holds no finished run (no manifest.json: nothing written there, or the run "
                       "did not finish; `refinery run ... --resume` finishes it)", 2)
    return Run(path)


def _read_json(path: str) -> dict[str, Any]:
    with storage.open_raw(path) as fh:
        return json.loads(fh.read().decode("utf-8"))
