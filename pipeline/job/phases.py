"""Beam's side of the job's tasks: each DoFn here is an adapter of a few lines around a plain task
(PrepareFile in pipeline/job/prepare.py, FinishPart and WritePart in pipeline/job/finish.py) that maps the
task's outputs to tagged outputs; the PTransforms route parts, decisions and side inputs between them.
Another scheduler (Slurm's array tasks, a loop in a test) calls the tasks without these."""
from __future__ import annotations

import json
import socket
import sys
from collections.abc import Generator, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

import apache_beam as beam
from apache_beam.internal import pickler
from apache_beam.io.filesystems import FileSystems

from pipeline.job.finish import (
    ANNEAL,
    ANNEAL_TOP,
    ANNEAL_TOP_N,
    EDITS,
    FINISHED,
    LEDGER,
    LEDGER_ROWS,
    SIGNATURE_FILES,
    STATS,
    Output,
)
from pipeline.job.holdout import VALID
from pipeline.job.inputs import InputFile
from pipeline.job.mix import Anneal, Mix
from pipeline.job.output import STATS_DIR
from pipeline.job.parts import part_paths, read_rows
from pipeline.job.prepare import PrepareFile, prepare_files
from pipeline.job.schema import part_value
from pipeline.job.signed import Signed, verify_shingles
from stages.dedup import DedupConfig
from stages.mix import mix_rates, site_of
from stages.origin import origin_evidence
from stages.record import StageEnvironmentError
from stages.table import missing_plugin_stages, plugins

if TYPE_CHECKING:
    from pipeline.job.part_hooks import PartEdit
    from pipeline.job.steps import Phase2Tasks

Result = TypeVar("Result")


def tagged(outputs: Generator[Output, None, Result], main: str | None = None):
    """A task's outputs as Beam's (the `main` tag's values untagged); returns the task's result."""
    try:
        while True:
            tag, value = next(outputs)
            yield value if tag == main else beam.pvalue.TaggedOutput(tag, value)
    except StopIteration as stop:
        return stop.value


class _TaskFn(beam.DoFn):
    """A task travels to the workers as bytes, beside the stage packages the driver built it with: a worker whose
    installation lacks one (a node's venv without the plugin) says so in one line, before it unpickles what it
    could not load, and never runs the job without that package's stages."""

    def __init__(self, task):
        self._packed, self._plugins, self._task = pickler.dumps(task), plugins(), None

    def setup(self) -> None:
        if self._task is None:
            missing = missing_plugin_stages(self._plugins)
            here = plugins()
            if missing or here != self._plugins:
                what = "; ".join(missing) or (f"stage packages {', '.join(here) or 'none'} installed, where the run "
                                              f"was started with {', '.join(self._plugins) or 'none'}")
                raise StageEnvironmentError(f"this worker ({socket.gethostname()}, {sys.executable}) is not "
                                            f"installed as the run's driver is: {what}: install the same stage "
                                            "packages on every worker")
            self._task = pickler.loads(self._packed)
        self._task.setup()

    def teardown(self) -> None:
        if self._task is not None:
            self._task.teardown()


class PrepareFiles(_TaskFn):
    """A list of input files -> the part key of each (PrepareFile). One file per element, except with --limit:
    then all files in name order in one element, read until the run's record budget is spent."""

    def __init__(self, task: PrepareFile, limit: int = 0):
        super().__init__(task)
        self._limit = limit

    def process(self, files: Sequence[InputFile]) -> Iterable[str]:
        for prepared in prepare_files(self._task, files, self._limit):
            yield prepared.key


class Prepare(beam.PTransform):
    """Input files -> the keys of their prepared parts (written, or reused when their markers match)."""

    def __init__(self, files: Sequence[InputFile], prepare_fn: PrepareFiles, one_task: bool):
        super().__init__()
        self._files, self._fn, self._one_task = list(files), prepare_fn, one_task

    def expand(self, pbegin):
        elements = [self._files] if self._one_task else [[f] for f in self._files]
        return (pbegin
                | "InputFiles" >> beam.Create(elements)
                | "SpreadFiles" >> beam.Reshuffle()
                | "PrepareFiles" >> beam.ParDo(self._fn)
                | "SpreadParts" >> beam.Reshuffle())


