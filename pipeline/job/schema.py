"""The record formats, each with one codec: document shards, the prepared parts between the job's two
phases, signatures, and the drop ledger. A document's columns are described once (DOCUMENT_COLUMNS);
the shard and part schemas and their codecs derive from that list.

Plain Parquet types only in the outputs (strings, numbers, structs), so pyarrow, DuckDB and
Hugging Face `datasets` read the shards without extra code.
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa

from stages.mix import approx_tokens
from stages.pii import KINDS as PII_KINDS
from stages.quality_signals import QUALITY_SIGNALS
from stages.record import Document, Drop, DropReason, Edit, Stage, StageResult, clean_text, has_lone_surrogate
from stages.table import stage_table

SCHEMA_VERSION = "14"  # 14: metadata.source_date; 13: metadata.license, license_source; 12: lm_surprise; 11: toxicity_worst, toxic_window_share, url_listed; 10: text_fixed, encoding_damage, the quality signals; 9: edits (and the edit book, edits/), cluster_size; 8: metadata.rescued; 7: text records' file and line, typed ledger provenance; 6: toxicity_score; 5: ids unique by construction; the input's own id is `record_id`

# WARC facts kept for every document (all nullable: header-less archives lack some).
METADATA_FIELDS = [
    pa.field("warc_record_id", pa.string()),
    pa.field("warc_date", pa.string()),        # as written in the WARC (ISO 8601), null if absent/"null"
    pa.field("warc_filename", pa.string()),
    pa.field("warc_offset", pa.int64()),       # byte offset of the (compressed) record in its file
    pa.field("warc_truncated", pa.string()),   # WARC-Truncated reason ("length", ...) if the crawler cut the payload
    pa.field("http_status", pa.int32()),       # null for archives that store no HTTP header block
    pa.field("content_type", pa.string()),
    pa.field("charset", pa.string()),          # Python codec the page was decoded with
    pa.field("charset_source", pa.string()),   # bom | http | warc | meta | utf-8 | detected | replace
    pa.field("source_file", pa.string()),      # text sources (JSONL/Parquet): the file, below the inputs' folder
    pa.field("source_line", pa.int64()),       # ... and the record's line (JSONL) or row (Parquet), from 1
    pa.field("source_date", pa.string()),      # ... and its own date (text.date_field), ISO 8601 UTC
    pa.field("last_modified", pa.string()),    # the HTTP Last-Modified header, ISO 8601 UTC (stages/origin.py)
    pa.field("canonical_url", pa.string()),    # the page's <link rel="canonical">, absolute (stages/origin.py)
    pa.field("rescued", pa.string()),          # kept although it missed one repetition limit by a hair: the rule,
                                               # its value and limit, the quality score (stages/rescue.py); else null
    pa.field("license", pa.string()),          # the licence the page states: cc-by-4.0, cc0-1.0, pdm-1.0, ... (optout)
    pa.field("license_source", pa.string()),   # where: rel=license, meta dc.rights, link in page
]
METADATA_TYPE = pa.struct(METADATA_FIELDS)

# What stages cut from a kept document's text, one entry per stage that cut (null: nothing was cut). The
# text cut, and where it stays, are in the run's edit book (EDITS_SCHEMA).
EDITS_TYPE = pa.list_(pa.field("element", pa.struct([  # "element": the name Parquet's list layout gives it
    pa.field("stage", pa.string()), pa.field("paragraphs", pa.int32()), pa.field("chars", pa.int32())])))

# Placeholders inserted by the PII stage, per kind (null when the stage is off).
PII_COUNTS_TYPE = pa.struct([pa.field(kind.lower(), pa.int32()) for kind in PII_KINDS])


@dataclass(frozen=True)
class Column:
    """One column of a document, described once: the shards (`DOCUMENT_SCHEMA`, `document_row`) and the
    prepared parts between the phases (`PART_SCHEMA`, `part_row`, `document_from_part`) derive from it.
    The part stores each value losslessly (scores as float64, text that may hold lone surrogates as
    UTF-8 bytes, mappings as JSON); the shard stores it as readers expect it."""

    name: str
    type: pa.DataType                                    # in the shards
    nullable: bool = True                                # in the shards (a part's columns may all be null but id, source)
    part_type: pa.DataType | None = None                 # in the parts, where it differs
    shard: Callable[[Any], Any] = lambda value: value    # the record's value -> the shard's
    encode: Callable[[Any], Any] = lambda value: value   # the record's value -> the part's
    decode: Callable[[Any], Any] = lambda value: value   # the part's value -> the record's
    score: bool = False                                  # kept in `Document.scores`, not a field of its own

    def value(self, doc: Document) -> Any:
        return doc.scores.get(self.name) if self.score else getattr(doc, self.name)


def _encode(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8", "surrogatepass")


def _decode(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "surrogatepass")


def text_column(name: str, nullable: bool = True, empty: str | None = None) -> Column:
    """A string that may hold lone surrogates (mis-encoded pages): UTF-8 bytes in the part. `empty`: the
    record's value for a null (the shard writes "" as null where `empty` is "" and the column nullable)."""
    return Column(name, pa.string(), nullable, pa.binary(), shard=(lambda v: v or None) if nullable and empty == "" else
                  (lambda v: v), encode=_encode, decode=lambda v: _decode(v) or empty if empty is not None else _decode(v))


