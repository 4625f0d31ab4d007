"""Paragraph dedup: a paragraph (a line of the extracted text) that occurs in several documents of the
crawl stays in one of them and is cut from the others — the cookie notice, navigation line, disclaimer
or syndicated paragraph that document-level dedup cannot remove, because the pages around it differ.
In span mode the unit is C4's instead: a run of 3 consecutive sentences.

Beam-free. Phase 1 stores each document's `paragraph_hashes` (64 bits per distinct unit long enough to
count); phase 2 counts them across the whole input with a combiner (pipeline/job/globals/paragraphs.py, built on
`occurrence`, `merge_owners` and `Owner` below), and `ParagraphCut` then cuts, from each document, the
repeated units another document owns. The owner of a unit is the document most likely to be its
original, chosen per group of documents sharing it so that an article's paragraphs stay together
(stages/shared_text.py: not a page declaring another canonical URL, then the earliest date the text is known to
have existed, then not an aggregator of other sites' text, the most complete copy, the purest, then quality):
syndicated copies and pages aggregating paragraphs of others lose the text to the original, and the output does not depend on the order
documents were read in or on the runner (Dolma's Bloom filter keeps the first copy seen). Only documents that
passed every page filter are counted (those stages run in phase 1), so no page filter drops an owner afterwards.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from common.settings import check
from stages.origin import origin_rank, original_host
from stages.record import SNIPPET_MAX_CHARS, Document, Edit, Stage, StageResult
from stages.shared_text import Holder, holder_of, merge_holders, owners_in_memory
from stages.table import GLOBAL, StageSpec

STAGE = "paragraph_dedup"
TOO_MUCH_REPEATED = "too_much_repeated"
_SPACE = re.compile(r"\s+")
# A sentence ends after a run of . ! ? … and the quotes or brackets closing it, where a space follows; after a
# run of 。！？; or at the line's end. Scanned run by run (`sentence_spans`): the one regex that said this,
# `.+?(?:[.!?…]+["'”’»)\]]*(?=\s)|[。！？]+|$)`, took time quadratic in a run of marks with no space after it.
_MARK_RUN = re.compile(r"[.!?…]+|[。！？]+")
_CLOSERS = re.compile(r"[\"'”’»)\]]*")
_UNSPACED_MARKS = frozenset("。！？")
UNITS = ("paragraph", "span")


@dataclass(frozen=True)
class ParagraphDedupConfig:
    """Paragraph (line) dedup across the crawl: a paragraph found in `min_documents` or more documents stays
    in the best of them only (after document dedup, before decontamination and PII)."""

    enabled: bool = False
    # paragraphs shorter than this (after normalizing: NFKC, case folding, whitespace collapsed)
    # are never counted: a short heading ("Ingredients", "References") repeats across unrelated pages
    min_chars: int = 30
    min_documents: int = 2         # a paragraph is repeated when this many documents (after dedup) contain it
    # a document that loses more than this fraction of its characters is dropped instead of kept as a shred
    # (ledger: too_much_repeated, with the fraction), unless it keeps a repeated paragraph for the others (funnel
    # note kept_as_owner); 1.0 keeps every document that has text left
    max_removed_fraction: float = 0.5
    top_paragraphs: int = 20       # the most repeated paragraphs, with their counts and sites, in the report
    # paragraph: a line of the extracted text; span: `span_sentences` consecutive sentences (C4: any span of 3
    # sentences found twice keeps one copy), sentences cut at . ! ? … and 。！？ and at line ends
    unit: str = "paragraph"
    span_sentences: int = 3

    def __post_init__(self):
        check(self.unit in UNITS, f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        check(self.span_sentences >= 1, f"span_sentences must be >= 1, got {self.span_sentences}")
        check(self.min_chars >= 1, f"min_chars must be >= 1, got {self.min_chars}")
        check(self.min_documents >= 2, f"min_documents must be >= 2, got {self.min_documents}")
        check(0.0 < self.max_removed_fraction <= 1.0,
              f"max_removed_fraction must be in (0, 1], got {self.max_removed_fraction}")
        check(self.top_paragraphs >= 0, f"top_paragraphs must be >= 0, got {self.top_paragraphs}")


def normalized(paragraph: str) -> str:
    """What two copies of a paragraph share: NFKC, case folded, whitespace collapsed. Digits stay: lines that
    differ only in numbers are mostly content (a table row, coordinates, a price), not a template."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", paragraph).casefold()).strip()


