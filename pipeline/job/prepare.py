"""Phase 1 of a run, one input file at a time: read -> every per-document stage before the first global
one (stages/table.py) -> a prepared part (pipeline/job/parts.py), committed by a marker written last.
Phase 2 (dedup, decontamination, the filters after it, PII, mixing, shards) reads the parts, so a run
that dies is resumed (`refinery run --resume`) without redoing the files that were finished.

`PrepareFile` is the task, plain Python: the job's DoFn (pipeline/job/phases.py), a Slurm array task and
`refinery plan` call its `run(file, cap)` alike. Its marker holds the digest of every setting phase 1
depends on (its stages' sections, the readers', the signature settings, the per-language thresholds,
refinery's version): a part made under other settings is written again.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common.version import version
from pipeline.counters import capture_counts, count, entered, note, runner
from pipeline.job.config import TABLE
from pipeline.job.faults import kill_point
from pipeline.job.inputs import InputFile
from pipeline.job.parts import (
    PartWriter,
    commit,
    committed_marker,
    edge_digest,
    file_name,
    marker_identity,
    part_key,
    part_paths,
    uncommit,
)
from pipeline.job.readers import FileReader
from pipeline.job.schema import LEDGER_SCHEMA, PART_SCHEMA, Signature, ledger_row, part_row
from pipeline.job.signed import Signer
from pipeline.storage import file_digest
from stages.dedup import DedupConfig
from stages.paragraphs import ParagraphDedupConfig, paragraph_hashes
from stages.record import Document, Drop
from stages.runner import Step, chunks, held_chars
from stages.table import GLOBAL, READ, plugins

PHASE1_END = min(spec.order for spec in TABLE if spec.runs == GLOBAL)  # phase 1: the stages before it
READ_COUNTERS = tuple(entered(spec.name) for spec in TABLE if spec.runs == READ)


def in_phase1(spec) -> bool:
    return spec.order < PHASE1_END


def signature_settings(config: DedupConfig) -> dict[str, Any]:
    """What makes two runs' signatures comparable (--dedup-against checks the old run's)."""
    bands, rows = config.band_rows()
    return {"shingle_words": config.shingle_words, "num_perm": config.num_perm, "bands": bands, "rows": rows,
            "seed": config.seed}


def paragraph_settings(config: ParagraphDedupConfig) -> dict[str, Any] | None:
    """What makes two runs' paragraph hashes comparable (None: paragraph dedup off, parts hold none)."""
    if not config.enabled:
        return None
    return {"min_chars": config.min_chars, "unit": config.unit, "hash": "blake2b-64 of stages.paragraphs.normalized",
            **({"span_sentences": config.span_sentences} if config.unit == "span" else {})}


def phase1_digest(config) -> str:
    """A digest of every setting the prepared parts depend on (not where the inputs lie: parts name their
    file below the inputs' common folder, as ids do)."""
    settings = config.to_dict()
    sections = sorted({spec.section for spec in TABLE if in_phase1(spec) and spec.section})
    relevant = {section: settings[section] for section in sections}
    relevant.update(signature=signature_settings(config.dedup), paragraphs=paragraph_settings(config.paragraph_dedup),
                    version=version(), **({"plugins": installed} if (installed := plugins()) else {}),  # their versions
                    part_format=PART_SCHEMA.metadata[b"refinery.schema"].decode(),
                    inject_errors=settings["inject_errors"], ledger_snippet_chars=config.ledger_snippet_chars,
                    sample_fraction=config.sample_fraction, thresholds=_thresholds_digest(config.thresholds),
                    # the cascade's bundled check decides which pages trafilatura extracts: a rebuilt one redoes the parts
                    cascade_check=_cascade_check_digest() if config.extract.engine == "cascade" else None,
                    # the phase-1 settings the user gave beat the thresholds file: they decide too
                    overriding=sorted(k for k in config.overriding() if k.split(".", 1)[0] in sections))
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _thresholds_digest(path: str | None) -> str | None:
    if path == "bundled":  # its content, not only refinery's version: a rebuilt file changes decisions
        from stages.thresholds import bundled_path

        path = bundled_path()
    if not path or not os.path.exists(path):
        return path
    found = file_digest(path)
    return found[1] if found else path  # unreadable: pre-flight says so when it loads the file


def _cascade_check_digest() -> str | None:
    from stages.extraction.engines import CHECK_PATH

    found = file_digest(CHECK_PATH)
    return found[1] if found else None


@dataclass(frozen=True)
class PreparedPart:
    """What `PrepareFile.run` did with one input file."""

    key: str
    records: int          # records the file held (up to the cap): what conservation counts as read
    reused: bool          # its committed part matched and was kept
    documents: int        # documents the part holds (for a reused part, as its marker says)
    ledger_rows: int