def score_column(name: str, own: bool = True) -> Column:
    """A score in [0, 1] or null: float32 in the shards, float64 in the parts. `own`: a stage's own score,
    kept in `Document.scores` (a new score is this one line and the stage that sets it)."""
    return Column(name, pa.float32(), part_type=pa.float64(), score=own)


def _json(value: Mapping | None) -> str | None:
    return None if value is None else json.dumps(dict(value), sort_keys=True, default=str)


def _pii_counts(counts: Mapping[str, int] | None) -> dict[str, int] | None:
    return None if counts is None else {kind.lower(): counts.get(kind, 0) for kind in PII_KINDS}


def _edit_counts(edits: tuple[Edit, ...]) -> list[dict[str, Any]] | None:
    return [{"stage": e.stage, "paragraphs": e.paragraphs, "chars": e.chars} for e in edits] or None


def _encode_edits(edits: tuple[Edit, ...]) -> str | None:
    return json.dumps([dataclasses.asdict(e) for e in edits], ensure_ascii=False) if edits else None


def _decode_edits(value: str | None) -> tuple[Edit, ...]:
    return tuple(Edit(**dict(e, kept_in=tuple(e["kept_in"]))) for e in json.loads(value)) if value else ()


def _metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {name: metadata.get(name) for name in _METADATA_NAMES}


_METADATA_NAMES = [f.name for f in METADATA_FIELDS]

def declared_scores(known: set[str]) -> list[str]:
    """Score columns the stage table's specs declare (`StageSpec.scores`: a stage of another package has no line
    here), in the table's order, besides the columns `known`."""
    seen: list[str] = []
    for spec in stage_table():
        seen += [name for name in spec.scores if name not in known and name not in seen]
    return seen


DOCUMENT_COLUMNS: tuple[Column, ...] = (
    Column("id", pa.string(), nullable=False),           # unique: derived from source, file and place in it
    Column("source", pa.string(), nullable=False),
    text_column("url", empty=""),
    text_column("record_id"),                            # the input's own id (WARC-Record-ID, JSONL `id`)
    text_column("text", nullable=False, empty=""),
    Column("lang", pa.string()),
    score_column("lang_score", own=False),
    score_column("quality_score", own=False),            # the quality judgment: model and signals (stages/quality.py)
    *(score_column(name) for name in QUALITY_SIGNALS),   # each of its signals, to filter on
    Column("text_fixed", pa.bool_(), score=True,         # text_repair changed the text (ftfy)
           shard=lambda v: None if v is None else bool(v), encode=lambda v: None if v is None else bool(v)),
    score_column("encoding_damage"),                     # share of characters damaged beyond repair
    score_column("toxicity_score", own=False),           # the page's toxic paragraphs combined (stages/harmful/toxicity.py)
    score_column("toxicity_worst"),                      # P(toxic) of its most toxic paragraph
    score_column("toxic_window_share"),                  # share of its paragraphs at or over toxicity.window_threshold
    score_column("url_listed"),                          # 1: its site is on a url_filter.second_look list (listed_site)
    Column("epoch", pa.int32(), nullable=False),         # 0 = original, k = k-th repeat from source mixing
    Column("cluster_size", pa.int32()),                  # documents dedup folded into this one, itself included
    Column("pii_counts", PII_COUNTS_TYPE, part_type=pa.string(), shard=_pii_counts, encode=_json,
           decode=lambda v: None if v is None else json.loads(v)),
    Column("metadata", METADATA_TYPE, part_type=pa.string(), shard=_metadata, encode=_json, decode=json.loads),
    Column("edits", EDITS_TYPE, part_type=pa.string(), shard=_edit_counts, encode=_encode_edits, decode=_decode_edits),
)