def paragraph_hash(paragraph: str, min_chars: int) -> int | None:
    """64-bit hash of the normalized paragraph, or None when it is too short to count (signed, so that it
    is a Parquet int64)."""
    text = normalized(paragraph)
    if len(text) < min_chars:
        return None
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Piece(NamedTuple):
    """The smallest part the cut removes: a line (paragraph mode) or a sentence of a line (span mode)."""

    line: int
    start: int
    end: int


def pieces(lines: list[str], config: ParagraphDedupConfig) -> list[Piece]:
    """The lines, or the sentences of each line, in order (blank ones are no piece in span mode)."""
    if config.unit == "paragraph":
        return [Piece(i, 0, len(line)) for i, line in enumerate(lines)]
    found = []
    for i, line in enumerate(lines):
        for start, end in sentence_spans(line):
            sentence = line[start:end]
            if sentence.strip():
                found.append(Piece(i, start + len(sentence) - len(sentence.lstrip()), end))
    return found


def sentence_spans(line: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each sentence of a line, covering it, in time linear in its length: every run of marks
    is looked at once. A sentence has at least one character before its end, so a mark that opens the line
    does not end a sentence of its own."""
    start, size = 0, len(line)
    while start < size:
        end, pos = size, start + 1
        while (run := _MARK_RUN.search(line, pos)) is not None:
            if line[run.start()] in _UNSPACED_MARKS:
                end = run.end()
                break
            after = _CLOSERS.match(line, run.end()).end()
            if after < size and line[after].isspace():
                end = after
                break
            pos = after
        yield start, end
        start = end


def units(lines: list[str], found: list[Piece], config: ParagraphDedupConfig) -> list[tuple[int | None, range]]:
    """(hash or None when too short, the pieces it covers) of each unit that is counted: each line, or each
    window of `span_sentences` consecutive sentences (none in a text with fewer)."""
    size = 1 if config.unit == "paragraph" else config.span_sentences
    out = []
    for first in range(len(found) - size + 1):
        text = " ".join(lines[p.line][p.start:p.end] for p in found[first:first + size])
        out.append((paragraph_hash(text, config.min_chars), range(first, first + size)))
    return out


def paragraph_hashes(text: str, config: ParagraphDedupConfig) -> list[int]:
    """The distinct hashes of a text's countable units (paragraphs or sentence spans), in order of first
    appearance: what phase 1 stores and phase 2 counts."""
    lines = text.split("\n")
    return list(dict.fromkeys(h for h, _ in units(lines, pieces(lines, config), config) if h is not None))


def unit_texts(text: str, config: ParagraphDedupConfig) -> list[tuple[int, str]]:
    """(hash, text) of each countable unit of a text (the report's table shows the most repeated)."""
    lines = text.split("\n")
    found = pieces(lines, config)
    return [(h, " ".join(lines[found[j].line][found[j].start:found[j].end] for j in covered).strip())
            for h, covered in units(lines, found, config) if h is not None]


class Owner(NamedTuple):
    """What the counting keeps per paragraph: how many documents have it, the best of them, in which parts they
    lie (so each part learns of the cuts it must make without a second pass over the occurrences) and, while they
    are few, the documents themselves (stages.shared_text: the owner is then chosen per group, not per paragraph)."""

    documents: int
    best: tuple  # stages.origin.origin_rank of the owner, or its stages.shared_text.group_ranks rank: id last
    parts: frozenset[int]
    holders: tuple | None = None  # stages.shared_text.Holder tuples, sorted; None: more than HOLDERS_CAP, or unknown

    @property
    def owner_id(self) -> str:
        return self.best[-1]

    def plain(self) -> tuple:
        """Plain tuples, numbers and strings, which Beam's coder packs tightly (a NamedTuple or a set it pickles);
        with holders, the best and the parts are theirs and are not packed twice."""
        if self.holders is not None:
            return self.documents, None, None, tuple(tuple(h) for h in self.holders)
        return self.documents, self.best, tuple(sorted(self.parts)), None

    @staticmethod
    def of(plain: tuple) -> Owner:
        documents, best, parts, holders = plain
        if holders is None:
            return Owner(documents, tuple(best), frozenset(parts))
        listed = tuple(Holder(h[0], h[1], tuple(h[2]), h[3]) for h in holders)
        return Owner(documents, min(h.rank for h in listed), frozenset(h.part for h in listed), listed)


def merge_owners(owners: Iterable[Owner]) -> Owner | None:
    """One Owner from partial ones (the combiner's merge: any order gives the same result)."""
    merged = None
    for o in owners:
        merged = o if merged is None else Owner(merged.documents + o.documents, min(merged.best, o.best),
                                                merged.parts | o.parts, merge_holders(merged.holders, o.holders))
    return merged


def occurrence(rank: tuple, part: int, holder: Holder | None = None) -> Owner:
    """One document's paragraph as a partial Owner (`rank`: the document's stages.origin.origin_rank; `holder`:
    the document, for the choice by group)."""
    return Owner(1, tuple(rank), frozenset((part,)), None if holder is None else (holder,))


def earlier_occurrence(doc_id: str) -> Owner:
    """A paragraph of a document of an earlier run (--dedup-against): it outranks every new document, so the
    new copies are cut (`doc_id` names the old document and its run)."""
    return Owner(1, (-1, "", float("-inf"), 0, doc_id), frozenset())


SITE_SAMPLE = 5


def site_sample(hosts: Iterable[str]) -> tuple[str, ...]:
    """A few of the sites a paragraph is on, chosen by a hash of the host: the same sample on every runner and
    from any partial samples merged."""
    order = lambda host: hashlib.blake2b(host.encode("utf-8", "surrogatepass"), digest_size=8).digest()  # noqa: E731
    return tuple(sorted(set(hosts), key=order)[:SITE_SAMPLE])


class ParagraphCut(Stage):
    """Cuts from a document the repeated paragraphs that another document owns. `cuts` (paragraph hash ->
    owner id) is set by the job for each part's documents before they pass; the stage never sees others'
    texts. Records what it cut in `doc.edits`; drops a document left with nothing, or that lost more than
    `max_removed_fraction` of its characters."""

    name = STAGE

    def __init__(self, config: ParagraphDedupConfig, cuts: Mapping[int, str] | None = None):
        self.config, self.cuts = config, dict(cuts or {})
        # ids of the documents whose stored hashes meet a cut (the job knows them from phase 1's hashes): the
        # others pass without their text being split and hashed again; None: look at every document
        self.candidates: set[str] | None = None

    def __call__(self, doc: Document) -> StageResult:
        self.count("chars_seen", len(doc.text))
        if self.candidates is not None and doc.id not in self.candidates:
            return doc
        lines = doc.text.split("\n")
        found = pieces(lines, self.config)
        owner_of: dict[int, str] = {}  # piece -> the document that keeps it, where that is another one
        owns = False                   # the document keeps a repeated paragraph for the others
        for h, covered in units(lines, found, self.config):
            owner = None if h is None else self.cuts.get(h)
            owns = owns or owner == doc.id
            if owner is not None and owner != doc.id:
                for j in covered:
                    owner_of.setdefault(j, owner)
        if not owner_of:
            return doc
        text, removed = _without(lines, found, owner_of)
        cut_chars = len(doc.text) - len(text)
        fraction = cut_chars / max(len(doc.text), 1)
        what = "repeated paragraphs" if self.config.unit == "paragraph" else "sentences of repeated spans"
        if fraction > self.config.max_removed_fraction and owns and text.strip():
            # its other copies were cut in its favour: dropping it would take that paragraph out of the corpus
            self.count("kept_as_owner")
        elif not text.strip() or fraction > self.config.max_removed_fraction:
            return doc.drop(STAGE, TOO_MUCH_REPEATED, f"{len(removed)} {what}, {fraction:.0%} of the text",
                            value=round(fraction, 4), threshold=self.config.max_removed_fraction)
        self.count("documents_edited")
        self.count("paragraphs_removed", len(removed))
        self.count("chars_removed", cut_chars)
        kept_in = tuple(dict.fromkeys(owner_of[j] for j in sorted(owner_of)))
        return doc.edited(text, Edit(STAGE, len(removed), cut_chars, "\n".join(removed)[:SNIPPET_MAX_CHARS],
                                     kept_in[:KEPT_IN_SHOWN]))


def _without(lines: list[str], found: list[Piece], removed: Mapping[int, str]) -> tuple[str, list[str]]:
    """(the text without the removed pieces, their texts). A line that loses some of its sentences keeps the
    others, joined by a space; a line that loses all goes, with its blank separators (`join_kept`)."""
    by_line: dict[int, list[tuple[Piece, bool]]] = {}
    for j, piece in enumerate(found):
        by_line.setdefault(piece.line, []).append((piece, j in removed))
    new_lines, gone, texts = list(lines), [False] * len(lines), []
    for i, line_pieces in by_line.items():
        cut = [lines[i][p.start:p.end] for p, out in line_pieces if out]
        if not cut:
            continue
        texts += cut
        kept = [lines[i][p.start:p.end] for p, out in line_pieces if not out]
        gone[i] = not kept
        new_lines[i] = " ".join(kept)
    return join_kept(new_lines, gone), texts


KEPT_IN_SHOWN = 5  # owners of the cut paragraphs named in the edit book


def join_kept(lines: list[str], remove: list[bool]) -> str:
    """The text without the removed lines; the blank lines that separated a removed paragraph from the next
    go with it, so no gap is left where boilerplate stood (nor a blank tail where it ended the text)."""
    kept: list[str] = []
    after_cut = False
    for line, cut in zip(lines, remove):
        if cut or (after_cut and not line.strip()):
            after_cut = after_cut or cut
            continue
        after_cut = False
        kept.append(line)
    if after_cut:
        while kept and not kept[-1].strip():
            kept.pop()
    return "\n".join(kept)


def cuts_in_memory(docs: Iterable[Document], config: ParagraphDedupConfig) -> dict[int, Owner]:
    """The job's counting on one machine (tests, benches): paragraph hash -> Owner, for the repeated ones, each
    owned as the job decides (stages.shared_text)."""
    owners: dict[int, Owner] = {}
    for doc in docs:
        hashes = paragraph_hashes(doc.text, config)
        rank = origin_rank(doc.url, doc.metadata, doc.quality_score, len(doc.text), doc.id)
        holder = holder_of(0, original_host(doc.url), rank, len(hashes))
        for h in hashes:
            found = occurrence(rank, 0, holder)
            owners[h] = merge_owners([owners[h], found]) if h in owners else found
    repeated = {h: o for h, o in owners.items() if o.documents >= config.min_documents}
    best = owners_in_memory({h: o.holders for h, o in repeated.items()}, {h: o.best for h, o in repeated.items()})
    return {h: o._replace(best=best[h]) for h, o in repeated.items()}


SPEC = StageSpec(
    name=STAGE, order=95, runs=GLOBAL, config=ParagraphDedupConfig, job="pipeline.job.globals.paragraphs:Paragraphs",
    about="a paragraph repeated across documents stays in its original only",
    reasons={TOO_MUCH_REPEATED: "lost more than max_removed_fraction of its text (or all of it) to paragraphs "
                                "repeated in better documents (value: the fraction cut)"})
