"""N-gram statistics of the Gopher repetition rules, exact (no hashing), in two units.

Words (the recipe): an n-gram is n consecutive words and a share counts word characters.
Content (scripts written without spaces: Chinese, Japanese, Thai, Lao, Khmer, Burmese, Tibetan): ICU cuts
their text into pieces of very different weight (Japanese kana endings fall apart into one-character
pieces, a Latin name inside Chinese text stays one long piece), so neither "n pieces" nor "n x scale
pieces" spans what n English words do. There a piece counts as words of content: each character of those
scripts 1 / `chars_per_word` (the language's characters per English word in the same text, measured on
parallel text by `refinery calibrate`), any other piece (a Latin word, a number) one word. An n-gram is
the shortest run of pieces from a start that holds n words of content, and shares are shares of content.
"""
from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

import numpy as np

# The scripts written without spaces (stages/text.py NO_SPACE_LANGS): Thai, Lao, Tibetan, Myanmar, Khmer,
# kana and the CJK ideographs (iteration and closing marks, half-width katakana, the supplementary planes)
_NO_SPACE_CHAR = re.compile("[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u19e0-\u19ff\u3005-\u3007"
                            "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uaa60-\uaa7f\uf900-\ufaff"
                            "\uff66-\uff9f\U00020000-\U0003ffff]")


@functools.lru_cache(maxsize=1 << 16)
def _script_chars(word: str) -> tuple[int, bool]:
    """(characters of a no-space script, whether the word has any other character)."""
    n = len(_NO_SPACE_CHAR.findall(word))
    return n, n < len(word)


def content_words(words: Sequence[str], chars_per_word: float) -> np.ndarray:
    """Each word's content in English words (module docstring)."""
    counts = np.array([_script_chars(w) for w in words], dtype=np.float64).reshape(-1, 2)
    return counts[:, 0] / chars_per_word + counts[:, 1]


def content_counts(words: Sequence[str]) -> tuple[int, int]:
    """(characters of no-space scripts, words with other characters): what calibration counts."""
    script = [_script_chars(w) for w in words]
    return sum(n for n, _ in script), sum(other for _, other in script)


class NGrams:
    """Exact n-gram identities of a word sequence as dense integer arrays, built up one n at a time:
    an n-gram is the pair (its (n-1)-gram, its last word), numbered by np.unique. No hashing, so no
    collisions; O(len(words) log len(words)) per n instead of hashing n-word tuples.
    `chars_per_word`: count content, not words (module docstring); shares are then of content."""

    def __init__(self, words: Sequence[str], chars_per_word: float | None = None, sizes: Sequence[int] = range(2, 11)):
        # word -> its rank of first appearance (built and applied in C: this runs for every word of every page)
        vocabulary = dict(zip(dict.fromkeys(words), itertools.count()))
        self.words = np.fromiter(map(vocabulary.__getitem__, words), dtype=np.int64, count=len(words))
        self.vocabulary = max(len(vocabulary), 1)
        self.lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        self.by_content = chars_per_word is not None
        if self.by_content:
            per_word = content_words(list(vocabulary), chars_per_word)
            self.weights = per_word[self.words] if len(self.words) else np.zeros(0)
        else:
            self.weights = self.lengths
        self.total = self.weights.sum().item()
        self._n, self._ids = 1, self.words
        self._sizes = tuple(sizes)  # by content: the n the caller will ask for, spanned in one pass
        self._spans: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def ids(self, n: int) -> np.ndarray:
        """One id per n-word start position (len(words) - n + 1 of them); equal n-grams, equal ids."""
        if n < self._n:
            self._n, self._ids = 1, self.words
        while self._n < n:
            self._n += 1
            pairs = self._ids[:-1] * self.vocabulary + self.words[self._n - 1:]
            self._ids = np.unique(pairs, return_inverse=True)[1].reshape(-1)
        return self._ids

    def spans(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, ids) of the n-grams: n words, or by content the shortest runs holding n words of it."""
        count = len(self.words)
        if not self.by_content:
            starts = np.arange(max(count - n + 1, 0))
            return starts, starts + n, self.ids(n) if len(starts) else starts
        if n not in self._spans:
            self._spans.update(self._content_spans(sorted({n, *self._sizes})))
        return self._spans[n]

    def _content_spans(self, sizes: Sequence[int]) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The spans of every n in `sizes` at once: a run of k words is the k-gram at its start, and each k's ids
        are computed once, in order (memory: one k's ids and the spans at a time, not a table of every k)."""
        count = len(self.words)
        cum = np.concatenate(([0.0], np.cumsum(self.weights)))
        starts, ends = [], []
        for n in sizes:
            last = np.maximum(np.searchsorted(cum, cum[:-1] + n - 1e-9, side="left"), np.arange(1, count + 1))
            first = np.flatnonzero(last <= count)
            starts.append(first)
            ends.append(last[first])
        every_start, every_end = np.concatenate(starts), np.concatenate(ends)
        lengths = every_end - every_start
        longest = int(lengths.max()) if len(lengths) else 0
        keys = np.empty(len(lengths), dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        bounds = np.searchsorted(lengths[order], np.arange(1, longest + 2))
        for k in range(1, longest + 1):  # equal runs: the same number of words and the same k-gram
            chosen = order[bounds[k - 1]:bounds[k]]
            keys[chosen] = self.ids(k)[every_start[chosen]] * (longest + 1) + k
        out, offset = {}, 0
        for n, first, last in zip(sizes, starts, ends):
            mine = keys[offset:offset + len(first)]
            offset += len(first)
            out[n] = (first, last, np.unique(mine, return_inverse=True)[1].reshape(-1) if len(mine) else mine)
        return out

    def top_chars(self, n: int) -> float:
        """Word characters (or content) covered by the most frequent n-gram (its length times its count)."""
        starts, ends, ids = self.spans(n)
        if not len(starts):
            return 0
        freq = np.bincount(ids)[ids]
        best = int(freq.max())
        if best < 2:
            return 0
        cum = np.concatenate(([0], np.cumsum(self.weights)))
        covered = (cum[ends] - cum[starts])[freq == best].max()
        return min(covered.item() * best, self.total)

    def duplicated_chars(self, n: int) -> float:
        """Word characters (or content) at positions covered by any n-gram that occurs at least twice."""
        starts, ends, ids = self.spans(n)
        if not len(starts):
            return 0
        repeated = np.bincount(ids)[ids] > 1
        if not repeated.any():
            return 0
        cover = np.zeros(len(self.words) + 1, dtype=np.int64)
        np.add.at(cover, starts[repeated], 1)
        np.add.at(cover, ends[repeated], -1)
        return self.weights[np.cumsum(cover[:-1]) > 0].sum().item()

    def top_share(self, n: int) -> float:
        return self.top_chars(n) / self.total if self.total else 0.0

    def duplicated_share(self, n: int) -> float:
        return self.duplicated_chars(n) / self.total if self.total else 0.0
