"""Words run together (lost spaces, hashtags, URLs) are not mojibake: text_repair's false drops and damage on
correct text of every language (issue 84, item 4).

    .venv/bin/python bench/run_together.py [--fraction 0.05] [--seed 0] [--json FILE]

NTREX-128 (every language, one document per article of DOCUMENT_IDS.tsv) and FLORES-200 (every language of
SIB-200's copy, dev + devtest + train, one document per sentence) with the space removed between 5 % of the
pairs of adjacent words, chosen at random (seeded). Each document goes through the text_repair stage at its
default settings; a drop is a false drop (the text is correct), and a document whose `encoding_damage` is
over 0 is counted too. Needs ../shared/data/multilingual (one clear line when it is not here).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from stages.record import Document, Drop  # noqa: E402
from stages.text_repair import TextRepair  # noqa: E402

NTREX = shared_data.path("multilingual", "ntrex128")
FLORES = shared_data.path("multilingual", "sib200_flores", "data", "annotated")


def run_together(text: str, fraction: float, rng: random.Random) -> str:
    """The text with the space between a `fraction` of its adjacent word pairs removed (line breaks kept)."""
    lines = []
    for line in text.split("\n"):
        words = line.split(" ")
        out = [words[0]]
        for word in words[1:]:
            if rng.random() < fraction and out[-1] and word:
                out[-1] += word
            else:
                out.append(word)
        lines.append(" ".join(out))
    return "\n".join(lines)


def ntrex_documents():
    ids = open(os.path.join(NTREX, "DOCUMENT_IDS.tsv"), encoding="utf-8").read().splitlines()
    folder = os.path.join(NTREX, "NTREX-128")
    for name in sorted(os.listdir(folder)):
        lines = open(os.path.join(folder, name), encoding="utf-8").read().splitlines()
        documents = collections.defaultdict(list)
        for doc_id, line in zip(ids, lines):
            documents[doc_id.split("\t")[0]].append(line)
        yield "ntrex:" + name.split(".")[-2], ["\n".join(v) for v in documents.values()]


def flores_documents():
    for lang in sorted(os.listdir(FLORES)):
        sentences = []
        for split in ("dev", "test", "train"):
            path = os.path.join(FLORES, lang, f"{split}.tsv")
            if os.path.exists(path):
                rows = open(path, encoding="utf-8").read().splitlines()[1:]
                sentences += [row.split("\t", 2)[2] for row in rows if row.count("\t") >= 2]
        if sentences:
            yield "flores:" + lang, sentences


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    shared_data.require("bench/run_together.py", {NTREX: "NTREX-128", FLORES: "SIB-200's FLORES sentences"})
    stage, rng = TextRepair(), random.Random(args.seed)
    stage.count = lambda name, n=1: None
    table = {}
    for corpus, documents in (*ntrex_documents(), *flores_documents()):
        dropped = damaged = 0
        for i, text in enumerate(documents):
            out = stage(Document(id=str(i), url="u", source="bench", text=run_together(text, args.fraction, rng)))
            dropped += isinstance(out, Drop)
            damaged += isinstance(out, Drop) or out.scores["encoding_damage"] > 0
        table[corpus] = {"documents": len(documents), "dropped": dropped, "damaged": damaged}
    for corpus in ("ntrex", "flores"):
        rows = {k: v for k, v in table.items() if k.startswith(corpus)}
        print(f"{corpus}: {len(rows)} languages, {sum(r['documents'] for r in rows.values())} documents, "
              f"dropped {sum(r['dropped'] for r in rows.values())}, damage > 0 in "
              f"{sum(r['damaged'] for r in rows.values())}")
    for corpus, row in table.items():
        if row["damaged"]:
            print(f"  {corpus}: dropped {row['dropped']}, damage > 0 in {row['damaged']} of {row['documents']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"fraction": args.fraction, "seed": args.seed, "languages": table}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
