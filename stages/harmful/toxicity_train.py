"""Training data and page-length evaluation of the toxicity classifier (`scripts/build_toxicity_model.py`).

Readers of the labeled sets in shared/data/harmful/toxicity (layouts as published), a reader of clean
reference sentences (NTREX-128 news, FLORES-200 Wikipedia), and the page test: toxic passages put into
real pages must raise the page's score, and real pages alone must not.
"""
from __future__ import annotations

import collections
import csv
import glob
import gzip
import hashlib
import json
import os
import random
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from stages.harmful.identity_frames import hostile_words
from stages.harmful.toxicity import CLEAN, TOXIC, log_odds, normalize, predict_toxic, shifted
from stages.quality_train import Labels, split_by_hash

TOXICITY = Labels(TOXIC, CLEAN, {TOXIC: "toxic: hate, offensive or insulting", CLEAN: "not toxic"}, normalize,
                  "stages.harmful.toxicity.normalize: HTML entities undone, @mentions -> @user, links -> url, then "
                  "stages.quality.normalize (NFKC, lower case, digits -> 0, punctuation split off, combining marks kept "
                  "in their words, one token a character in Han, kana, Thai, Lao, Khmer, Myanmar and Tibetan script)",
                  "P(__label__toxic) per paragraph (stages.harmful.toxicity.windows: lines under min_chars joined to the "
                  "next, lines over 2 * window_chars cut); a page scores its most toxic paragraph")


@dataclass(frozen=True)
class Example:
    text: str
    toxic: bool
    dataset: str
    lang: str
    held_out: bool = False      # reference text: in the held-out part (same documents in every language)
    identity: bool = False      # reference text: its English original names a group, religion, nation or party


# toxicity_multilingual/: the sets whose licence lets a shipped model train on them (SOURCES.md there); the
# others (CC BY-NC, research-only) measure only
PERMISSIVE_MULTILINGUAL = frozenset({"ar_mpold", "de_gahd", "ko_kocohub_hate", "ko_curse_detection", "pt_toldbr",
                                     "ru_distorted_toxicity", "tr_offenseval2020", "zh_cold", "zh_swsr"})
# English words naming a group, religion, nation, politics or crime: a reference sentence whose English original
# has one is an "identity-naming" sentence in every language (the false-positive test of the news)
IDENTITY_TERMS = re.compile(
    r"\b(muslims?|islam\w*|jews?|jewish|judaism|christians?|christianity|catholics?|hindus?|hinduism|buddhis\w*|"
    r"sikhs?|blacks?|whites?|african\w*|asian\w*|arabs?|arabic|latin[oa]s?|hispanics?|mexicans?|chinese|indians?|"
    r"immigra\w*|migrants?|refugees?|gays?|lesbians?|bisexual|transgender|trans|lgbt\w*|homosexual\w*|wom[ae]n|"
    r"girls?|feminis\w*|disab\w*|israel\w*|palestin\w*|russians?|americans?|europeans?|relig\w*|"
    r"rac(e|ial|ism|ist)|ethnic\w*|minorit\w*|congress|white house|president|prison\w*|police|terror\w*|"
    r"democrat\w*|republican\w*|church|mosque|synagogue|god|jesus|allah|nazi\w*|slave\w*|ukrainians?|iran\w*|"
    r"syria\w*|kurd\w*|roma|gypsy|nation\w*|citizens?|foreign\w*)\b", re.I)


def read_davidson(path: str) -> Iterator[Example]:
    """Davidson et al. 2017: class 0 hate, 1 offensive (both toxic), 2 neither."""
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            yield Example(row["tweet"], row["class"] in ("0", "1"), "davidson", "en")


