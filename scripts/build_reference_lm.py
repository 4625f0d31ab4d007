"""Recipe for the bundled reference language models, stages/models/reference_lm.npz (run: `make reference-lm`).

Data: NTREX-128 (123 news documents translated by professionals into 128 language variants) and FLORES-200
(Wikipedia sentences in 205 variants, 10 consecutive ones a document), both CC BY-SA 4.0, from the workspace's
shared/data/multilingual; variants are merged under the lid.176 label language ID gives their text. One
character trigram model a language (bigrams where the distinct trigrams overfill the table: zh, yue, ja, ko, th, lo, am, km, ar),
fitted on both sources.

The level a page is compared with is measured on text from a source the model was not fitted on: the median bits
per character of NTREX documents under a model of the language's FLORES text, and of FLORES documents under a
model of its NTREX text, the lower of the two (they differ by a few percent, except where one source has a
script the other lacks). A language in one source only gets the level of its even documents under a
model of its odd ones (a sanity check, marked `same_source` in the card).

    python scripts/build_reference_lm.py [--data ../shared/data/multilingual] [--output stages/models/reference_lm.npz]
"""
import json
import os
import statistics
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import shared_data  # noqa: E402

from stages.reference import flores_documents, lid_code, ntrex_documents  # noqa: E402
from stages.reference_lm import KINDS, TABLE_BITS, LanguageModel, fit  # noqa: E402

# trigram tables with more of their buckets set than this: the language's model uses bigrams only (in a fuller
# table, unseen trigrams of a page would often land on a set bucket and read as seen)
FULL_TABLE = 0.3
MIN_DOCUMENTS = 40  # fewer documents of a language in all sources: no model


def model(texts: list[str]) -> LanguageModel:
    tables = fit(texts, orders=3)
    if (tables["seen_3"] > 0).mean() > FULL_TABLE:  # the unigram and bigram tables are the same either way
        return LanguageModel(2, {kind: table for kind, table in tables.items() if not kind.endswith("_3")}, 1.0)
    return LanguageModel(3, tables, 1.0)


def median_bits(lm: LanguageModel, texts: list[str]) -> float:
    return statistics.median(b for b in (lm.bits(t) for t in texts) if b is not None)


def main(argv=None) -> int:
    args = shared_data.multilingual_args(argv, __doc__.split("\n")[0], "stages/models/reference_lm.npz",
                                         "make reference-lm", ("ntrex128", "sib200_flores"))
    from stages.langid import model_codes

    labels = model_codes()
    by_source: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for source, documents in (("ntrex", ntrex_documents(args.data)), ("flores", flores_documents(args.data))):
        for code, _number, text in documents:
            lang = lid_code(code, labels)
            if lang and text.strip():
                by_source[lang][source].append(text)
    rows: dict[str, dict[str, np.ndarray]] = {}
    index: dict[str, dict] = {}
    for lang in sorted(by_source):
        sources = by_source[lang]
        texts = [t for docs in sources.values() for t in docs]
        if len(texts) < MIN_DOCUMENTS:
            continue
        if len(sources) == 2:
            levels = [median_bits(model(sources[a]), sources[b]) for a, b in (("flores", "ntrex"), ("ntrex", "flores"))]
            # the lower: where one source has a script the other lacks (Serbian: NTREX in Cyrillic and Latin,
            # FLORES in Cyrillic), that direction measures the missing script, not how prose reads
            level, how = min(levels), f"other_source ({levels[0]:.3f} ntrex, {levels[1]:.3f} flores)"
        else:
            level, how = median_bits(model(texts[1::2]), texts[0::2]), "same_source"
        final = model(texts)
        index[lang] = {"orders": final.orders, "row": len(rows), "level": round(level, 4), "level_from": how,
                       "documents": {s: len(d) for s, d in sorted(sources.items())}}
        rows[lang] = final.tables
        print(f"{lang}: orders {final.orders}, level {level:.3f} bits/char ({how}), "
              f"{sum(len(d) for d in sources.values())} documents", flush=True)
    card = {"languages": index, "table_bits": TABLE_BITS,
            "data": "NTREX-128 and FLORES-200 (CC BY-SA 4.0), shared/data/multilingual; scripts/build_reference_lm.py"}
    # a bigram model's trigram tables are zeros (never read: its `orders` is 2)
    stacked = {kind: np.stack([tables.get(kind, np.zeros(1 << TABLE_BITS[order], np.uint8)) for tables in rows.values()])
               for kind, order in KINDS.items()}
    np.savez_compressed(args.output, index=np.frombuffer(json.dumps(card, sort_keys=True).encode(), dtype=np.uint8),
                        **stacked)
    print(f"wrote {args.output}: {len(index)} languages, {os.path.getsize(args.output) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