class ReadSigned(beam.DoFn):
    """A part key -> a packed `Signed` record per document (its signature, rank and tokens; the text only to
    compute shingles for `dedup.verify`); with `site`, also each record's site and language (grouped stages')."""

    def __init__(self, output: str, dedup: DedupConfig, file_index: dict[str, int], site: bool = False):
        self._output, self._dedup, self._file_index, self._site = output, dedup, file_index, site

    def process(self, key: str):
        columns = ["id", "url", "metadata", "exact_key", "bands", "quality_score", "chars", "tokens", "lang"]
        verify, first = self._dedup.verify, self._file_index[key] << 32
        rows = read_rows(part_paths(self._output, key)["docs.parquet"], columns + (["text"] if verify else []))
        for number, row in enumerate(rows, start=first):
            shingle_set = verify_shingles(part_value(row, "text"), row["lang"], self._dedup) if verify else None
            url = part_value(row, "url")
            origin = origin_evidence(url, json.loads(row["metadata"]) if row["metadata"] else {})
            yield Signed(row["id"], key, number, row["exact_key"], b"".join(row["bands"] or ()), row["quality_score"],
                         row["chars"], row["tokens"], shingle_set, origin=origin,
                         site=site_of(url) if self._site else "", lang=row["lang"] if self._site else None).pack()


class FinishParts(_TaskFn):
    """(part key, {"decided": [[Decision]], "sizes": [(id, size)], "edit:NAME": [value]}) -> FinishPart's outputs,
    tagged; the key (main) once the part is finished. Side input `sides`: {NAME: side value} of the PartEdits."""

    def __init__(self, task, edits: Sequence[str] = ()):
        super().__init__(task)
        self._edits = tuple(edits)

    def process(self, element, sides=None):
        key, joined = element
        if not joined["decided"]:
            raise RuntimeError(f"a stage's values or cluster sizes came for part {key}, which is not in this run")
        inputs = {name: (list(joined[f"edit:{name}"]), (sides or {}).get(name)) for name in self._edits}
        finished = yield from tagged(self._task.run(key, joined["decided"][0], dict(joined["sizes"]), inputs))
        yield finished.key


class WriteParts(_TaskFn):
    """A finished part's key -> WritePart's outputs, its shards' stats lines as the main output. Side inputs:
    the mix's rates and the anneal split's token totals."""

    def process(self, key: str, rates: dict[str, float], totals: dict[str, int]):
        yield from tagged(self._task.run(key, rates, totals), main=STATS)