def read_civil_comments(folder: str) -> Iterator[Example]:
    """Civil Comments toxic-spans subset: toxic when most annotators did not mark it `not toxic` (ties left out)."""
    votes: dict[str, list[bool]] = collections.defaultdict(list)
    with open(os.path.join(folder, "data", "annotations.csv"), encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            votes[row["comment_id"]].append(row["not toxic"] == "True")
    with open(os.path.join(folder, "data", "comments.csv"), encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            clean = votes.get(row["comment_id"], [])
            if clean and 2 * sum(clean) != len(clean):
                yield Example(row["comment_text"], 2 * sum(clean) < len(clean), "civil_comments", "en")


def read_mlma(folder: str) -> Iterator[Example]:
    """MLMA (Ousidhoum et al. 2019): `sentiment` normal is clean, any hostility type toxic."""
    for lang, name in (("en", "en_dataset_with_stop_words.csv"), ("fr", "fr_dataset.csv"), ("ar", "ar_dataset.csv")):
        with open(os.path.join(folder, "hate_speech_mlma", name), encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                yield Example(row["tweet"], row["sentiment"] != "normal", f"mlma_{lang}", lang)


def read_multilingual(folder: str) -> Iterator[Example]:
    """The labeled sets of shared/data/harmful/toxicity_multilingual (gzipped JSONL: text, label toxic|clean,
    lang); the dataset is the file's name (`permissive(dataset)` says whether a shipped model may train on it)."""
    for path in sorted(glob.glob(os.path.join(folder, "*.jsonl.gz"))):
        name = os.path.basename(path).split(".")[0]
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                yield Example(row["text"], row["label"] == "toxic", name, row["lang"])


def permissive(dataset: str) -> bool:
    """May a model shipped in the package train on this set (its licence: MIT, CC0, CC BY, Apache)?"""
    return dataset in PERMISSIVE_MULTILINGUAL or dataset in ("davidson", "civil_comments", "mlma_en", "mlma_fr",
                                                               "mlma_ar")


def read_parallel(multilingual: str, labels: frozenset[str], per_example: int = 2) -> Iterator[Example]:
    """Clean reference text in every language lid.176 knows: NTREX-128 news (`per_example` sentences of one
    document to an example; every 4th document held out) and FLORES-200 Wikipedia sentences (its test split
    held out): the same documents and sentences are held out in every language. `identity` marks examples
    whose English original names a group (IDENTITY_TERMS)."""
    from stages.reference import lid_code

    folder = os.path.join(multilingual, "ntrex128")
    with open(os.path.join(folder, "DOCUMENT_IDS.tsv"), encoding="utf-8") as fh:
        doc_ids = [line.strip() for line in fh]
    number = {doc: n for n, doc in enumerate(dict.fromkeys(doc_ids))}
    english = _lines(os.path.join(folder, "NTREX-128", "newstest2019-ref.eng-GB.txt"))
    seen: set[str] = set()
    for path in sorted(glob.glob(os.path.join(folder, "NTREX-128", "newstest2019-*.txt"))):
        lang = lid_code(os.path.basename(path).split(".", 1)[1].rsplit(".", 1)[0], labels)
        if lang is None or lang in seen:
            continue  # one variant per language
        seen.add(lang)
        lines = _lines(path)
        i = 0
        while i < len(lines):
            span = [j for j in range(i, min(i + per_example, len(lines))) if doc_ids[j] == doc_ids[i]]
            i = span[-1] + 1
            text = " ".join(lines[j] for j in span if lines[j])
            if text:
                yield Example(text, False, "ntrex", lang, held_out=number[doc_ids[span[0]]] % 4 == 0,
                              identity=any(IDENTITY_TERMS.search(english[j]) for j in span))
    root = os.path.join(multilingual, "sib200_flores", "data", "annotated")
    english_flores = {r["index_id"]: r["text"] for split_name in ("train", "dev", "test")
                      for r in _tsv(os.path.join(root, "eng_Latn", f"{split_name}.tsv"))}
    seen = set()
    for code_folder in sorted(glob.glob(os.path.join(root, "*_*"))):
        lang = lid_code(os.path.basename(code_folder), labels) if os.path.isdir(code_folder) else None
        if lang is None or lang in seen:
            continue
        seen.add(lang)
        for split_name in ("train", "dev", "test"):
            for r in _tsv(os.path.join(code_folder, f"{split_name}.tsv")):
                yield Example(r["text"], False, "flores", lang, held_out=split_name == "test",
                              identity=bool(IDENTITY_TERMS.search(english_flores.get(r["index_id"], ""))))


def _lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.replace("\r", "").strip() for line in fh]


def _tsv(path: str) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def read_tatoeba(folder: str, labels: frozenset[str], per_example: int = 3) -> Iterator[Example]:
    """Clean everyday sentences (Tatoeba via LASER's test sets) of every language lid.176 names (its
    `labels`), the English side of every pair too, `per_example` to an example."""
    from stages.reference import lid_code

    by_lang: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(folder, "tatoeba.*-eng.*"))):
        code = path.rsplit(".", 1)[1]
        lang = "en" if code == "eng" else lid_code(code, labels)
        if lang is not None:
            with open(path, encoding="utf-8") as fh:
                by_lang[lang] += [s.strip() for s in fh if s.strip()]
    for lang, sentences in sorted(by_lang.items()):
        unique = list(dict.fromkeys(sentences))
        for i in range(0, len(unique), per_example):
            yield Example(" ".join(unique[i:i + per_example]), False, "tatoeba", lang)


