"""Readers of the reference prose that recipes and benchmarks use (never the run itself): NTREX-128 news
and FLORES-200 Wikipedia sentences, both professionally translated, from the workspace's shared/data.

    ntrex_documents(MULTILINGUAL)     (file code, document number, text), one sentence a line
    flores_documents(MULTILINGUAL)    (folder code, chunk number, text), `per_doc` consecutive sentences
    tatoeba_documents(MULTILINGUAL)   (ISO 639-3 code, chunk number, text), `per_doc` sentences
    lid_code(code, labels)            the lid.176 label of an ISO 639-3 code (with a variant), or None
"""
from __future__ import annotations

import csv
import functools
import glob
import os
from collections.abc import Iterator

# ISO 639-3 codes ICU does not map to lid.176's (macrolanguage members, 639-3-only codes)
MACRO = {"arb": "ar", "pes": "fa", "prs": "fa", "zsm": "ms", "msa": "ms", "cmn": "zh", "zho": "zh", "nob": "no",
         "nno": "nn", "swh": "sw", "plt": "mg", "mlg": "mg", "npi": "ne", "gaz": "om", "als": "sq", "sqi": "sq",
         "fil": "tl", "kmr": "ku", "ckb": "ckb", "yue": "yue", "uzb": "uz", "aze": "az", "mon": "mn", "lav": "lv",
         "est": "et", "fas": "fa", "srp": "sr", "bos": "bs", "hrv": "hr", "pus": "ps", "snd": "sd", "tgk": "tg",
         # FLORES-200's individual languages of a macrolanguage lid.176 names
         "azj": "az", "khk": "mn", "lvs": "lv", "ory": "or", "pbt": "ps", "tgl": "tl", "uzn": "uz", "ydd": "yi",
         "quy": "qu", **{arabic: "ar" for arabic in ("acm", "acq", "aeb", "ajp", "apc", "ars", "ary")}}


@functools.cache
def iso3_to_iso1() -> dict[str, str]:
    import icu

    return {icu.Locale(c).getISO3Language(): c for c in icu.Locale.getISOLanguages()}


def lid_code(code: str, labels: set[str] | frozenset[str]) -> str | None:
    """The lid.176 label of an NTREX/FLORES code ("deu", "eng-GB", "zho_Hans"), or None if lid.176 has none."""
    three = code.replace("_", "-").split("-")[0]
    label = MACRO.get(three) or iso3_to_iso1().get(three) or three
    return label if label in labels else None


def ntrex_documents(multilingual: str) -> Iterator[tuple[str, int, str]]:
    """(file code, document number, text) for every NTREX-128 file, documents as DOCUMENT_IDS.tsv groups
    them (the same 123 documents in every language)."""
    folder = os.path.join(multilingual, "ntrex128")
    with open(os.path.join(folder, "DOCUMENT_IDS.tsv"), encoding="utf-8") as fh:
        doc_ids = [line.strip() for line in fh]
    for path in sorted(glob.glob(os.path.join(folder, "NTREX-128", "newstest2019-*.txt"))):
        code = os.path.basename(path).split(".", 1)[1].rsplit(".", 1)[0]
        with open(path, encoding="utf-8") as fh:
            lines = [line.replace("\r", "").strip() for line in fh]
        docs: dict[str, list[str]] = {}
        for doc_id, line in zip(doc_ids, lines):
            docs.setdefault(doc_id, []).append(line)
        for number, sentences in enumerate(docs.values()):
            yield code, number, "\n".join(s for s in sentences if s)


def flores_documents(multilingual: str, per_doc: int = 10,
                     splits: tuple[str, ...] = ("train", "dev", "test")) -> Iterator[tuple[str, int, str]]:
    """(folder code such as "deu_Latn", chunk number, text): FLORES-200 sentences of `splits` in their original
    order, `per_doc` consecutive ones (from the same article, mostly) to a document, one a line."""
    root = os.path.join(multilingual, "sib200_flores", "data", "annotated")
    for folder in sorted(glob.glob(os.path.join(root, "*_*"))):
        if not os.path.isdir(folder):  # e.g. an archive next to the folders
            continue
        sentences: list[str] = []
        for split in splits:
            with open(os.path.join(folder, f"{split}.tsv"), encoding="utf-8", newline="") as fh:
                rows = sorted(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), key=lambda r: int(r["index_id"]))
                sentences += [r["text"] for r in rows]
        for number, start in enumerate(range(0, len(sentences) - per_doc + 1, per_doc)):
            yield os.path.basename(folder), number, "\n".join(sentences[start:start + per_doc])


def tatoeba_documents(multilingual: str, per_doc: int = 8) -> Iterator[tuple[str, int, str]]:
    """(ISO 639-3 code, chunk number, text): Tatoeba's sentences (LASER's test pairs with English; the English
    side once), `per_doc` to a document, one a line."""
    folder = os.path.join(multilingual, "tatoeba_laser", "data", "tatoeba", "v1")
    english_done = False
    for path in sorted(glob.glob(os.path.join(folder, "tatoeba.*-eng.*"))):
        code = path.rsplit(".", 1)[1]
        if code == "eng" and english_done:
            continue
        english_done |= code == "eng"
        with open(path, encoding="utf-8") as fh:
            sentences = [line.strip() for line in fh if line.strip()]
        for number, start in enumerate(range(0, len(sentences) - per_doc + 1, per_doc)):
            yield code, number, "\n".join(sentences[start:start + per_doc])
