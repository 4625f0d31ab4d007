"""How predictable a page's text is under a small model of its language's reference prose (CCNet's perplexity
idea, Wenzek et al. 2020), as the quality signal `lm_surprise`.

One character trigram model a language (Witten-Bell interpolated with the bigram and unigram models), fitted on
professionally translated news and Wikipedia text (NTREX-128, FLORES-200) by `make reference-lm`. The model's
probabilities are kept as quantized bits in hashed tables (stages/models/reference_lm.npz), so the whole set of
languages ships in a few MB and a page is scored in a few numpy passes, without Python work per character.

`lm_surprise` is a page's bits per character divided by its language's reference level: the median bits per
character of prose from a source the model was not fitted on (NTREX scored by the FLORES model, and the other way
round). 1 is as predictable as edited news; menus, lists of names and prices, machine-made and broken text, and
text in another language than the one language ID chose score higher. A language without a model has no value.
"""
from __future__ import annotations

import functools
import json
import os
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from stages.models import bundled

BUNDLED = "reference_lm.npz"
MAX_CHARS = 10_000  # a page's head says how it is written; long pages would only cost time
SCALE = 16          # bits are stored as round(bits * SCALE) in a uint8 (0: not seen); 15.9 bits at most
UNSEEN_BITS = 16.0  # a character the language's reference text never uses
# hashed table sizes (log2 buckets) by order; scripts with thousands of characters fill them, so their models
# use bigrams only (`orders` in the file)
TABLE_BITS = {3: 16, 2: 14, 1: 12}
KINDS = {"seen_1": 1, "seen_2": 2, "backoff_2": 1, "seen_3": 3, "backoff_3": 2}  # table -> its TABLE_BITS order
_MULTIPLIERS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9))
_MIX = np.uint64(0xFF51AFD7ED558CCD)
_DIGIT = re.compile(r"\d")


def normalize(text: str) -> str:
    """What the model reads, in fitting and scoring alike: NFKC, lower case, digits -> 0, whitespace runs -> one
    space, the first MAX_CHARS characters (names and figures vary; their shape is what is predictable)."""
    text = unicodedata.normalize("NFKC", text[:MAX_CHARS]).lower()
    return _DIGIT.sub("0", " ".join(text.split()))


def code_points(text: str) -> np.ndarray:
    """The text's code points as uint64, with a space before and after (the start and end of the text)."""
    return np.frombuffer(f" {text} ".encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)


def bucket(bits: int, *grams: np.ndarray) -> np.ndarray:
    """The table bucket of each n-gram (one array of code points per position of the n-gram)."""
    h = np.zeros(len(grams[0]), dtype=np.uint64)
    for position, column in enumerate(grams):
        h ^= (column + np.uint64(position + 1)) * _MULTIPLIERS[position]
    h *= _MIX
    h ^= h >> np.uint64(29)
    h *= _MIX
    return (h >> np.uint64(64 - bits)).astype(np.int64)


@dataclass(frozen=True)
class LanguageModel:
    """One language's tables: `seen_<n>` holds -log2 P(c | the n-1 characters before) of n-grams of its reference
    text; `backoff_<n>` -log2 of the weight Witten-Bell gives the lower order after an (n-1)-character context."""

    orders: int
    tables: dict[str, np.ndarray]
    level: float      # bits per character of reference prose from a source the model was not fitted on

    def bits(self, text: str) -> float | None:
        """Mean bits per character of `text` (normalized here), or None for text under 20 characters."""
        cp = code_points(normalize(text))
        if len(cp) < 22:
            return None
        t = self.tables
        c = cp[2:]
        seen1 = t["seen_1"][bucket(TABLE_BITS[1], c)]
        bits = np.where(seen1 > 0, seen1 / SCALE, UNSEEN_BITS)
        b = cp[1:-1]
        seen2 = t["seen_2"][bucket(TABLE_BITS[2], b, c)]
        bits = np.where(seen2 > 0, seen2 / SCALE, t["backoff_2"][bucket(TABLE_BITS[1], b)] / SCALE + bits)
        if self.orders >= 3:
            a = cp[:-2]
            seen3 = t["seen_3"][bucket(TABLE_BITS[3], a, b, c)]
            bits = np.where(seen3 > 0, seen3 / SCALE, t["backoff_3"][bucket(TABLE_BITS[2], a, b)] / SCALE + bits)
        return float(bits.mean())

    def surprise(self, text: str) -> float | None:
        bits = self.bits(text)
        return None if bits is None else bits / self.level