def read_tatoeba_identity(folder: str, labels: frozenset[str]) -> Iterator[Example]:
    """Tatoeba's pairs whose English side names a group, religion, nation or party (IDENTITY_TERMS), one sentence
    an example, both sides ("America is a country of immigrants.", "And if I were gay, would that be a crime?"):
    short everyday sentences naming a group, so that a group's name alone is not learnt as hate."""
    from stages.reference import lid_code

    for english_path in sorted(glob.glob(os.path.join(folder, "tatoeba.*-eng.eng"))):
        code = os.path.basename(english_path).split(".")[1].split("-")[0]
        lang = lid_code(code, labels)
        english = _lines(english_path)
        other = _lines(english_path[:-len("eng")] + code) if lang else []
        for i, sentence in enumerate(english):
            if sentence and IDENTITY_TERMS.search(sentence):
                yield Example(sentence, False, "tatoeba", "en", identity=True)
                if i < len(other) and other[i]:
                    yield Example(other[i], False, "tatoeba", lang, identity=True)


def web_sentence_pages(folder: str, per_page: int = 20) -> list[tuple[str, str]]:
    """(lang, page): the Leipzig web sentences of lingua's test data (`folder`/sentences/<code>.txt, 1,000 a language,
    Chinese 729, Japanese 412, in 75 languages; never trained on) as pages of `per_page` sentences, one per line:
    ordinary web text of every language, where the bench WARC's held-out pages number 1 to 7 outside English and
    German."""
    pages = []
    for path in sorted(glob.glob(os.path.join(folder, "sentences", "*.txt"))):
        code = os.path.basename(path)[:-len(".txt")]
        lang = {"nb": "no"}.get(code, code)  # lid.176's code
        lines = [line for line in _lines(path) if line]
        pages += [(lang, "\n".join(lines[i:i + per_page])) for i in range(0, len(lines) - per_page + 1, per_page)]
    return pages


