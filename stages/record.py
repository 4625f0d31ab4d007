"""The one record that flows through every stage, and the one way a record leaves.

A stage takes a `Document` and returns either a new `Document` (never the same
object mutated: Beam forbids mutating inputs) or a `Drop` naming the stage, a
reason from `DropReason`, and a human-readable detail.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class DropReason(str, enum.Enum):
    """The reasons of the built-in stages, spelled once. What each means, and which stage gives it, is
    in the stage table (`stages/table.py`: each StageSpec's `reasons`), where a new stage declares
    its own; a test checks that every reason a stage module uses is declared by its spec."""

    # warc: reading the container
    NON_HTML = "non_html"                    # payload is not text/html or application/xhtml+xml
    HTTP_STATUS = "http_status"              # not a 2xx response (redirect, error page)
    TRUNCATED_RECORD = "truncated_record"    # the file ends before Content-Length bytes were read
    EMPTY_PAYLOAD = "empty_payload"          # response with no body
    BINARY_CONTENT = "binary_content"        # labelled as HTML but the bytes are not text
    UNDECODABLE = "undecodable"              # the HTTP content/transfer encoding cannot be undone
    READ_ERROR = "read_error"                # a record (or the rest of a file) cannot be read; detail: file and place
    HEADER_TOO_LONG = "header_too_long"      # a WARC header line or the URL is over its cap
    # extract
    TOO_LARGE = "too_large"                  # over the configured size cap (decoded HTML, text record)
    EXTRACT_TIMEOUT = "extract_timeout"      # extraction exceeded the per-document time limit
    EXTRACT_ERROR = "extract_error"          # the extractor raised or its worker died
    NO_TEXT = "no_text"                      # extraction found no main text
    # langid
    LANG_BELOW_THRESHOLD = "lang_below_threshold"  # top language score under the threshold
    LANG_NOT_SELECTED = "lang_not_selected"        # confident, but not one of --languages
    LANG_DISPUTED = "lang_disputed"                # unsure, and a second identifier names another language
    # gopher_quality (one reason per rule; detail gives the measured value and the threshold)
    GOPHER_TOO_FEW_WORDS = "gopher_too_few_words"
    GOPHER_TOO_MANY_WORDS = "gopher_too_many_words"
    GOPHER_MEAN_WORD_LENGTH = "gopher_mean_word_length"
    GOPHER_SYMBOL_RATIO = "gopher_symbol_ratio"      # '#' or ellipses per word
    GOPHER_BULLET_LINES = "gopher_bullet_lines"
    GOPHER_ELLIPSIS_LINES = "gopher_ellipsis_lines"
    GOPHER_ALPHA_WORDS = "gopher_alpha_words"        # too few words containing a letter
    GOPHER_STOP_WORDS = "gopher_stop_words"          # too few stop words of the page's language
    # gopher_repetition
    DUP_LINE_FRACTION = "dup_line_fraction"
    DUP_LINE_CHARS = "dup_line_chars"
    DUP_PARA_FRACTION = "dup_para_fraction"
    DUP_PARA_CHARS = "dup_para_chars"
    TOP_NGRAM_CHARS = "top_ngram_chars"              # detail: n and share
    DUP_NGRAM_CHARS = "dup_ngram_chars"              # detail: n and share
    # c4
    C4_LOREM_IPSUM = "c4_lorem_ipsum"
    C4_CURLY_BRACKET = "c4_curly_bracket"
    C4_TOO_FEW_SENTENCES = "c4_too_few_sentences"    # after removing lines that fail the line rules
    C4_TOO_LONG = "c4_too_long"
    # fineweb
    FINEWEB_LINE_PUNCT = "fineweb_line_punct"        # too few lines end in terminal punctuation
    FINEWEB_SHORT_LINES = "fineweb_short_lines"
    FINEWEB_DUP_LINE_CHARS = "fineweb_dup_line_chars"
    FINEWEB_NEWLINE_RATIO = "fineweb_newline_ratio"  # newlines per word: lists, not prose
    # quality
    QUALITY_BELOW_THRESHOLD = "quality_below_threshold"
    # exact_dedup / near_dedup (detail: "kept <id of the surviving copy>")
    EXACT_DUPLICATE = "exact_duplicate"
    NEAR_DUPLICATE = "near_duplicate"
    # pii
    PII_BUDGET = "pii_budget"                        # PII search ran past its per-document time budget
    # decontaminate (detail: n-gram count and the benchmark items matched)
    CONTAMINATED = "contaminated"
    # mix
    MIX_DOWNSAMPLED = "mix_downsampled"              # not drawn: its source is above its share of the mix
    # write: the last check before a shard
    UNWRITABLE = "unwritable"                        # the record cannot be stored as the output schema requires
    # any stage
    ERROR = "error"                          # a stage raised; the ledger says error:<ExceptionType>

    def __str__(self) -> str:  # so f-strings and Parquet get "no_text", not "DropReason.NO_TEXT"
        return self.value


@dataclass(frozen=True)
class Edit:
    """What a stage cut from a document it kept: the edit book (the shards' `edits` column counts it, the
    run's edits/ files show the text cut), next to the drop ledger."""

    stage: str
    paragraphs: int            # paragraphs (lines) or spans removed
    chars: int                 # characters removed
    removed: str = ""          # the text removed (its start, SNIPPET_MAX_CHARS at most)
    kept_in: tuple[str, ...] = ()  # where the removed text stays (paragraph dedup: the documents owning it)


@dataclass(frozen=True)
class Document:
    """A web page on its way to becoming a training document.

    `html` carries the decoded page from reading to extraction and is cleared
    afterwards; `text` is the extracted main text. `metadata` holds WARC facts
    (see `pipeline.job.schema.METADATA_FIELDS`) and is never mutated in place.
    """

    id: str                 # unique by construction: derived from source, file and place in the file
    url: str
    source: str
    text: str = ""
    html: str | None = None
    lang: str | None = None
    lang_score: float | None = None
    quality_score: float | None = None            # P(high quality) from the quality classifier
    toxicity_score: float | None = None           # the page's toxicity: its toxic windows combined (toxicity classifier)
    pii_counts: Mapping[str, int] | None = None   # placeholders inserted per PII kind (None: PII stage off)
    epoch: int = 0                                   # 0 = original; k > 0 = k-th repeat added by source mixing
    cluster_size: int | None = None               # documents dedup folded into this one, itself included (None: off)
    record_id: str | None = None                  # the input's own id (WARC-Record-ID, a JSONL/Parquet `id`)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    scores: Mapping[str, float] = field(default_factory=dict)  # a stage's own scores: each a shard column once
                                                  # declared by one line in pipeline/job/schema.py (score_column)
    edits: tuple[Edit, ...] = ()                  # what stages cut from the text (paragraph dedup, decontamination)

    def replace(self, **changes: Any) -> Document:
        return dataclasses.replace(self, **changes)

    def with_score(self, name: str, value: float | None) -> Document:
        return dataclasses.replace(self, scores={**self.scores, name: value})

    def edited(self, text: str, edit: Edit) -> Document:
        """The document with its text replaced by what is left after `edit` cut from it."""
        return dataclasses.replace(self, text=text, edits=(*self.edits, edit))

    def drop(self, stage: str, reason: str, detail: str = "", *, value: float | None = None,
             threshold: float | None = None, kept_id: str | None = None) -> Drop:
        """A Drop for the ledger; `reason` is one the stage declares in its StageSpec (stages/table.py).
        `value` and `threshold`: what the rule measured and the limit it crossed; `kept_id`: for a
        duplicate, the copy that was kept."""
        return Drop(id=self.id, url=self.url, source=self.source, stage=stage, reason=_reason(reason), detail=detail,
                    value=_number(value), threshold=_number(threshold), kept_id=kept_id, **self._provenance())

    def drop_for_error(self, stage: str, exc: BaseException) -> Drop:
        """A stage raised on this document: ledgered as `error:<ExceptionType>` with the message."""
        return Drop(id=self.id, url=self.url, source=self.source, stage=stage, reason=DropReason.ERROR,
                    detail=f"{type(exc).__name__}: {exc}"[:500], error_type=type(exc).__name__, **self._provenance())

    def _provenance(self) -> dict[str, Any]:
        """Where the document came from and what it said, for the ledger (the snippet is cut again to the
        run's `ledger_snippet_chars` when the row is written)."""
        m = self.metadata
        offset = m.get("warc_offset")
        line = m.get("source_line")
        return {"lang": self.lang, "file": m.get("warc_filename") or m.get("source_file"),
                "offset": offset if isinstance(offset, int) else None, "line": line if isinstance(line, int) else None,
                "snippet": self.text[:SNIPPET_MAX_CHARS] if isinstance(self.text, str) else ""}


SNIPPET_MAX_CHARS = 2000  # the most text of a dropped document a Drop carries to the ledger writer


def _number(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _reason(reason: str) -> str:
    try:
        return DropReason(reason)
    except ValueError:  # a stage's own reason, declared in its StageSpec
        return str(reason)


@dataclass(frozen=True)
class Drop:
    """A document that did not reach the output: one row of the drop ledger."""

    id: str
    url: str
    source: str
    stage: str
    reason: str            # a DropReason, or a reason of the stage's own StageSpec
    detail: str = ""
    error_type: str = ""   # for DropReason.ERROR: the exception's class name
    value: float | None = None       # what the rule measured (typed twin of the detail's number)
    threshold: float | None = None   # the limit it crossed (the page's language's, with per-language thresholds)
    kept_id: str | None = None       # duplicates: the copy kept (resolved to the one in the output when written)
    lang: str | None = None
    file: str | None = None          # WARC (or text) file below the inputs' common folder
    offset: int | None = None        # byte offset of the WARC record in `file`
    line: int | None = None          # line (JSONL) or row (Parquet), 1-based, of a text record in `file`
    snippet: str = ""                # the start of the document's text

    @property
    def label(self) -> str:
        """The ledger's reason column: the reason, and for errors the exception type (`error:ValueError`)."""
        return f"{self.reason}:{self.error_type}" if self.error_type else str(self.reason)


StageResult = Document | Drop


class Stage:
    """Base of a per-document stage: `__call__(doc) -> Document | Drop`.

    `check` runs once before the job, in the driver (a model that will not load, a setting the model
    does not know: raise, and the run stops with one line); `setup`/`teardown` load and free heavy
    resources on the worker (models, child processes); `count(name, n)` is set by the pipeline to a
    Beam counter `<stage>.note.<name>`.
    """

    name = "stage"
    language_settings = None  # stages.thresholds.LanguageSettings when the run has a thresholds file
    per_language = False      # judges a page with config_for(its language): a thresholds file may tune it

    def config_for(self, lang: str | None):
        """The config to judge a page of language `lang` with: the stage's own, unless the run's
        thresholds file has an entry for that language (or its script family)."""
        return self.config if self.language_settings is None else self.language_settings.get(lang)[0]

    def thresholds_of(self, lang: str | None) -> str:
        """Whose per-language thresholds apply to `lang` (the language, its script family) or ""."""
        return "" if self.language_settings is None else self.language_settings.get(lang)[1]

    def check(self) -> None:
        pass

    def setup(self) -> None:
        pass

    def teardown(self) -> None:
        pass

    @staticmethod
    def count(name: str, n: int = 1) -> None:
        pass


class RuleStage(Stage):
    """A filter that keeps or drops a document unchanged: `evaluate(text, lang)` returns None (keep)
    or (reason, detail)."""

    per_language = True

    def __init__(self, config):
        self.config = config

    def __call__(self, doc: Document) -> StageResult:
        return self.result(doc, self.evaluate(doc.text, doc.lang))

    def result(self, doc: Document, verdict: tuple | None) -> StageResult:
        """The document kept (no verdict) or dropped with the verdict's reason, detail and measured values."""
        if verdict is None:
            return doc
        reason, detail, *measured = verdict  # (reason, detail) or (reason, detail, value, threshold)
        whose = self.thresholds_of(doc.lang)
        value, threshold = measured if measured else (None, None)
        return doc.drop(self.name, reason, f"{detail} ({whose} threshold)" if whose else detail,
                        value=value, threshold=threshold)

    def evaluate(self, text: str, lang: str | None) -> tuple | None:
        """None (keep), (reason, detail) or (reason, detail, value, threshold) (`over`/`under` make those);
        judge with `self.config_for(lang)`."""
        raise NotImplementedError


def over(reason: str, value: float, limit: float | None, fmt: str = "", label: str = "") -> tuple | None:
    """A rule's verdict when `value` exceeds its maximum `limit` (None: the rule is off), else None:
    (reason, "label value > limit", value, limit), the detail and the ledger's typed columns alike."""
    if limit is None or not value > limit:
        return None
    return reason, f"{label}{value:{fmt}} > {limit}", value, limit


def under(reason: str, value: float, limit: float | None, fmt: str = "", label: str = "") -> tuple | None:
    """A rule's verdict when `value` is below its minimum `limit` (None: the rule is off), else None."""
    if limit is None or not value < limit:
        return None
    return reason, f"{label}{value:{fmt}} < {limit}", value, limit


class ModelStage(Stage):
    """A stage around one model: `load()` (from `config.model`) is checked once in the driver, run on
    each worker in `setup`, and the model never travels with the pickled stage."""

    def __init__(self, config):
        self.config = config
        self._model = None

    def load(self):
        raise NotImplementedError

    def check(self) -> None:
        self.load()

    def setup(self) -> None:
        if self._model is None:
            try:
                self._model = self.load()
            except (FileNotFoundError, ValueError) as exc:
                raise StageEnvironmentError(str(exc)) from exc

    def teardown(self) -> None:
        self._model = None

    def __getstate__(self):
        return {"config": self.config, "_model": None}


class StageEnvironmentError(RuntimeError):
    """A failure that is not the document's fault (a model or library that cannot load).

    The pipeline ledgers ordinary exceptions per document and goes on; this one fails the
    job, since every document would fail the same way.
    """


_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(value: str) -> bool:
    """True when `value` cannot be encoded as UTF-8 (a scan, no copy)."""
    return _SURROGATE.search(value) is not None


def clean_text(value: str) -> str:
    """`value` with every lone surrogate (JSON's "\\ud83d" alone, undecodable bytes kept by
    surrogateescape) replaced by U+FFFD: such a string cannot be encoded as UTF-8, so Parquet,
    hashing and every later stage would fail on it. A Python str never holds a valid pair."""
    return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value


def stable_id(*parts: str | None) -> str:
    """A 128-bit hex id that depends only on its inputs, so reruns give the same ids."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update((part or "").encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")  # separator: ("ab", "c") and ("a", "bc") must differ
    return h.hexdigest()
