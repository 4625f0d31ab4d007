"""Source mixing and shard assignment, Beam-free.

Tokens are approximated as UTF-8 bytes / 4 (about one GPT-2/Llama BPE token per 4 bytes of
English; unlike whitespace words it also counts Chinese or Thai text sensibly). Sampling is
deterministic: a document's fate depends only on (seed, id), never on worker or order.
"""
from __future__ import annotations

import hashlib
from collections.abc import Mapping
from urllib.parse import urlsplit

from stages.origin import original_url
from stages.record import DropReason
from stages.table import GLOBAL, StageSpec

SPEC = StageSpec(name="mix", order=120, runs=GLOBAL, enabled=lambda run: bool(run.mix),
                 job="pipeline.job.globals.mix:Mix",
                 about="sources sampled to the requested token shares (`--mix`)",
                 reasons={DropReason.MIX_DOWNSAMPLED: "not drawn: its source is above its share"})


def approx_tokens(text: str) -> int:
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


def unit_hash(seed: int, *parts: str) -> float:
    """A number in [0, 1) from (seed, parts): the same on every run and every worker."""
    h = hashlib.blake2b("\x1f".join((str(seed),) + parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(h.digest(), "big") / 2**64


def site_of(url: str | None) -> str:
    """The site a page belongs to, for spreading a split over sites: its host, lower case, without "www."; a
    Wayback copy (web.archive.org/web/TIMESTAMP/URL) belongs to the site it copied."""
    url = original_url(url)
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname or ""
    except ValueError:  # a hostile URL ("http://[bad/"): its own site
        host = url[:200]
    return host.removeprefix("www.").replace("|", "%7C")  # "|" separates the anneal tallies' key parts


def repeat_id(doc_id: str, epoch: int) -> str:
    """The id of the `epoch`-th repeat the mix makes of a document (epoch 0: the document itself)."""
    return f"{doc_id}#e{epoch}" if epoch else doc_id


def original_id(doc_id: str) -> str:
    """The id of the document a repeat (`repeat_id`) was copied from."""
    head, sep, tail = doc_id.rpartition("#e")
    return head if sep and tail.isdigit() else doc_id


def parse_weights(spec: str) -> dict[str, float]:
    """"web=0.7,code=0.2,books=0.1" -> weights normalized to sum 1."""
    weights = {}
    for part in spec.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--mix: expected NAME=WEIGHT, got {part!r}")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--mix: the weight of {name.strip()!r} must be a number, got {value!r} "
                             "(e.g. --mix web=0.7,code=0.3)") from None
    total = sum(weights.values())
    if total <= 0 or any(w < 0 for w in weights.values()):
        raise ValueError("--mix: weights must be >= 0 and not all 0")
    return {k: v / total for k, v in weights.items()}


def mix_rates(weights: Mapping[str, float], tokens: Mapping[str, int]) -> dict[str, float]:
    """Copies per document for each source so output token shares match `weights`, keeping the
    total token count of the output equal to the input's (rates < 1 downsample, > 1 repeat)."""
    total = sum(tokens.values())
    rates = {}
    for source, available in tokens.items():
        if source not in weights:
            rates[source] = 1.0  # a source without a weight passes through unchanged
        else:
            rates[source] = weights[source] * total / available if available else 0.0
    return rates


def copies(doc_id: str, rate: float, seed: int, max_copies: int = 4) -> int:
    """How many times a document appears: floor(rate), plus one with probability frac(rate), at most
    `max_copies` (a share that needs more is reported as unreachable rather than met by repetition)."""
    if rate >= max_copies:
        return max_copies
    whole = int(rate)
    return whole + (1 if unit_hash(seed, "mix", doc_id) < rate - whole else 0)


def parse_rehydration(spec: str) -> tuple[tuple[int, int | None, int], ...]:
    """"1:1,2:2,3-4:3,5-100:5,101-1000:8,1001-:1" -> ((low, high or None, copies), ...): copies of a document
    that stands for a duplicate cluster of low..high documents (FineWeb-2's rehydration). Every size from 1
    up must fall in exactly one range."""
    table = []
    for part in spec.split(","):
        sizes, sep, weight = part.partition(":")
        low, dash, high = sizes.strip().partition("-")
        try:
            entry = (int(low), (int(high) if high.strip() else None) if dash else int(low), int(weight))
        except ValueError:
            raise ValueError(f"rehydrate_weights: expected SIZE:COPIES or LOW-HIGH:COPIES (LOW-: no upper end), "
                             f"got {part!r}") from None
        if not sep or entry[2] < 1 or (entry[1] is not None and entry[1] < entry[0]):
            raise ValueError(f"rehydrate_weights: {part!r} is not a size range with copies >= 1")
        table.append(entry)
    table.sort(key=lambda entry: entry[0])
    expected = 1
    for low, high, _ in table:
        if low != expected:
            raise ValueError("rehydrate_weights: the ranges must cover every cluster size from 1 once; "
                             + (f"{expected} is missing" if low > expected else f"{low} is in two ranges"))
        if high is None:
            if (low, high) != table[-1][:2]:
                raise ValueError("rehydrate_weights: only the last range may be open (LOW-)")
            return tuple(table)
        expected = high + 1
    raise ValueError("rehydrate_weights: the last range must be open (LOW-:COPIES), so every size has a weight")


def rehydration_weight(table: tuple[tuple[int, int | None, int], ...], cluster_size: int | None) -> int:
    """Copies of a document whose duplicate cluster had `cluster_size` documents (None: 1)."""
    size = cluster_size or 1
    return next(copies for low, high, copies in table if low <= size and (high is None or size <= high))