class Finish(beam.PTransform):
    """(part keys, dedup's Decisions, cluster sizes) -> (phase 2's ledger drops, phase 1's ledger rows, the edit
    book's rows).
    Writes every part's finished documents, then its shards (data/, valid/, anneal/), the shards' stats and
    signatures/; the stages that edit parts (`edits`: PartEdits, pipeline/job/part_hooks.py) count first, then each
    part is joined what they counted for it."""

    def __init__(self, config, tasks: Phase2Tasks, edits: Sequence[PartEdit] = (),
                 file_index: dict[str, int] | None = None):
        super().__init__()
        self._config, self._tasks, self._edits, self._file_index = config, tasks, list(edits), dict(file_index or {})

    def expand(self, pcolls):
        keys, decisions, sizes = pcolls  # sizes: (part, (id, cluster size)) of documents dedup kept for others
        c, mix, anneal, p = self._config, self._tasks.mix, self._tasks.anneal, keys.pipeline
        decided = ({"part": keys | "PartKeys" >> beam.Map(lambda k: (k, None)),
                    "decided": decisions | "ByPart" >> beam.Map(lambda d: (d.part, d))}
                   | "DecisionsOfPart" >> beam.CoGroupByKey()
                   | "OfRunParts" >> beam.FlatMap(_decisions_of_part))
        joined, sides = {"decided": decided, "sizes": sizes}, []
        for edit in self._edits:
            per_part, side = edit.counts(decided, self._file_index)
            joined[f"edit:{edit.name}"] = per_part
            sides.append((edit.name, side))
        side_values = ([side | f"Side_{name}" >> beam.Map(lambda value, name=name: (name, value)) for name, side in sides]
                       or [p | "NoSides" >> beam.Create([])]) | "AllSides" >> beam.Flatten() | "Sides" >> beam.combiners.ToDict()
        tags = [tag for edit in self._edits for tag in edit.outputs]
        finished = (joined
                    | "CutsOfPart" >> beam.CoGroupByKey()
                    | "FinishParts" >> beam.ParDo(FinishParts(self._tasks.finish, [e.name for e in self._edits]),
                                                  beam.pvalue.AsSingleton(side_values))
                    .with_outputs(LEDGER, LEDGER_ROWS, FINISHED, EDITS, *tags, main="keys"))
        for edit, (_, side) in zip(self._edits, sides):
            edit.report({tag: finished[tag] for tag in edit.outputs}, side)
        rates, totals = p | "NoRates" >> beam.Create([{}]), p | "NoTotals" >> beam.Create([{}])
        if mix:
            weights = mix.weights
            rates = (finished[FINISHED]
                     | "SourceTokens" >> beam.Map(lambda f: (f[1], f[2] * f[4]))  # rehydrated tokens
                     | "PerSource" >> beam.CombinePerKey(sum)
                     | "TokensBySource" >> beam.combiners.ToDict()
                     | "MixRates" >> beam.Map(lambda tokens: mix_rates(weights, tokens)))
        if anneal:
            totals = anneal_totals(finished[FINISHED], anneal, rates, mix, c.holdout_fraction)
        written = (finished["keys"]
                   | "SpreadFinished" >> beam.Reshuffle()
                   | "WriteParts" >> beam.ParDo(WriteParts(self._tasks.write),
                                                beam.pvalue.AsSingleton(rates), beam.pvalue.AsSingleton(totals))
                   .with_outputs(LEDGER, VALID, ANNEAL, SIGNATURE_FILES, ANNEAL_TOP, main=STATS))
        if anneal:
            _ = (written[ANNEAL_TOP]
                 | "AnnealTopKeys" >> beam.Map(lambda r: ((r[0], r[1]), r[2]))
                 | "AnnealTopSums" >> beam.CombinePerKey(sum)
                 | "AnnealTopByKind" >> beam.Map(lambda kv: (kv[0][0], (kv[1], kv[0][1])))
                 | "AnnealTopN" >> beam.combiners.Top.LargestPerKey(ANNEAL_TOP_N)
                 | "AnnealTopJson" >> beam.Map(lambda kv: json.dumps({"kind": kv[0], "top": kv[1]}, ensure_ascii=False))
                 | "AnnealTopWrite" >> beam.io.WriteToText(FileSystems.join(c.output, STATS_DIR, ANNEAL_TOP),
                                                           shard_name_template="-SSSSS"))
        _ = (written[SIGNATURE_FILES]
             | "SignatureFiles" >> beam.io.WriteToText(FileSystems.join(c.output, STATS_DIR, SIGNATURE_FILES),
                                                        shard_name_template="-SSSSS"))
        for split, on in (("", True), (VALID, bool(c.holdout_fraction)), (ANNEAL, bool(anneal))):
            if on:
                folder = FileSystems.join(c.output, split) if split else c.output
                _ = (written[split or STATS]
                     | f"Stats{split}" >> beam.io.WriteToText(FileSystems.join(folder, STATS_DIR, "stats"),
                                                              shard_name_template="-SSSSS"))
        drops = (finished[LEDGER], written[LEDGER]) | "AllDrops" >> beam.Flatten()
        return drops, finished[LEDGER_ROWS], finished[EDITS]


def anneal_totals(finished, anneal: Anneal, rates, mix: Mix | None, holdout_fraction: float):
    """The anneal split's side input: the tallies of training and high-quality tokens, overall, per language and
    per page size class (a few thousand numbers at most), and those of the largest sites
    (`Anneal.sites_to_tally`: only they can be over their cap), whatever the crawl's number of sites."""
    tallies = (finished
               | "AnnealTallies" >> beam.FlatMap(anneal.tallies, beam.pvalue.AsSingleton(rates), mix, holdout_fraction)
               | "SumAnneal" >> beam.CombinePerKey(sum))
    small = tallies | "NotSites" >> beam.Filter(lambda kv: not kv[0].startswith(("hq|site:", "hq2|site:")))
    largest = (tallies
               | "SiteTotals" >> beam.Filter(lambda kv: kv[0].startswith("hq|site:") and kv[0].count("|") == 1)
               | "LargestSites" >> beam.combiners.Top.Of(anneal.sites_to_tally(), key=lambda kv: (kv[1], kv[0]))
               | "LargestNames" >> beam.Map(lambda top: {key for key, _ in top}))
    of_largest = (tallies
                  | "SiteSizes" >> beam.Filter(lambda kv: kv[0].startswith(("hq|site:", "hq2|site:"))
                                               and kv[0].count("|") == 3)
                  | "OfLargestSites" >> beam.Filter(lambda kv, names: "hq|" + kv[0].split("|")[1] in names,
                                                    beam.pvalue.AsSingleton(largest)))
    return ((small, of_largest)
            | "AnnealTotalsAll" >> beam.Flatten()
            | "AnnealTotals" >> beam.combiners.ToDict())


def _decisions_of_part(kv):
    """(part key, {"part": [..], "decided": [Decision]}) -> (part key, its Decisions), for the run's parts."""
    key, joined = kv
    if not joined["part"]:
        raise RuntimeError(f"dedup decided on documents of part {key}, which is not in this run")
    yield key, list(joined["decided"])
