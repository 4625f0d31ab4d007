"""Benchmark decontamination with GPT-3's n-gram overlap (Brown et al. 2020, appendix C).

Text is normalized as GPT-3 did: lower case, punctuation removed, split on whitespace.
An eval item contributes its 13-grams; an item shorter than 13 words contributes itself
whole (its own length is n), if it has at least `min_words` (8) words: NQ-open questions
have a median of 9 words, so a pure 13-gram filter could never match most of them, while
items under 8 words ("who wrote hamlet") are too generic to call a match contamination.

The index is a sorted numpy array of 64-bit n-gram hashes (8 bytes per n-gram, looked up
with `searchsorted`) plus, per hash, which item it came from: small enough to ship to
every worker as a Beam side input even for millions of n-grams.
"""
from __future__ import annotations

import hashlib
import os
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from common.settings import check
from stages.formats import read_records
from stages.record import SNIPPET_MAX_CHARS, Document, DropReason, Edit, Stage, StageResult
from stages.table import GLOBAL, StageSpec

STAGE = "decontaminate"
_PUNCT_TABLE = str.maketrans({ch: " " for ch in string.punctuation + "“”‘’«»„–—…"})
_WORD = re.compile(r"\S+")
_BASE = np.uint64(1099511628211)  # FNV prime: window hash = sum(word_hash * BASE^k), wrapping mod 2^64


@dataclass(frozen=True)
class DecontamConfig:
    """Benchmark decontamination (GPT-3 style 13-grams); runs when benchmarks are given."""

    # PATH or PATH:field1,field2; a folder means every file in it (e.g. MMLU's subject CSVs)
    benchmarks: tuple[str, ...] = ()
    n: int = 13
    min_words: int = 8                 # items shorter than n are matched whole if they have at least this many words
    policy: str = "excise"             # excise (GPT-3: the span and excise_margin characters each side) or drop
    excise_margin: int = 200           # characters removed on each side of a match
    min_fragment_chars: int = 200      # fragments shorter than this are dropped
    max_fragments: int = 10            # a document split into more pieces is dropped

    def __post_init__(self):
        check(self.policy in ("excise", "drop"), f"policy must be excise or drop, got {self.policy!r}")
        check(self.n >= 1 and self.min_words >= 1, "n and min_words must be >= 1")


@dataclass(frozen=True)
class EvalItem:
    benchmark: str
    item_id: str
    text: str


def normalize_words(text: str) -> list[str]:
    return text.lower().translate(_PUNCT_TABLE).split()


def _word_hashes(words: Sequence[str]) -> np.ndarray:
    cache: dict[str, int] = {}
    out = np.empty(len(words), dtype=np.uint64)
    for i, w in enumerate(words):
        h = cache.get(w)
        if h is None:
            h = cache[w] = int.from_bytes(hashlib.blake2b(w.encode("utf-8"), digest_size=8).digest(), "little")
        out[i] = h
    return out


def window_hashes(word_hashes: np.ndarray, n: int) -> np.ndarray:
    """Hash of every window of n consecutive words (vectorized: n passes over the array)."""
    count = len(word_hashes) - n + 1
    if count <= 0:
        return np.empty(0, dtype=np.uint64)
    acc = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            acc = acc * _BASE + word_hashes[k:k + count]
    return acc