class ReferenceModels:
    """The bundled (or a given) file of language models; `surprise(text, lang)`. `load` shares one copy among
    the stages of a process."""

    def __init__(self, path: str | None = None):
        path = path or bundled(BUNDLED)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"reference language models not found: {path!r}. `make reference-lm` builds "
                                    "them; nothing is downloaded at run time.")
        try:
            with np.load(path, allow_pickle=False) as data:
                index = json.loads(bytes(data["index"]).decode())
                # one array a kind of table, a row a language: a few large allocations, not hundreds of small
                # ones spread over the threads' malloc arenas (address space a memory-capped worker lacks)
                stacked = {kind: data[kind] for kind in KINDS}
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"{path!r} is not a reference language model file: {exc}") from exc
        self.models = {
            lang: LanguageModel(entry["orders"], {kind: stacked[kind][entry["row"]] for kind in KINDS}, entry["level"])
            for lang, entry in index["languages"].items()}

    def surprise(self, text: str, lang: str | None) -> float | None:
        model = self.models.get(lang or "")
        return None if model is None else model.surprise(text)


@functools.lru_cache(maxsize=4)
def _loaded(path: str, _stamp: tuple[int, int]) -> ReferenceModels:
    return ReferenceModels(path)


def load(path: str | None = None) -> ReferenceModels:
    """The models of `path` (none: the bundled file), loaded once a process while the file is unchanged."""
    path = path or bundled(BUNDLED)
    try:
        stat = os.stat(path)
    except OSError:
        return ReferenceModels(path)  # the constructor's one clear error
    return _loaded(path, (stat.st_mtime_ns, stat.st_size))


def _quantize(bits: np.ndarray, least: int = 1) -> np.ndarray:
    return np.clip(np.rint(bits * SCALE), least, 254).astype(np.uint8)


def _table(order: int, grams: list[np.ndarray], bits: np.ndarray, least: int = 1) -> np.ndarray:
    """A hashed table of `bits` (quantized) at the buckets of `grams`; n-grams that collide keep the smaller
    value (the more probable n-gram, or the context that backs off less: the common case stays right)."""
    table = np.full(1 << TABLE_BITS[order], 255, np.uint8)
    np.minimum.at(table, bucket(TABLE_BITS[order], *grams), _quantize(bits, least))
    table[table == 255] = 0
    return table


def fit(texts: list[str], orders: int = 3) -> dict[str, np.ndarray]:
    """The tables of a character model of `texts` (see LanguageModel), Witten-Bell interpolated: an n-gram seen in
    the text gets (count + types(context) * P_lower) / (count(context) + types(context)), an unseen one the
    context's weight types / (count + types) times the lower order's probability."""
    cps = [code_points(normalize(t)) for t in texts if t.strip()]
    shift = np.uint64(21)  # a code point has 21 bits: an n-gram's key is its code points side by side
    mask = (np.uint64(1) << shift) - np.uint64(1)
    keys, counts = np.unique(np.concatenate([cp[2:] for cp in cps]), return_counts=True)
    bits = -np.log2((counts + 1) / (counts.sum() + len(keys) + 1))
    tables = {"seen_1": _table(1, [keys], bits)}
    for order in range(2, orders + 1):
        lower_keys, lower_bits = keys, bits
        grams = np.concatenate([functools.reduce(lambda key, column: (key << shift) | column,
                                                 [cp[2 - i:len(cp) - i] for i in range(order - 1, -1, -1)])
                                for cp in cps])
        keys, counts = np.unique(grams, return_counts=True)
        columns = [(keys >> (shift * np.uint64(order - 1 - i))) & mask for i in range(order)]
        contexts, context_of, types = np.unique(keys >> shift, return_inverse=True, return_counts=True)
        context_total = np.bincount(context_of, weights=counts)
        # the lower order's P of the same last characters (its keys are sorted and hold every one of them)
        below = keys & ((np.uint64(1) << (shift * np.uint64(order - 1))) - np.uint64(1))
        p_lower = np.exp2(-lower_bits[np.searchsorted(lower_keys, below)])
        weight = types[context_of]
        bits = -np.log2((counts + weight * p_lower) / (context_total[context_of] + weight))
        context_columns = [(contexts >> (shift * np.uint64(order - 2 - i))) & mask for i in range(order - 1)]
        tables[f"seen_{order}"] = _table(order, columns, bits)
        tables[f"backoff_{order}"] = _table(order - 1, context_columns, -np.log2(types / (context_total + types)), 0)
    return tables
