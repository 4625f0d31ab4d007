"""Train and evaluate the fastText quality classifier (`refinery train-quality`).

Inputs are JSONL (optionally .gz), Parquet, or plain text (one document per line); the
text field is chosen with `text_field`. Text is normalized with `stages.quality.normalize`,
the same function the scorer uses. Settings follow DCLM's classifier (word bigrams).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass

from common.settings import check
from stages.formats import read_records
from stages.models import positive_probability
from stages.quality import GRADES, NEGATIVE, POSITIVE, normalize_page, predict_hq


@dataclass(frozen=True)
class Labels:
    """What a two-label classifier tells apart, and the one text normalization of training and scoring."""

    positive: str
    negative: str
    meaning: Mapping[str, str]
    normalize: Callable[[str], str]
    normalization: str = ""          # for the model card
    score: str = ""                  # for the model card: how a score is computed from the model


QUALITY = Labels(POSITIVE, NEGATIVE, {POSITIVE: "high quality", NEGATIVE: "low quality"}, normalize_page,
                 "stages.quality.normalize_page: NFKC, lower case, digits -> 0, line breaks -> ¶, punctuation "
                 "split off, whitespace collapsed to one line, first 20,000 characters; one token a character "
                 "in Han, kana, Thai, Lao, Khmer, Myanmar and Tibetan script",
                 f"P({POSITIVE}), stages.quality.predict_hq")


@dataclass(frozen=True)
class QualityTrainConfig:
    """fastText training of the quality classifier."""

    epochs: int = 20
    lr: float = 0.5
    word_ngrams: int = 2          # word n-grams: DCLM's fastText classifier uses bigrams
    dim: int = 16                 # 16 vs 64: same held-out F1 on the bundled recipe, a quarter of the size
    # character n-grams of minn..maxn characters (fastText subwords; 0 = words only): they carry across
    # spellings, inflections and related languages
    minn: int = 0
    maxn: int = 0
    min_count: int = 2
    bucket: int = 200_000         # hashed n-gram buckets: model size is (words + bucket) * dim before quantizing
    test_fraction: float = 0.2    # held-out share, split by text hash
    seed: int = 0
    quantize: bool = True         # .ftz: a few MB instead of tens, if held-out F1 stays within 0.01
    quantize_cutoff: int = 100_000  # words and n-grams kept when quantizing (0: all); rare scripts' features
                                    # are the first to go
    threads: int = 1              # one thread: training is then deterministic for a given seed
    min_f1: float = 0.5           # a model whose held-out F1 is under this is not written (--force writes it)

    def __post_init__(self):
        check(0.0 < self.test_fraction < 1.0, "test_fraction must be between 0 and 1")
        small = [k for k in ("epochs", "word_ngrams", "dim", "min_count", "bucket", "threads") if getattr(self, k) < 1]
        check(not small, f"must be >= 1: {', '.join(small)}")
        check(self.lr > 0, "lr must be positive")
        check(0 <= self.minn <= self.maxn and (self.minn > 0) == (self.maxn > 0),
              f"minn and maxn: both 0 (words only) or 1 <= minn <= maxn, got {self.minn} and {self.maxn}")


def read_texts(path: str, text_field: str = "text") -> Iterator[str]:
    """Documents from .jsonl[.gz], .json, .parquet (their `text_field`), or plain text (one per line)."""
    if path.lower().endswith(".parquet"):  # the one column only
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        if text_field not in names:
            raise ValueError(f"{path}: no {text_field!r} column (columns: {', '.join(names[:10])}); "
                             "choose one with --text-field")
        yield from (t for t in pq.read_table(path, columns=[text_field]).column(text_field).to_pylist() if t)
        return
    for n, record in enumerate(read_records(path), 1):
        if isinstance(record, str):
            yield record
            continue
        try:
            value = record[text_field]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path}: record {n} has no {text_field!r} field ({type(exc).__name__}); "
                             "choose one with --text-field") from exc
        if value:
            yield value


def split_by_hash(texts: Sequence[str], test_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """A split that depends on the text itself, so duplicates never straddle train and test."""
    train, test = [], []
    for text in texts:
        h = int(hashlib.blake2b(f"{seed}:{text}".encode(), digest_size=8).hexdigest(), 16) / 2**64
        (test if h < test_fraction else train).append(text)
    return train, test


def metrics(scores: Sequence[float], truth: Sequence[bool], threshold: float = 0.5) -> dict[str, float]:
    tp = sum(s >= threshold and t for s, t in zip(scores, truth))
    fp = sum(s >= threshold and not t for s, t in zip(scores, truth))
    fn = sum(s < threshold and t for s, t in zip(scores, truth))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = sum((s >= threshold) == t for s, t in zip(scores, truth)) / max(len(truth), 1)
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "accuracy": round(accuracy, 4), "n": len(truth)}


def _write_training_file(path: str, positives: Sequence[str], negatives: Sequence[str], seed: int,
                         labels: Labels = QUALITY) -> None:
    rows = ([f"{labels.positive} {labels.normalize(t)}" for t in positives]
            + [f"{labels.negative} {labels.normalize(t)}" for t in negatives])
    random.Random(seed).shuffle(rows)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(rows) + "\n")


def train(positives: Sequence[str], negatives: Sequence[str], output: str, config: QualityTrainConfig = QualityTrainConfig(),
          description: str = "", held_out: tuple[Sequence[str], Sequence[str]] | None = None,
          labels: Labels = QUALITY, force: bool = False) -> dict:
    """Train, evaluate on held-out data, write the model and `<output>.card.json`; returns the card.
    A held-out F1 under `config.min_f1` is a ValueError and nothing is written, unless `force`.

    `held_out` = (positives, negatives) given by the caller (e.g. split by web page); otherwise
    the inputs are split by text hash with `config.test_fraction`.
    """
    import fasttext

    if not positives or not negatives:
        raise ValueError(f"need both classes: {len(positives)} positive and {len(negatives)} negative documents")
    if held_out is None:
        pos_train, pos_test = split_by_hash(positives, config.test_fraction, config.seed)
        neg_train, neg_test = split_by_hash(negatives, config.test_fraction, config.seed)
    else:
        (pos_train, neg_train), (pos_test, neg_test) = (list(positives), list(negatives)), map(list, held_out)
    if not pos_test or not neg_test:
        raise ValueError("held-out split is empty for a class: add documents or raise --test-fraction")
    with tempfile.TemporaryDirectory() as tmp:
        train_file = os.path.join(tmp, "train.txt")
        _write_training_file(train_file, pos_train, neg_train, config.seed, labels)
        model = fasttext.train_supervised(
            input=train_file, epoch=config.epochs, lr=config.lr, wordNgrams=config.word_ngrams, dim=config.dim,
            minCount=config.min_count, bucket=config.bucket, minn=config.minn, maxn=config.maxn, seed=config.seed,
            thread=config.threads, verbose=0)
        test_texts = [labels.normalize(t) for t in pos_test + neg_test]
        truth = [True] * len(pos_test) + [False] * len(neg_test)

        def score(texts):
            return positive_probability(model, texts, labels.positive, labels.negative)

        full = metrics(score(test_texts), truth)
        final = full
        if config.quantize:
            model.quantize(input=train_file, retrain=config.quantize_cutoff > 0, cutoff=config.quantize_cutoff,
                           qnorm=True, thread=config.threads)
            final = metrics(score(test_texts), truth)
        if final["f1"] < config.min_f1 and not force:
            raise ValueError(f"held-out F1 {final['f1']:.3f} is under min_f1 {config.min_f1} ({len(pos_train)} + "
                             f"{len(neg_train)} training documents): model not written; give more or cleaner "
                             f"data, or --force to write it anyway")
    model.save_model(output)
    card = {
        "model": os.path.basename(output),
        "labels": dict(labels.meaning),
        "score": labels.score,
        "normalization": labels.normalization,
        "training_data": description,
        "sizes": {"positive_train": len(pos_train), "positive_test": len(pos_test),
                  "negative_train": len(neg_train), "negative_test": len(neg_test)},
        "held_out_metrics": final,
        "held_out_metrics_before_quantization": full if config.quantize else None,
        "settings": asdict(config),
        "model_bytes": os.path.getsize(output),
    }
    with open(output + ".card.json", "w", encoding="utf-8") as fh:
        json.dump(card, fh, indent=2, ensure_ascii=False)
    return card


def boilerplate_lines(html: str, main_text: str) -> list[str]:
    """The page's visible text nodes that are not part of its main text: menus, footers, link lists,
    cookie notices. (trafilatura.html2txt returns the whole page as one line, so it cannot tell them apart.)"""
    import lxml.html

    try:
        tree = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return []
    for node in tree.xpath("//script|//style|//noscript|//template|//head"):
        node.drop_tree()
    lines = []
    for node in tree.itertext():
        text = " ".join(node.split())
        if len(text) >= 2 and text not in main_text:
            lines.append(text)
    return lines


def train_graded(examples: Sequence[tuple[str, float]], output: str, config: QualityTrainConfig = QualityTrainConfig(),
                 description: str = "") -> dict:
    """A graded quality classifier (labels __label__0 .. __label__5, e.g. an annotator's 0-5 scores, rounded):
    its score is the expected grade / 5 (`stages.quality.predict_hq`). Held out by text hash; the card has
    the mean absolute error of the expected grade and the share within one grade."""
    import fasttext

    graded = [(text, min(max(int(round(float(grade))), 0), 5)) for text, grade in examples if text]
    if len({g for _, g in graded}) < 2:
        raise ValueError("graded labels need at least two different grades")
    test_keys = set(split_by_hash([t for t, _ in graded], config.test_fraction, config.seed)[1])
    train_rows = [(t, g) for t, g in graded if t not in test_keys]
    test_rows = [(t, g) for t, g in graded if t in test_keys]
    if not test_rows or not train_rows:
        raise ValueError("held-out split is empty: add documents or raise --test-fraction")
    with tempfile.TemporaryDirectory() as tmp:
        train_file = os.path.join(tmp, "train.txt")
        rows = [f"{GRADES[g]} {normalize_page(t)}" for t, g in train_rows]
        random.Random(config.seed).shuffle(rows)
        with open(train_file, "w", encoding="utf-8") as fh:
            fh.write("\n".join(rows) + "\n")
        model = fasttext.train_supervised(
            input=train_file, epoch=config.epochs, lr=config.lr, wordNgrams=config.word_ngrams, dim=config.dim,
            minCount=config.min_count, bucket=config.bucket, minn=config.minn, maxn=config.maxn, seed=config.seed,
            thread=config.threads, verbose=0)
        if config.quantize:
            model.quantize(input=train_file, retrain=config.quantize_cutoff > 0, cutoff=config.quantize_cutoff,
                           qnorm=True, thread=config.threads)
    model.save_model(output)
    expected = [5.0 * s for s in predict_hq(model, [normalize_page(t) for t, _ in test_rows])]
    errors = [abs(e - g) for e, (_, g) in zip(expected, test_rows)]
    card = {"model": os.path.basename(output), "labels": {GRADES[g]: f"grade {g}" for g in range(6)},
            "score": "expected grade / 5 (stages.quality.predict_hq)", "normalization": QUALITY.normalization,
            "training_data": description, "sizes": {"train": len(train_rows), "test": len(test_rows)},
            "held_out_metrics": {"mean_absolute_error": round(sum(errors) / len(errors), 4),
                                 "within_one_grade": round(sum(e <= 1 for e in errors) / len(errors), 4),
                                 "n": len(test_rows)},
            "settings": asdict(config), "model_bytes": os.path.getsize(output)}
    with open(output + ".card.json", "w", encoding="utf-8") as fh:
        json.dump(card, fh, indent=2, ensure_ascii=False)
    return card


def machine_made(text: str, key: str) -> tuple[str, str]:
    """A negative from a reference document, chosen by hash: a listing (its words in order, cut into lines of
    1-4 words: menus, tag clouds) or keyword stuffing (its 1-3 word phrases, repeated, joined by separators).
    Word order inside a line is kept: shuffled words would make every unseen word pair look like junk."""
    rng = random.Random(key)
    words = text.split()
    if words and len(text) / len(words) > 20:  # a script without spaces: cut into pieces of 2-5 characters
        letters, words = "".join(words), []
        while letters:
            n = rng.randint(2, 5)
            words.append(letters[:n])
            letters = letters[n:]
    cuts, i = [], 0
    while i < len(words):
        n = rng.randint(1, 4 if rng.random() < 0.5 else 3)
        cuts.append(" ".join(words[i:i + n]))
        i += n
    if rng.random() < 0.5:
        return "listing", "\n".join(cuts)
    phrases = [c for c in cuts if len(c.split()) <= 3] or cuts
    stuffed = [rng.choice(phrases) for _ in range(len(cuts))]
    separator = rng.choice((", ", " | ", " - ", " · "))
    return "keywords", "\n".join(separator.join(stuffed[i:i + 8]) for i in range(0, len(stuffed), 8))


# Scripts written without spaces, whose UTF-8 misread as GBK is what Chinese crawl pages' broken text looks like.
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def garbled(text: str, key: str) -> str | None:
    """A negative from a reference document: its UTF-8 bytes read in another encoding, as a browser or a
    crawler guessing the charset wrongly shows it (Windows-1252 or Latin-1 for most scripts, Windows-1251 for
    Cyrillic, GBK for Han, kana and Hangul, with the bytes GBK cannot read lost). None when the text would not
    change (plain ASCII)."""
    rng = random.Random(f"garbled:{key}")
    data = text.encode("utf-8")
    if _CJK.search(text):
        encoding = "gbk"
    elif re.search("[\u0400-\u04ff]", text):
        encoding = rng.choice(("cp1251", "cp1252"))
    else:
        encoding = rng.choice(("cp1252", "latin-1"))
    broken = data.decode(encoding, errors="replace" if rng.random() < 0.5 else "ignore")
    return None if broken == text else broken


def chrome_table(lines: list[str], key: str) -> str:
    """A negative from a page's boilerplate lines: the same lines as rows of a pipe table, 2-6 cells a row, as
    extraction renders a layout table of menu entries and links (`| Home | Reservations | Our Destinations |`)."""
    rng = random.Random(f"table:{key}")
    rows, i = [], 0
    while i < len(lines):
        n = rng.randint(2, 6)
        rows.append("| " + " | ".join(lines[i:i + n]) + " |")
        i += n
    return "\n".join(rows)