_EPOCH = next(i for i, c in enumerate(DOCUMENT_COLUMNS) if c.name == "epoch")
DOCUMENT_COLUMNS = (*DOCUMENT_COLUMNS[:_EPOCH],  # then the score columns stages declare (StageSpec.scores)
                    *(score_column(name) for name in declared_scores({c.name for c in DOCUMENT_COLUMNS})),
                    *DOCUMENT_COLUMNS[_EPOCH:])

DOCUMENT_SCHEMA = pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in DOCUMENT_COLUMNS],
                            metadata={"refinery.schema": f"documents/{SCHEMA_VERSION}"})


def document_row(doc: Document) -> dict[str, Any]:
    """A document as a row of the shards."""
    return {c.name: c.shard(c.value(doc)) for c in DOCUMENT_COLUMNS}


# The prepared part (phase 1 -> phase 2, and phase 2's finished documents): every document column, then
# dedup's signature of the text and its size, so dedup ranks documents without reading them.
SIGNATURE_COLUMNS = [
    pa.field("exact_key", pa.string()),                 # stages.dedup.exact_key of the text
    pa.field("bands", pa.list_(pa.binary())),           # MinHash band digests, band i at position i
    pa.field("paragraphs", pa.list_(pa.int64())),       # stages.paragraphs.paragraph_hashes (null: paragraph dedup off)
]
PART_SCHEMA = pa.schema(
    [pa.field(c.name, c.part_type or c.type, nullable=c.name not in ("id", "source")) for c in DOCUMENT_COLUMNS]
    + SIGNATURE_COLUMNS + [pa.field("chars", pa.int64()), pa.field("tokens", pa.int64())],
    metadata={"refinery.schema": "prepared/7"})  # 7: text records' source_date
class Signature(NamedTuple):
    """What phase 1 computes of a document's text for the global stages (the SIGNATURE_COLUMNS)."""

    exact_key: str | None
    bands: list[bytes]
    paragraphs: list[int] | None = None

    @staticmethod
    def of_row(row: Mapping[str, Any]) -> Signature:
        return Signature(row["exact_key"], row["bands"], row["paragraphs"])


SIGNATURE_SCHEMA = pa.schema(  # signatures/ of a run's output (--dedup-against reads them)
    [pa.field("id", pa.string(), nullable=False), pa.field("source", pa.string()), *SIGNATURE_COLUMNS],
    metadata={"refinery.schema": "signatures/2"})


def part_row(doc: Document, signature: Signature) -> dict[str, Any]:
    undeclared = set(doc.scores) - {c.name for c in DOCUMENT_COLUMNS if c.score}
    if undeclared:  # it would be lost between the phases: a stage's score must be a column
        raise ValueError(f"score(s) {sorted(undeclared)} of document {doc.id} have no column: declare them in the "
                         "stage's spec (StageSpec(scores=(NAME,))) or add score_column(NAME) to DOCUMENT_COLUMNS in "
                         "pipeline/job/schema.py")
    row = {c.name: c.encode(c.value(doc)) for c in DOCUMENT_COLUMNS}
    row.update(exact_key=signature.exact_key, bands=signature.bands, paragraphs=signature.paragraphs,
               chars=len(doc.text), tokens=approx_tokens(doc.text))
    return row


def part_value(row: dict[str, Any], name: str) -> Any:
    """One column of a part's row as the record holds it (a row read with only some columns)."""
    return _COLUMN[name].decode(row[name])


_COLUMN = {c.name: c for c in DOCUMENT_COLUMNS}


