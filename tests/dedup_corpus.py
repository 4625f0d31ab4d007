"""A near-duplicate corpus with known ground truth, built from real text (tests and bench/ use it).

Bases: main texts of the 20 real test pages and disjoint 8-sentence chunks of the multilingual
sentences. Each base gets variants edited by random word substitutions (plus header/footer lines
for some) until their shingle Jaccard with the base reaches a target: 0.95 and 0.85 (true near
duplicates), 0.65 (grey zone, not scored) and 0.40 (must stay apart).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from stages.dedup import jaccard, shingles
from stages.extraction.extract import ExtractConfig, extract_text
from stages.record import Document
from tests.conftest import HTML_DIR, SENTENCES_DIR

TARGETS = {"v95": 0.95, "v85": 0.85, "v65": 0.65, "v40": 0.40}
FRAMED = {"v85"}  # these also get a header and a footer line
HEADER, FOOTER = "Home | News | Sport | Contact | Login", "© 2024 Example Media Group. All rights reserved."


@dataclass
class Corpus:
    docs: list[Document]
    group: dict[str, str]          # doc id -> base id
    jaccard_to_base: dict[str, float]


def real_bases(sentence_chunk: int = 8, disjoint: bool = True, n_random: int = 0, seed: int = 0) -> list[str]:
    bases = []
    for path in sorted(HTML_DIR.glob("*.html")):
        text = extract_text(path.read_text(encoding="utf-8", errors="replace"), None, ExtractConfig().trafilatura_options())
        if text and len(text.split()) >= 80:
            bases.append(text)
    rng = random.Random(seed)
    for path in sorted(SENTENCES_DIR.glob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if disjoint:
            bases += [" ".join(lines[i:i + sentence_chunk]) for i in range(0, len(lines) - sentence_chunk + 1, sentence_chunk)]
    for _ in range(n_random):  # overlapping samples: realistic partial overlaps, no ground truth
        path = rng.choice(sorted(SENTENCES_DIR.glob("*.txt")))
        lines = path.read_text(encoding="utf-8").splitlines()
        bases.append(" ".join(rng.sample(lines, sentence_chunk)))
    return bases


def make_variant(base: str, target: float, framed: bool, rng: random.Random, vocabulary: list[str]) -> str:
    """The most-edited variant whose Jaccard with the base is still >= target (binary search on edits)."""
    words = base.split()
    positions = list(range(len(words)))
    rng.shuffle(positions)
    replacements = [rng.choice(vocabulary) for _ in positions]
    base_shingles = shingles(base)

    def variant(k: int) -> str:
        edited = words[:]
        for pos, word in zip(positions[:k], replacements[:k]):
            edited[pos] = word
        text = " ".join(edited)
        return f"{HEADER}\n{text}\n{FOOTER}" if framed else text

    lo, hi = 0, len(words)  # invariant: variant(lo) >= target
    if jaccard(shingles(variant(0)), base_shingles) < target:
        return variant(0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if jaccard(shingles(variant(mid)), base_shingles) >= target:
            lo = mid
        else:
            hi = mid - 1
    return variant(lo)


def build(seed: int = 0, **base_options) -> Corpus:
    rng = random.Random(seed)
    bases = [b for b in real_bases(**base_options) if len(shingles(b)) >= 40]
    vocabulary = sorted({w for b in bases for w in b.split() if w.isalpha()})
    docs, group, jac = [], {}, {}
    for i, base in enumerate(bases):
        base_id = f"b{i:04d}"
        docs.append(Document(id=base_id, url=f"http://corpus/{base_id}", source="test", text=base, lang=None))
        group[base_id], jac[base_id] = base_id, 1.0
        for kind, target in TARGETS.items():
            text = make_variant(base, target, kind in FRAMED, rng, vocabulary)
            doc_id = f"{base_id}-{kind}"
            docs.append(Document(id=doc_id, url=f"http://corpus/{doc_id}", source="test", text=text))
            group[doc_id], jac[doc_id] = base_id, jaccard(shingles(text), shingles(base))
    return Corpus(docs, group, jac)