def split(examples: Sequence[Example], test_fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """(train, test) by text hash (`split_by_hash`): the same text is never on both sides."""
    _, test_texts = split_by_hash([e.text for e in examples], test_fraction, seed)
    test = set(test_texts)
    return [e for e in examples if e.text not in test], [e for e in examples if e.text in test]


def page_held_out(url: str) -> bool:
    """Half of the bench WARC's pages, by URL hash: the page test's; the other half trains."""
    return int(hashlib.blake2b(url.encode(), digest_size=8).hexdigest(), 16) % 2 == 0


def insert_passage(page: str, passage: str, rng: random.Random) -> str:
    """`page` with `passage` as a paragraph of its own, between two of its lines."""
    lines = page.splitlines()
    at = rng.randint(0, len(lines))
    return "\n".join(lines[:at] + [" ".join(passage.split())] + lines[at:])


def page_test(score, pages: Sequence[tuple[str, str]], toxic_passages: Sequence[str],
              thresholds: Sequence[float] = (0.3, 0.5, 0.7, 0.8, 0.9), seed: int = 0) -> dict:
    """`score(text, lang) -> float` on real pages (lang, text) as they are (false positives, per language), with one
    toxic passage put in each (`recall`) and with three (`recall_three_passages`: a thread of abuse), judged in the
    page's language. Returns rates per threshold."""
    rng = random.Random(seed)
    plain = [(lang, score(text, lang)) for lang, text in pages]
    seeded = [score(insert_passage(text, rng.choice(toxic_passages), rng), lang) for lang, text in pages]
    threads = []
    for lang, text in pages:
        for _ in range(3):
            text = insert_passage(text, rng.choice(toxic_passages), rng)
        threads.append(score(text, lang))
    by_lang: dict[str, list[float]] = collections.defaultdict(list)
    for lang, s in plain:
        by_lang[lang].append(s)
    out = {"pages": len(pages), "recall": {}, "recall_three_passages": {}, "false_positive_rate": {},
           "false_positives_by_language": {}}
    for t in thresholds:
        out["recall"][str(t)] = round(sum(s >= t for s in seeded) / max(len(seeded), 1), 4)
        out["recall_three_passages"][str(t)] = round(sum(s >= t for s in threads) / max(len(threads), 1), 4)
        out["false_positive_rate"][str(t)] = round(sum(s >= t for _, s in plain) / max(len(plain), 1), 4)
        out["false_positives_by_language"][str(t)] = {
            lang: f"{sum(s >= t for s in scores)}/{len(scores)}" for lang, scores in sorted(by_lang.items())}
    return out


OFFSET_ANCHOR = "en"     # the language whose ordinary text the others are brought to: the most labelled data
OFFSET_QUANTILE = 0.95   # of ~460 held-out windows a language, the 95th percentile rests on ~23 (the 99th on 5)


def fit_language_offsets(model, reference, anchor: str = OFFSET_ANCHOR, quantile: float = OFFSET_QUANTILE) -> dict:
    """The card's `language_offsets` of a (loaded) model: for each language of `reference` (held-out
    NTREX-128/FLORES-200 examples, one or two sentences: a window each) the log-odds of its windows' `quantile` raw
    score, less `anchor`'s, where it is higher."""
    texts: dict[str, list[str]] = collections.defaultdict(list)
    for example in reference:
        texts[example.lang].append(example.text)
    tails = {}
    for lang, part in sorted(texts.items()):
        scores = sorted(predict_toxic(model, [normalize(t) for t in part]))
        tails[lang] = log_odds(scores[min(len(scores) - 1, int(quantile * len(scores)))])
    offsets = {lang: round(tail - tails[anchor], 3) for lang, tail in tails.items() if tail > tails[anchor]}
    return dict(offsets=offsets, anchor=anchor, quantile=quantile,
                windows={lang: len(part) for lang, part in sorted(texts.items())},
                about=f"a window's log-odds lose its page language's offset: the log-odds of the {quantile:.0%} "
                      f"quantile of the language's held-out NTREX-128/FLORES-200 windows (never trained on) less "
                      f"{anchor}'s, where higher; fitted on the text of the card's cross_data_set.reference figures "
                      f"(those are then not independent of it), measured on the others")


ORDINARY_MIN_DOCUMENTS = 2  # a word of the language's news used in two examples: a word, not a typo or a name's part
ORDINARY_MIN_CHARS = 3


def ordinary_words(reference: Sequence[Example], toxic: Sequence[Example],
                   min_documents: int = ORDINARY_MIN_DOCUMENTS) -> dict[str, list[str]]:
    """Per language, the everyday words of its news (`reference`: the NTREX-128/FLORES-200 examples trained on) that
    its toxic training text (`toxic`: labelled sets, frames) uses no more often than that news: words of letters (and
    their marks), at least ORDINARY_MIN_CHARS long, in at least `min_documents` examples; sorted. For
    `identity_frames.ordinary_word_sentences`."""
    clean, toxic_texts = _texts_by_language(reference), _texts_by_language(toxic)
    out = {}
    for lang, texts in sorted(clean.items()):
        in_clean, in_toxic = _document_counts(texts, _ordinary), _document_counts(toxic_texts.get(lang, ()), _ordinary)
        n_clean, n_toxic = len(texts), max(len(toxic_texts.get(lang, ())), 1)
        out[lang] = sorted(w for w, n in in_clean.items()
                           if n >= min_documents and in_toxic[w] * n_clean <= n * n_toxic)
    return out


def _ordinary(word: str) -> bool:
    """Letters (and their marks) only, at least ORDINARY_MIN_CHARS of them."""
    return len(word) >= ORDINARY_MIN_CHARS and all(ch.isalpha() or unicodedata.category(ch)[0] == "M" for ch in word)


def _texts_by_language(examples: Sequence[Example]) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = collections.defaultdict(list)
    for example in examples:
        texts[example.lang].append(example.text)
    return texts


def _document_counts(texts: Sequence[str], keep=lambda word: True) -> collections.Counter:
    """How many of `texts` use each (normalized) word."""
    counts: collections.Counter = collections.Counter()
    for text in texts:
        counts.update(w for w in set(normalize(text).split()) if keep(w))
    return counts


# the clean training text whose words a language's pages may hold: news and Wikipedia (~1,250 examples a language)
# and Tatoeba's everyday sentences (~330 examples of three): French "en retard" ("late") is in 3 news examples and 3
# of Tatoeba's, and without Tatoeba the English slur's weight flagged French pages saying it
MASK_SOURCES = ("ntrex", "flores", "tatoeba")
MASK_MIN_DOCUMENTS = 5       # of ~1,600 such training examples a language: a word its ordinary text uses
MASK_MIN_PROBABILITY = 0.5   # the word alone scores toxic (after its language's offset)
# news uses the word at least this many times as often as the language's toxic text: at 1 (no more often), Hindi
# lost "हैं" ("are": 34 % of news examples, 30 % of the toxic frames) and its own templates' hate found at 0.5 fell
# 0.60 -> 0.21; English lost "death" and "hurt", which its toxic tweets use about as often as news
MASK_NEWS_RATIO = 2.0


def fit_language_masks(model, offsets: dict[str, float], reference: Sequence[Example], toxic: Sequence[Example],
                       min_documents: int = MASK_MIN_DOCUMENTS, min_probability: float = MASK_MIN_PROBABILITY,
                       news_ratio: float = MASK_NEWS_RATIO) -> dict:
    """The card's `language_masks` of a (loaded) model: for each language of `reference` (the MASK_SOURCES examples it
    trained on: NTREX-128/FLORES-200 news and Wikipedia, never the held-out ones, and Tatoeba's everyday sentences),
    the words that the model alone scores toxic, that at least `min_documents` of those examples use, and that the
    language's own toxic training text (`toxic`: labelled sets and frames; none for most languages) uses at most 1 /
    `news_ratio` as often as the news or the everyday sentences do, whichever use it more (each its own rate: pooled,
    Tatoeba's few news words would dilute "attack" out of English's mask): their toxic weight was learnt
    from another language, where they are other words ("hoe" is "how" in Afrikaans and Dutch, "sex" is "six" in
    Swedish, "rape" a path in Guarani, "jew" is "or" in Maltese, "retard" is "late" in French) or they are ordinary
    words the language's toxic text does not favour; never a word the language's own lexicon lists as hostile
    (`identity_frames.hostile_words`: English "stab", which Tatoeba's everyday sentences use). The scorer leaves them
    out of a window of a page of that language."""
    by_source: dict[str, dict[str, list[str]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for example in reference:
        by_source[example.lang]["tatoeba" if example.dataset == "tatoeba" else "news"].append(example.text)
    toxic_texts = _texts_by_language(toxic)
    words = {}
    for lang, sources in sorted(by_source.items()):
        in_toxic, n_toxic = _document_counts(toxic_texts.get(lang, ())), len(toxic_texts.get(lang, ()))
        counts = {name: (_document_counts(texts), len(texts)) for name, texts in sources.items()}
        used = collections.Counter()
        for source_counts, _ in counts.values():
            used.update(source_counts)
        common = sorted(w for w, n in used.items() if n >= min_documents)
        scores = predict_toxic(model, common)
        hostile = hostile_words(lang)
        masked = [w for w, p in zip(common, scores) if shifted(p, offsets.get(lang, 0.0)) >= min_probability
                  and any(in_toxic[w] * n * news_ratio <= c[w] * n_toxic for c, n in counts.values())
                  and w not in hostile]
        if masked:
            words[lang] = masked
    return dict(words=words, min_documents=min_documents, min_probability=min_probability, news_ratio=news_ratio,
                about="a window of a page of the language leaves these words out: the model alone scores each toxic "
                      f"(>= {min_probability} after the language's offset), at least {min_documents} of the "
                      "language's NTREX-128/FLORES-200 and Tatoeba training examples use it, and the language's own toxic "
                      f"training text (labelled sets, frames) uses it at most 1/{news_ratio:g} as often as the news or "
                      "the Tatoeba sentences do, whichever use it more, and the language's lexicon does not list it as "
                      "hostile "
                      "(stages.harmful.toxicity_train.fit_language_masks); held-out news, Leipzig pages and every "
                      "labelled set measure it")
