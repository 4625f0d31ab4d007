"""C4's page cleaning (Raffel et al. 2020), as TFDS `c4_utils.clean_page` implements it. Off by default.

It edits the text (drops lines) as well as filtering pages. Sentences are counted by
terminal punctuation, as the C4 paper describes ("a simple count of end marks"), instead
of TFDS's NLTK punkt model, which would have to be downloaded at run time.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from common.settings import check_not_negative
from stages.record import Document, DropReason, RuleStage, StageResult
from stages.table import StageSpec

_CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")
_END_MARKS = (".", "?", "!", '"')
# A sentence end: a run of . ! ? and the quotes or brackets closing it, before a space or the line's end (counted
# run by run in `sentence_ends`: as one regex, `[.!?]+[\"')\]]*(?=\s|$)`, a long run of marks with no space after
# it took quadratic time).
_MARK_RUN = re.compile(r"[.!?]+")
_CLOSERS = re.compile(r"[\"')\]]*")
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


@dataclass(frozen=True)
class C4Config:
    """C4's page cleaning (TFDS c4_utils.py values; available, off by default)."""

    enabled: bool = False
    # The C4 paper's prose says 3 words per line and 5 sentences; the code that built C4 uses 5 and 3.
    min_words_per_line: int = 5
    min_sentences: int = 3                    # sentences left after line cleaning
    max_word_length: int = 1000               # lines with a longer "word" are removed
    max_page_chars: int | None = 190_000   # TFDS is_valid_length, applied before line cleaning
    remove_citations: bool = True             # [1], [edit], [citation needed]
    remove_javascript_lines: bool = True
    remove_policy_lines: bool = True          # "terms of use", "privacy policy", cookie notices

    def __post_init__(self):
        check_not_negative(self)


class C4Filter(RuleStage):
    """Removes lines that fail C4's line rules and drops pages that fail its page rules."""

    name = "c4"

    def __init__(self, config: C4Config = C4Config()):
        super().__init__(config)

    def __call__(self, doc: Document) -> StageResult:
        c = self.config_for(doc.lang)
        if c.max_page_chars is not None and len(doc.text) > c.max_page_chars:
            return doc.drop(self.name, DropReason.C4_TOO_LONG, f"{len(doc.text)} > {c.max_page_chars} characters",
                            value=len(doc.text), threshold=c.max_page_chars)
        kept, sentences, verdict = clean_lines(doc.text, c)
        if verdict is not None:
            return doc.drop(self.name, *verdict)
        if sentences < c.min_sentences or not kept:  # no line left: never an empty document, whatever the threshold
            return doc.drop(self.name, DropReason.C4_TOO_FEW_SENTENCES, f"{sentences} < {max(c.min_sentences, 1)}",
                            value=sentences, threshold=max(c.min_sentences, 1))
        return doc.replace(text="\n".join(kept))


def clean_lines(text: str, c: C4Config) -> tuple[list[str], int, tuple[str, str] | None]:
    """(lines C4 keeps, sentences in them, a page verdict (lorem ipsum, code) or None)."""
    kept, sentences = [], 0
    for line in text.splitlines():
        line = line.strip()
        if any(len(word) > c.max_word_length for word in line.split()):
            continue
        if c.remove_citations:
            line = _CITATION.sub("", line)
        if not line.endswith(_END_MARKS) or line.endswith("..."):
            continue
        if len(line.split()) < c.min_words_per_line:
            continue
        lower = line.lower()
        if "lorem ipsum" in lower:
            return kept, sentences, (DropReason.C4_LOREM_IPSUM, "")
        if c.remove_javascript_lines and "javascript" in lower:
            continue
        if "{" in line:  # probably code
            return kept, sentences, (DropReason.C4_CURLY_BRACKET, line[:80])
        if c.remove_policy_lines and any(p in lower for p in _POLICY):
            continue
        sentences += max(sentence_ends(line), 1)
        kept.append(line)
    return kept, sentences, None


def sentence_ends(line: str) -> int:
    """How many sentence ends a line has (C4's "count of end marks"), in time linear in its length."""
    ends = 0
    for run in _MARK_RUN.finditer(line):
        after = _CLOSERS.match(line, run.end()).end()
        ends += after == len(line) or line[after].isspace()
    return ends


SPEC = StageSpec(
    name=C4Filter.name, order=50, config=C4Config, build=C4Filter,
    about="C4 page rules (lines failing C4's line rules are removed from kept pages)",
    reasons={DropReason.C4_LOREM_IPSUM: "the page contains \"lorem ipsum\"",
             DropReason.C4_CURLY_BRACKET: "a kept line contains `{` (probably code)",
             DropReason.C4_TOO_FEW_SENTENCES: "fewer than `min_sentences` after line cleaning",
             DropReason.C4_TOO_LONG: "more than `max_page_chars` characters"})