class DecontaminationIndex:
    """Sorted n-gram hashes of all eval items, with the item each came from."""

    def __init__(self, items: Sequence[EvalItem], n: int = 13, min_words: int = 8):
        self.n, self.min_words = n, min_words
        self.items = list(items)
        hashes, owners, self.lengths, self.skipped = [], [], set(), {}
        for idx, item in enumerate(self.items):
            words = normalize_words(item.text)
            if len(words) < min_words:
                self.skipped[item.benchmark] = self.skipped.get(item.benchmark, 0) + 1
                continue
            size = min(n, len(words))
            self.lengths.add(size)
            h = np.unique(window_hashes(_word_hashes(words), size))
            hashes.append(h)
            owners.append(np.full(len(h), idx, dtype=np.int32))
        all_hashes = np.concatenate(hashes) if hashes else np.empty(0, dtype=np.uint64)
        all_owners = np.concatenate(owners) if owners else np.empty(0, dtype=np.int32)
        order = np.argsort(all_hashes, kind="stable")
        self.hashes, self.owners = all_hashes[order], all_owners[order]
        self.lengths = sorted(self.lengths, reverse=True)

    def __len__(self) -> int:
        return len(self.hashes)

    def nbytes(self) -> int:
        return self.hashes.nbytes + self.owners.nbytes

    def matches(self, text: str) -> list[tuple[int, int, int]]:
        """(first word, word count, item index) of every n-gram of `text` found in the index."""
        words = normalize_words(text)
        if not words or not len(self.hashes):
            return []
        word_hashes = _word_hashes(words)
        found = []
        for size in self.lengths:
            windows = window_hashes(word_hashes, size)
            pos = np.searchsorted(self.hashes, windows)
            pos[pos == len(self.hashes)] = 0
            for start in np.nonzero(self.hashes[pos] == windows)[0]:
                found.append((int(start), size, int(self.owners[pos[start]])))
        return found


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character span of each normalized word, so matches can be cut out of the original text."""
    spans = []
    for m in _WORD.finditer(text.lower().translate(_PUNCT_TABLE)):
        spans.append((m.start(), m.end()))
    return spans


class Decontaminator(Stage):
    """Stage: drops or excises documents that share an n-gram with a benchmark item."""

    name = STAGE

    def __init__(self, index: DecontaminationIndex, config: DecontamConfig = DecontamConfig()):
        self.index, self.config = index, config

    def __call__(self, doc: Document) -> StageResult:
        self.count("chars_seen", len(doc.text))  # the edit book's share of text cut
        found = self.index.matches(doc.text)
        if not found:
            return doc
        items = sorted({self.index.items[i].benchmark + ":" + self.index.items[i].item_id for _, _, i in found})
        benchmarks = sorted({self.index.items[i].benchmark for _, _, i in found})
        for b in benchmarks:
            self.count(f"contaminated_docs.{b}")
        for _, _, i in found:
            self.count(f"matched_ngrams.{self.index.items[i].benchmark}")
        detail = f"{len(found)} n-grams of {', '.join(items[:5])}{' ...' if len(items) > 5 else ''}"
        if self.config.policy == "drop":
            return doc.drop(STAGE, DropReason.CONTAMINATED, detail, value=len(found))
        return self._excise(doc, found, detail)

    def _excise(self, doc: Document, found, detail: str) -> StageResult:
        c, spans = self.config, word_spans(doc.text)
        cuts = []
        for start, size, _ in found:
            lo = max(spans[start][0] - c.excise_margin, 0)
            hi = min(spans[start + size - 1][1] + c.excise_margin, len(doc.text))
            cuts.append((lo, hi))
        cuts.sort()
        merged = [list(cuts[0])]
        for lo, hi in cuts[1:]:
            if lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        pieces, pos = [], 0
        for lo, hi in merged:
            pieces.append(doc.text[pos:lo])
            pos = hi
        pieces.append(doc.text[pos:])
        pieces = [p.strip() for p in pieces if p.strip()]
        if len(pieces) > c.max_fragments:
            return doc.drop(STAGE, DropReason.CONTAMINATED, f"{detail}; split into {len(pieces)} pieces",
                            value=len(pieces), threshold=c.max_fragments)
        kept = [p for p in pieces if len(p) >= c.min_fragment_chars]
        if not kept:
            return doc.drop(STAGE, DropReason.CONTAMINATED, f"{detail}; nothing left after excision", value=len(found))
        self.count("excised_docs")
        text = "\n\n".join(kept)
        removed = "\n".join(doc.text[lo:hi].strip() for lo, hi in merged)
        return doc.edited(text, Edit(STAGE, len(merged), len(doc.text) - len(text), removed[:SNIPPET_MAX_CHARS]))


# ---- reading eval sets as users have them ---------------------------------------------------------

BUILTIN_FIELDS = {  # layouts of the common benchmarks: which fields hold the text that must not leak
    "gsm8k": ("question", "answer"),
    "humaneval": ("prompt", "canonical_solution"),
    "mbpp": ("text", "code"),
    "nq_open": ("question",),
    "mmlu": ("question", "choice0", "choice1", "choice2", "choice3"),
}


def _guess_benchmark(path: str) -> str:
    lower = path.lower().replace("-", "_")
    for name in BUILTIN_FIELDS:
        if name in lower:
            return name
    return os.path.basename(path).split(".")[0]


def read_benchmark(spec: str) -> list[EvalItem]:
    """Items from "PATH" or "PATH:field1,field2". Formats: .jsonl[.gz], .json, .csv, .parquet, plain text.
    Without fields, the built-in layout for the benchmark named in the path is used, else `text`."""
    path, _, fields_spec = spec.partition(":") if not os.path.exists(spec) else (spec, "", "")
    name = _guess_benchmark(path)
    fields = tuple(f for f in fields_spec.split(",") if f) or BUILTIN_FIELDS.get(name, ("text",))
    items = []
    for i, record in enumerate(read_records(path)):
        if isinstance(record, str):
            text = record
        else:
            missing = [f for f in fields if f not in record]
            if len(missing) == len(fields):
                raise ValueError(f"{path}: record {i} has none of the fields {fields}; name them as PATH:field,...")
            text = "\n".join(_as_text(record[f]) for f in fields if f in record and record[f] is not None)
        if text.strip():
            items.append(EvalItem(name, str(record.get("task_id", i)) if isinstance(record, dict) else str(i), text))
    return items


def _as_text(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def read_benchmarks(specs: Iterable[str]) -> list[EvalItem]:
    """All items of all specs; a folder means every file in it (e.g. the 57 MMLU subject CSVs)."""
    items: list[EvalItem] = []
    for spec in specs:
        path = spec.split(":", 1)[0] if not os.path.exists(spec) else spec
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                items += read_benchmark(os.path.join(path, name) + spec[len(path):])
        else:
            items += read_benchmark(spec)
    return items


SPEC = StageSpec(
    name=STAGE, order=100, runs=GLOBAL, config=DecontamConfig, section="decontam",
    job="pipeline.job.globals.decontaminate:Decontaminate",
    enabled=lambda run: bool(run.decontam.benchmarks), about="benchmark n-grams excised or documents dropped",
    reasons={DropReason.CONTAMINATED: "shares an n-gram with a benchmark item (policy drop, or too little left "
                                      "after excising; detail: n-gram count and items)"})