class PrepareFile:
    """Phase 1's task: an input file -> its prepared part, written and committed (or reused when its marker
    matches). Counts go through pipeline/counters.py and are stored in the marker, to be replayed when the
    part is reused. `setup()` loads the stages' models (once a worker), `teardown()` lets them go."""

    def __init__(self, output: str, readers: Mapping[str, FileReader], steps: Sequence[tuple[str, Step]], root: str,
                 digest: str, dedup: DedupConfig, snippet_chars: int, run_id: str = "",
                 paragraphs: ParagraphDedupConfig | None = None):
        self._output = output
        self._run_id = run_id  # in each marker this run writes: the driver tells prepared parts from reused ones
        self._readers, self._root, self._digest = dict(readers), root, digest
        self._runner = runner([step for _, step in steps])
        self._signer, self._snippet = Signer(dedup), snippet_chars
        self._paragraph_config = paragraphs  # None: paragraph dedup is off, no hashes stored

    @property
    def readers(self) -> Mapping[str, FileReader]:
        return self._readers

    def setup(self) -> None:
        self._runner.setup()

    def teardown(self) -> None:
        self._runner.teardown()

    def run(self, file: InputFile, cap: int | None = None) -> PreparedPart:
        """Prepares `file` (at most `cap` records: --limit) unless its committed part matches."""
        name = file_name(file, self._root)
        key = part_key(file.source, name)
        paths = part_paths(self._output, key)
        want = dict(marker_identity(file, name, self._digest, cap), edges=edge_digest(file.path, file.size))
        marker, matches = committed_marker(paths, want)
        if matches:
            for counter, n in marker["counts"].items():
                count(counter, n)
            return PreparedPart(key, marker["records"], True, marker["documents"], marker["ledger_rows"])
        if marker is not None:
            uncommit(paths)
        with capture_counts() as counts:
            docs, ledger, digests = self._write_part(file, paths, cap)
        records = sum(counts.get(c, 0) for c in READ_COUNTERS)
        commit(paths, key, dict(want, run=self._run_id, replaced=marker is not None, records=records, documents=docs,
                                ledger_rows=ledger, parts=digests, counts=dict(sorted(counts.items())),
                                # the stage packages it was made with: --resume refuses to go on without one
                                **({"plugins": installed} if (installed := plugins()) else {})))
        kill_point("prepared")
        return PreparedPart(key, records, False, docs, ledger)

    def _write_part(self, file: InputFile, paths: dict[str, str], cap: int | None) -> tuple[int, int, dict]:
        docs_out, ledger_out = PartWriter(paths["docs.parquet"], PART_SCHEMA), PartWriter(paths["ledger.parquet"],
                                                                                            LEDGER_SCHEMA)

        def documents() -> Iterator[tuple[bool, Document]]:  # the reader's drops go straight to the ledger
            for record, is_html in self._readers[file.source].read(file.path, file.size, cap):
                if isinstance(record, Drop):
                    ledger_out.add(ledger_row(record, self._snippet))
                else:
                    yield is_html, record

        for chunk in chunks(documents(), lambda item: held_chars(item[1])):
            self._run_chunk(chunk, docs_out, ledger_out)
        docs, ledger = docs_out.commit(), ledger_out.commit()
        return docs, ledger, {"docs.parquet": docs_out.digest, "ledger.parquet": ledger_out.digest}

    def _run_chunk(self, chunk: list[tuple[bool, Document]], docs_out: PartWriter, ledger_out: PartWriter) -> None:
        kept, drops = self._runner.run([doc for _, doc in chunk], [is_html for is_html, _ in chunk])
        for drop in drops:
            ledger_out.add(ledger_row(drop, self._snippet))
        for doc in kept:
            docs_out.add(part_row(doc, Signature(*self._signer(doc), self._paragraphs(doc))))

    def _paragraphs(self, doc: Document) -> list[int] | None:
        if self._paragraph_config is None:
            return None
        try:
            return paragraph_hashes(doc.text, self._paragraph_config)
        except Exception:  # the document goes on; none of its paragraphs is counted
            count(note("prepare", "paragraphs_unhashed"))
            return []


def prepare_files(task: PrepareFile, files: Sequence[InputFile], limit: int = 0) -> Iterator[PreparedPart]:
    """Each file through `task` in order; with `limit` (--limit), each read until the run's record budget is
    spent (files after that are not read)."""
    budget = limit or None
    for file in files:
        if budget is not None and budget <= 0:
            return
        prepared = task.run(InputFile(*file), budget)
        yield prepared
        if budget is not None:
            budget -= prepared.records
