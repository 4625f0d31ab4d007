"""Dedup's records, Beam-free: the `Signed` record of a document (its signature, rank and tokens, never its
text), the `Decision` that drops one, and the `Signer` phase 1 signs documents with. The dedup transforms
(pipeline/job/globals/dedup.py) group and compare them; phase 1's task (pipeline/job/prepare.py) writes them."""
from __future__ import annotations

import hashlib
import pickle
import zlib
from typing import NamedTuple

from pipeline.counters import count, note
from stages.dedup import (
    BAND_DIGEST_BYTES,
    DedupConfig,
    MinHasher,
    band_keys,
    copy_rank,
    exact_key,
    shingle_hash,
    shingles,
)
from stages.mix import approx_tokens
from stages.origin import NO_DATE, origin_evidence
from stages.record import Document

GROUP_BITS = 12  # joins by id or exact key: 4,096 groups, each of documents / 4,096 records


class Signed(NamedTuple):
    """What dedup needs of a document, never its text: signature, what ranks it, tokens (for the funnel)
    and the prepared part it lies in (where the decision goes back to). Kept small: one job holds one per
    document in its groupings."""

    id: str
    part: str
    number: int                          # unique in the run: (part's input file index << 32) | row; near dedup's node
    exact_key: str | None               # None: the text could not be hashed in phase 1 (matches nothing)
    bands: bytes | None                 # the MinHash band digests, concatenated (band i at i * BAND_DIGEST_BYTES);
                                        # None in the slim records that exact dedup groups and passes on
    quality: float | None
    chars: int
    tokens: int
    shingles: frozenset | None = None    # shingle hashes, only with dedup.verify
    copies: int = 1                      # documents this one stands for once dedup kept it (itself included)
    # evidence of origin (stages.origin.origin_evidence): declares another page canonical, earliest date it existed
    origin: tuple[int, str] = (0, NO_DATE)
    site: str = ""                       # stages.mix.site_of its URL, and its language: what grouped stages group by
    #                                      (filled only for a run with one, GlobalStage.reads_site)
    lang: str | None = None

    @property
    def rank(self) -> tuple:
        """Smaller is the copy to keep (stages.dedup.copy_rank)."""
        return copy_rank(self.origin, self.tokens, self.quality, self.chars, self.id)

    def band_digests(self) -> list[bytes]:
        n = BAND_DIGEST_BYTES
        return [self.bands[i:i + n] for i in range(0, len(self.bands), n)]

    def slim(self) -> bytes:
        """Packed without band digests and shingles: what ranks and places a document, ~40 % of its size."""
        return self._replace(bands=None, shingles=None).pack()

    def pack(self) -> bytes:
        """One byte string: what the dedup transforms pass around (groupings concatenate them, GroupedRecords)."""
        return pickle.dumps(tuple(self), protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def unpack(packed: bytes) -> Signed:
        return Signed(*pickle.loads(packed))


def group_of(key: str) -> int:
    """One of 2**GROUP_BITS groups, from a document id or exact key: the joins of dedup group documents
    by it rather than one key per document (a per-key entry costs more than the packed record)."""
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) >> (32 - GROUP_BITS)


def hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def group_of_number(number: int) -> int:
    return zlib.crc32(number.to_bytes(8, "big")) >> (32 - GROUP_BITS)


def by_group_of_id(packed: bytes) -> tuple[int, bytes]:
    return group_of(Signed.unpack(packed).id), packed


class Decision(NamedTuple):
    """A dedup stage drops document `id` of part `part`; the part's documents are read once, later, to
    ledger it with everything the ledger shows (url, language, file, snippet)."""

    id: str
    part: str
    stage: str
    reason: str
    detail: str
    kept_id: str | None = None
    value: float | None = None        # the ledger's measured value (robots: the tokens the page would have given)


class Signer:
    """exact key and MinHash band digests of a text (phase 1 stores them; `--dedup-against` compares them)."""

    def __init__(self, config: DedupConfig):
        self._config, self._hasher = config, None

    def __call__(self, doc: Document) -> tuple[str | None, list[bytes]]:
        c = self._config
        if self._hasher is None:
            self._hasher = MinHasher(c.num_perm, c.seed)
        try:
            key = exact_key(doc.text)
            doc_shingles = shingles(doc.text, c.shingle_words, doc.lang)
        except Exception:  # the document still goes on; it just matches nothing
            count(note("prepare", "unsigned"))
            return None, []
        if not doc_shingles:
            return key, []
        bands, rows = c.band_rows()
        return key, [digest for _, digest in band_keys(self._hasher.signature(doc_shingles), bands, rows)]


def signed(doc: Document, part: str, number: int, signature: tuple[str | None, list[bytes]],
           config: DedupConfig | None = None) -> Signed:
    """The Signed record of a document (with its shingle hashes when `config.verify`)."""
    shingle_set = verify_shingles(doc.text, doc.lang, config) if config is not None and config.verify else None
    return Signed(doc.id, part, number, signature[0], b"".join(signature[1] or ()), doc.quality_score, len(doc.text),
                  approx_tokens(doc.text), shingle_set, origin=origin_evidence(doc.url, doc.metadata))


def verify_shingles(text: str, lang: str | None, config: DedupConfig) -> frozenset:
    """The shingle hashes `dedup.verify` compares (none if the text cannot be shingled)."""
    try:
        return frozenset(shingle_hash(s) for s in shingles(text, config.shingle_words, lang))
    except Exception:
        return frozenset()
