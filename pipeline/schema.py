"""The output schemas, defined once: document shards and the drop ledger.

Plain Parquet types only (strings, numbers, one struct), so pyarrow, DuckDB and
Hugging Face `datasets` read the shards without extra code.
"""
from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from stages.pii import KINDS as PII_KINDS
from stages.record import Document, Drop, DropReason, Stage, StageResult, clean_text, has_lone_surrogate

SCHEMA_VERSION = "8"  # 8: metadata.rescued; 7: text records' file and line, typed ledger provenance; 6: toxicity_score; 5: ids unique by construction; the input's own id is `record_id`

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
    pa.field("rescued", pa.string()),          # kept although it missed one repetition limit by a hair: the rule,
                                               # its value and limit, the quality score (stages/rescue.py); else null
]
METADATA_TYPE = pa.struct(METADATA_FIELDS)

# Placeholders inserted by the PII stage, per kind (null when the stage is off).
PII_COUNTS_TYPE = pa.struct([pa.field(kind.lower(), pa.int32()) for kind in PII_KINDS])

DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),     # unique: derived from source, file and place in it
        pa.field("source", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("record_id", pa.string()),              # the input's own id (WARC-Record-ID, JSONL `id`)
        pa.field("text", pa.string(), nullable=False),
        pa.field("lang", pa.string()),
        pa.field("lang_score", pa.float32()),
        pa.field("quality_score", pa.float32()),
        pa.field("toxicity_score", pa.float32()),        # P(toxic) of the page's most toxic paragraph
        pa.field("epoch", pa.int32(), nullable=False),   # 0 = original, k = k-th repeat from source mixing
        pa.field("pii_counts", PII_COUNTS_TYPE),
        pa.field("metadata", METADATA_TYPE),
    ],
    metadata={"refinery.schema": f"documents/{SCHEMA_VERSION}"},
)

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

_METADATA_NAMES = [f.name for f in METADATA_FIELDS]


def document_row(doc: Document) -> dict[str, Any]:
    return {
        "id": doc.id,
        "source": doc.source,
        "url": doc.url or None,
        "record_id": doc.record_id,
        "text": doc.text,
        "lang": doc.lang,
        "lang_score": doc.lang_score,
        "quality_score": doc.quality_score,
        "toxicity_score": doc.toxicity_score,
        "epoch": doc.epoch,
        "pii_counts": None if doc.pii_counts is None else {k.lower(): doc.pii_counts.get(k, 0) for k in PII_KINDS},
        "metadata": {name: doc.metadata.get(name) for name in _METADATA_NAMES},
    }


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
