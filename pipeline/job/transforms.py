"""Beam wiring of the stages. No cleaning logic lives here: only reading, routing and counting (through
pipeline/counters.py, which names the counters)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import apache_beam as beam
from apache_beam.io import fileio

from pipeline.counters import runner
from pipeline.job.readers import FileReader
from stages.record import Drop, Stage
from stages.runner import Step

LEDGER = "ledger"
DOCUMENTS = "documents"
TEXT = "text"          # documents read as text (JSONL/Parquet): they skip extraction


class ReadFileFn(beam.DoFn):
    """A FileReader in Beam: HTML documents to the main output, text documents to TEXT, drops to LEDGER."""

    def __init__(self, reader: FileReader):
        self._reader = reader

    def process(self, readable_file: fileio.ReadableFile) -> Iterable:
        meta = readable_file.metadata
        for result, is_html in self._reader.read(meta.path, meta.size_in_bytes):
            if isinstance(result, Drop):
                yield beam.pvalue.TaggedOutput(LEDGER, result)
            else:
                yield result if is_html else beam.pvalue.TaggedOutput(TEXT, result)


class ReadSource(beam.PTransform):
    """File patterns of one source -> (HTML documents, text documents, ledger). Files are matched and
    read on workers, never in the driver, each file once even when several patterns match it; one
    file holds thousands of documents, so they are spread before the expensive stages."""

    def __init__(self, patterns: Sequence[str], reader: FileReader):
        super().__init__()
        self._patterns, self._read_fn = list(patterns), ReadFileFn(reader)

    def expand(self, pbegin):
        results = (pbegin
                   | "Patterns" >> beam.Create(self._patterns)
                   | "Match" >> fileio.MatchAll()
                   | "Paths" >> beam.Map(lambda metadata: metadata.path)
                   | "EachFileOnce" >> beam.Distinct()
                   | "Open" >> fileio.ReadMatches()
                   | "SpreadFiles" >> beam.Reshuffle()
                   | "Read" >> beam.ParDo(self._read_fn).with_outputs(LEDGER, TEXT, main=DOCUMENTS))
        return (results[DOCUMENTS] | "SpreadDocuments" >> beam.Reshuffle(),
                results[TEXT] | "SpreadText" >> beam.Reshuffle(), results[LEDGER])


class RunStep(beam.DoFn):
    """A StageRunner of one step in Beam: kept documents to the main output, drops to LEDGER; a batched
    stage takes lists of documents."""

    def __init__(self, step: Step):
        self._runner = runner([step])

    def setup(self) -> None:
        self._runner.setup()

    def teardown(self) -> None:
        self._runner.teardown()

    def process(self, element) -> Iterable:
        kept, drops = self._runner.run(element if isinstance(element, list) else [element])
        yield from kept
        for drop in drops:
            yield beam.pvalue.TaggedOutput(LEDGER, drop)


class ApplyStage(beam.PTransform):
    """documents -> (kept documents, ledger drops) for one stage (a Step, or a Stage run as it is)."""

    def __init__(self, step: Step | Stage):
        super().__init__()
        self._step = step if isinstance(step, Step) else Step(step)

    def expand(self, documents):
        if self._step.batched:
            documents = documents | "Batch" >> beam.BatchElements(min_batch_size=8, max_batch_size=256)
        results = documents | "Run" >> beam.ParDo(RunStep(self._step)).with_outputs(LEDGER, main=DOCUMENTS)
        return results[DOCUMENTS], results[LEDGER]