def document_from_part(row: dict[str, Any]) -> Document:
    fields = {c.name: c.decode(row[c.name]) for c in DOCUMENT_COLUMNS if not c.score}
    scores = {c.name: row[c.name] for c in DOCUMENT_COLUMNS if c.score and row[c.name] is not None}
    return Document(**fields, scores=scores)


# The drop ledger: one row per document not in the output.
LEDGER_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
        pa.field("value", pa.float64()),       # what the rule measured (null where a reason measures nothing)
        pa.field("threshold", pa.float64()),   # the limit it crossed, as applied to this page's language
        pa.field("kept_id", pa.string()),      # duplicates: the copy in the output (null: it was dropped later too)
        pa.field("lang", pa.string()),         # the page's language, once identified
        pa.field("file", pa.string()),         # WARC or text file, below the inputs' common folder
        pa.field("offset", pa.int64()),        # WARC: byte offset of the record in `file`
        pa.field("line", pa.int64()),          # JSONL line / Parquet row (1-based) of a text record
        pa.field("snippet", pa.string()),      # the start of the text (ledger_snippet_chars; 0 keeps none)
    ],
    metadata={"refinery.schema": f"ledger/{SCHEMA_VERSION}"},
)


def ledger_row(drop: Drop, snippet_chars: int = 300) -> dict[str, Any]:
    """Never fails: a ledger row is how a document that broke something is accounted for."""
    value, threshold = drop.value, drop.threshold
    return {
        "id": clean_text(str(drop.id)),
        "source": clean_text(str(drop.source)),
        "url": clean_text(str(drop.url))[:8192] if drop.url else None,
        "stage": drop.stage,
        "reason": drop.label,
        "detail": clean_text(str(drop.detail))[:1000] if drop.detail else None,
        "value": value if isinstance(value, float) and math.isfinite(value) else None,
        "threshold": threshold if isinstance(threshold, float) and math.isfinite(threshold) else None,
        "kept_id": clean_text(str(drop.kept_id)) if drop.kept_id else None,
        "lang": clean_text(str(drop.lang)) if drop.lang else None,
        "file": clean_text(str(drop.file))[:8192] if drop.file else None,
        "offset": drop.offset if isinstance(drop.offset, int) else None,
        "line": drop.line if isinstance(drop.line, int) else None,
        "snippet": clean_text(drop.snippet[:snippet_chars]) if snippet_chars > 0 and isinstance(drop.snippet, str)
        and drop.snippet else None,
    }


# The edit book: one row per cut a stage made in a document it kept (the drop ledger's twin for edits).
EDITS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("paragraphs", pa.int32(), nullable=False),   # paragraphs (lines) or spans cut
        pa.field("chars", pa.int64(), nullable=False),        # characters cut
        pa.field("kept_in", pa.list_(pa.string())),           # paragraph dedup: documents that keep what was cut
        pa.field("removed", pa.string()),                     # the text cut (its start: ledger_snippet_chars x 4)
    ],
    metadata={"refinery.schema": f"edits/{SCHEMA_VERSION}"},
)


def edit_rows(doc: Document, snippet_chars: int = 300) -> list[dict[str, Any]]:
    """The edit book's rows of a kept document (none when nothing was cut from it)."""
    return [{"id": clean_text(doc.id), "source": clean_text(doc.source), "url": clean_text(doc.url)[:8192] if doc.url else None,
             "stage": e.stage, "paragraphs": e.paragraphs, "chars": e.chars, "kept_in": [clean_text(k) for k in e.kept_in],
             "removed": clean_text(e.removed[:4 * snippet_chars]) if snippet_chars > 0 and e.removed else None}
            for e in doc.edits]


class OutputCheck(Stage):
    """The last stage: a document that cannot be stored as DOCUMENT_SCHEMA (an unencodable string,
    a missing id) is ledgered here instead of failing the shard it would land in."""

    name = "write"

    def __call__(self, doc: Document) -> StageResult:
        if not doc.id or not isinstance(doc.text, str):
            return doc.drop(self.name, DropReason.UNWRITABLE, "no id or no text")
        for key in ("id", "source", "url", "record_id", "text", "lang"):
            value = getattr(doc, key)
            if value is not None and (not isinstance(value, str) or has_lone_surrogate(value)):
                return doc.drop(self.name, DropReason.UNWRITABLE, f"{key}: not a string UTF-8 can encode")
        return doc
