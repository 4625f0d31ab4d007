"""Which LDNOOBW entries are ordinary words: those found in professionally translated news and Wikipedia text.

LDNOOBW v2 joins many profanity lists; its English file alone holds "a", "i", "as", "us", "fish",
"food" and "crash" (each a bad word in some phrase or slang), so a density of its matches measures how
much English a page has, not how obscene it is. An entry that occurs in NTREX-128 (news, 1,997
sentences) or FLORES-200 (Wikipedia, 1,004 sentences) of its language is ordinary vocabulary there and
is left out of the default list (`stages/harmful/badwords.py`), and so is a spelling of an entry in another script
(lists/ldnoobw/spellings); what was left out is written to
`stages/harmful/lists/ldnoobw/ordinary/<version>/<lang>.txt`, for review.

    python scripts/build_badword_exclusions.py [--data ../shared/data/multilingual]
"""
from __future__ import annotations

import argparse
import csv
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import shared_data  # noqa: E402

from stages.harmful.badwords import (  # noqa: E402
    LID_TO_LDNOOBW,
    LISTS,
    ORDINARY,
    list_languages,
    spelling_files,
    spellings,
    split_entries,
)
from stages.text import normalized_words  # noqa: E402

# LDNOOBW file code -> ISO 639-3 as NTREX and FLORES name them (where ICU's mapping is not theirs).
ISO3 = {"ar": "arb", "fa": "pes", "kh": "kan", "no": "nob", "zh": "zho", "ms": "zsm", "sq": "als", "sr": "srp",
        "et": "est", "lv": "lvs", "uz": "uzn", "mn": "khk"}
FLORES_ALT = {"fa": "fas", "ms": "msa", "sq": "sqi", "lv": "lav", "uz": "uzb", "mn": "mon", "zh": "zho"}
LDNOOBW_TO_LID = {v: k for k, v in LID_TO_LDNOOBW.items() if k != "ur"}  # the code tokenizing the list's text


def spelled_languages(version: str, code: str) -> list[str]:
    """The lid.176 codes that have a spelling file of their own for list `code` (<code>.<lid>.txt)."""
    return [os.path.basename(path).split(".")[1] for path in spelling_files(version, code)
            if os.path.basename(path).count(".") == 2]


def iso3(code: str) -> str:
    if code in ISO3:
        return ISO3[code]
    import icu

    return icu.Locale(code).getISO3Language() or code


def ordinary_text(data: str, code: str) -> str:
    """NTREX and FLORES text of one language ("" when neither has it)."""
    three = iso3(code)
    names = {three, FLORES_ALT.get(code, three)}
    texts = []
    for path in sorted(glob.glob(os.path.join(data, "ntrex128", "NTREX-128", "newstest2019-ref*.txt"))):
        if os.path.basename(path).split(".")[1].split("-")[0] in names:
            with open(path, encoding="utf-8") as fh:
                texts.append(fh.read().replace("\r", ""))
    for folder in sorted(glob.glob(os.path.join(data, "sib200_flores", "data", "annotated", "*_*"))):
        if os.path.basename(folder).split("_")[0] in names:
            for split in ("train", "dev", "test"):
                with open(os.path.join(folder, f"{split}.tsv"), encoding="utf-8") as fh:
                    texts.extend(row["text"] for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    return "\n".join(texts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=shared_data.path("multilingual"))
    args = parser.parse_args(argv)
    shared_data.require("make badword-exclusions", {os.path.join(args.data, "ntrex128"): "NTREX-128 news",
                                                    os.path.join(args.data, "sib200_flores"): "FLORES-200 sentences"}, "--data")
    for version in ("v1", "v2"):
        out_dir = os.path.join(ORDINARY, version)
        os.makedirs(out_dir, exist_ok=True)
        for code in list_languages(version):
            # the list's own language and those judged by it whose script its spellings write (Urdu: hi.ur.txt)
            text = "\n".join(filter(None, [ordinary_text(args.data, code)]
                                     + [ordinary_text(args.data, lid) for lid in spelled_languages(version, code)]))
            if not text:
                print(f"{version} {code}: no NTREX/FLORES text, nothing left out")
                continue
            lang = LDNOOBW_TO_LID.get(code, code)
            lower = text.lower()
            tokens = normalized_words(lower, lang)
            vocabulary = set(tokens)
            joined = " " + " ".join(tokens) + " "
            with open(os.path.join(LISTS, version, f"{code}.txt"), encoding="utf-8") as fh:
                entries = sorted({line.strip().lower() for line in fh if line.strip()} | set(spellings(version, code)))
            words, phrases, substrings = split_entries(entries)
            found = sorted([w for w in words if w in vocabulary]
                           + [" ".join(p) for p in phrases if f" {' '.join(p)} " in joined]
                           + [s for s in substrings if s in lower])
            with open(os.path.join(out_dir, f"{code}.txt"), "w", encoding="utf-8") as fh:
                fh.write(f"# LDNOOBW {version} {code} entries found in NTREX-128/FLORES-200 text "
                         f"({len(tokens)} words): left out of the default list\n")
                fh.writelines(f"{w}\n" for w in found)
            print(f"{version} {code}: {len(found)} of {len(entries)} entries are ordinary words "
                  f"({len(tokens)} reference words)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
