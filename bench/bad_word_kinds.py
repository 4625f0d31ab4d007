"""What each kind of listed word drops (issue 56, item 4): sexual, clinical, slur, profanity, identity, other.

    .venv/bin/python bench/bad_word_kinds.py [--no-warc] [--json FILE]

Pages, each judged by the bad_words stage's rule (at least 3 matches and 8 per 1,000 words) on the matches of one
kind alone, on every kind (the rule before kinds existed, close to C4's list), and on the default kinds (sexual,
clinical, slur, unsorted):
  * ordinary pages: every extracted page of the workspace's WARC files, and Leipzig web sentences (lingua's test
    data) as pages of 20 in each language with a list (v1, else v2);
  * profane but not hateful text: Davidson et al.'s "offensive" tweets (class 1), MLMA's tweets marked offensive,
    abusive, disrespectful or fearful but not hateful (en, fr, ar), as pages of 20;
  * hateful text: Davidson's "hate" tweets (class 0), MLMA's hateful tweets, as pages of 20;
  * labelled toxic and clean text in 12 more languages (toxicity_multilingual: offensive, abusive or hateful,
    not split by kind), as pages of 20;
  * sentences of the identity templates that name a group, non-toxic and toxic: the share with a listed word
    of each kind (a sentence is too short to be dropped; a listed group name is what would drop a group's pages);
  * everyday sentences (Tatoeba, Leipzig) of each language judged by a v2 list: the share with a counted word when
    every kind counts (as before v2's lists were sorted, 2026-12-05) and by default.
The kinds were decided from the words' meanings (stages/harmful/lists/ldnoobw/kinds), not fitted on any of
these sets; the default (which kinds count) was chosen with Davidson's classes and the demo's erotic story in
view, so those rows are not independent evidence; the other rows are.
"""
from __future__ import annotations

import argparse
import collections
import csv
import glob
import gzip
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import shared_data  # noqa: E402

from stages.harmful.badwords import KINDS, BadWordsConfig, BadWordsFilter, find_bad_words  # noqa: E402

PAGE = 20        # texts per page
MIN_MATCHES, MAX_DENSITY = BadWordsConfig.min_matches, BadWordsConfig.max_density
DEFAULT = BadWordsFilter()


def pages_of(texts: list[str], seed: int = 0) -> list[str]:
    texts = list(texts)
    random.Random(seed).shuffle(texts)
    return ["\n".join(texts[i:i + PAGE]) for i in range(0, len(texts) - PAGE + 1, PAGE)]


def judge(text: str, lang: str) -> dict | None:
    """Matches per kind and the page's word count, or None where no list exists for the language."""
    words = DEFAULT.word_list(lang)
    if words is None:
        return None
    found, n_words = find_bad_words(text, lang, words)
    return {"kinds": words.by_kind(found), "words": n_words}


def drops(kinds: collections.Counter, n_words: int, counted) -> bool:
    matches = sum(kinds.get(k, 0) for k in counted)
    return matches >= MIN_MATCHES and 1000.0 * matches / max(n_words, 1) >= MAX_DENSITY


def tally(pages: list[str], lang: str) -> dict | None:
    judged = [j for j in (judge(p, lang) for p in pages) if j is not None]
    if not judged:
        return None
    row = {"pages": len(judged),
           "every kind": sum(drops(j["kinds"], j["words"], KINDS) for j in judged),
           "default": sum(drops(j["kinds"], j["words"], BadWordsConfig.kinds) for j in judged)}
    for kind in KINDS:
        row[kind] = sum(drops(j["kinds"], j["words"], (kind,)) for j in judged)
    return row


def warc_pages() -> dict[str, list[str]]:
    """Extracted text of every page of the workspace's WARC files, by detected language."""
    from stages.extraction.extract import ExtractConfig, Extractor
    from stages.extraction.warc import read_warc
    from stages.langid import LanguageIdentifier
    from stages.record import Document
    from stages.runner import StageRunner

    by_lang: dict[str, list[str]] = collections.defaultdict(list)
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with chain:
        for path in sorted(glob.glob(shared_data.path("warc", "*.warc*"))):
            if ".wet" in path:
                continue
            with open(path, "rb") as fh:
                for page in read_warc(fh, source="bench"):
                    if isinstance(page, Document):
                        doc = chain(page)
                        if isinstance(doc, Document):
                            by_lang[doc.lang].append(doc.text)
    return by_lang


def davidson() -> dict[str, list[str]]:
    with open(shared_data.path("harmful", "toxicity", "davidson_hate_offensive", "labeled_data.csv"),
              encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {name: [r["tweet"] for r in rows if r["class"] == cls]
            for cls, name in (("0", "hateful"), ("1", "offensive, not hateful"), ("2", "neither"))}


def mlma(lang: str) -> dict[str, list[str]]:
    path = shared_data.path("harmful", "toxicity", "mlma_hate_speech_en_fr_ar", "hate_speech_mlma",
                            f"{lang}_dataset.csv")
    out: dict[str, list[str]] = collections.defaultdict(list)
    with open(path, encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            labels = set(r["sentiment"].split("_"))
            out["hateful" if "hateful" in labels else "normal" if labels == {"normal"}
                else "offensive, not hateful"].append(r["tweet"])
    return out


def multilingual() -> list[tuple[str, str, dict[str, list[str]]]]:
    out = []
    for path in sorted(glob.glob(shared_data.path("harmful", "toxicity_multilingual", "*.jsonl.gz"))):
        texts: dict[str, list[str]] = collections.defaultdict(list)
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                texts[row["label"]].append(row["text"])
                lang = row["lang"]
        out.append((os.path.basename(path).split(".")[0], lang, texts))
    return out


def template_kinds() -> list[dict]:
    """Share of template sentences naming a group with a listed word of each kind, non-toxic and toxic."""
    from stages.harmful.bias import JIGSAW_FILES, JigsawTemplates

    rows = []
    folder = shared_data.path("harmful", "identity_templates")
    for lang, name in JIGSAW_FILES.items():
        code = {"hi-Latn": "hi"}.get(lang, lang).split("-")[0]
        sentences = JigsawTemplates(os.path.join(folder, f"{name}_sentence_templates.csv.gz"), lang).rows()
        for toxic in (False, True):
            chosen = [s.text for s in sentences if bool(s.toxic) == toxic]
            kinds = collections.Counter()
            default = 0
            for text in chosen:
                judged = judge(text, code)
                if judged is None:
                    continue
                kinds.update({k for k, n in judged["kinds"].items() if n})
                default += any(judged["kinds"].get(k) for k in BadWordsConfig.kinds)
            rows.append({"set": f"jigsaw {lang}", "toxic": toxic, "sentences": len(chosen), "default": default,
                         **{k: kinds[k] for k in KINDS}})
    return rows


def v2_sentences() -> list[dict]:
    """Everyday sentences (Tatoeba, Leipzig web text) of each language judged by a v2 list: the share with a listed
    word counted when every kind counts (every v2 entry counted, as before v2's lists were sorted) and by default."""
    from stages.harmful.badwords import KIND_FILES, LID_TO_LDNOOBW
    from stages.langid import model_codes
    from stages.reference import lid_code

    codes = model_codes()
    sorted_v2 = {name[:-4] for name in os.listdir(os.path.join(KIND_FILES, "v2"))}
    texts: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for path in sorted(glob.glob(shared_data.path("multilingual", "tatoeba_laser", "data", "tatoeba", "v1",
                                                  "tatoeba.*-eng.*"))):
        lang = lid_code(path.rsplit(".", 1)[1], codes)
        if lang and not path.endswith(".eng"):
            with open(path, encoding="utf-8") as fh:
                texts[("Tatoeba", lang)] += [line.strip() for line in fh if line.strip()]
    for path in sorted(glob.glob(shared_data.path("multilingual", "lingua_testdata", "sentences", "*.txt"))):
        with open(path, encoding="utf-8") as fh:
            texts[("Leipzig", os.path.basename(path)[:-4])] += [line.strip() for line in fh if line.strip()]
    rows = []
    for (corpus, lang), sentences in sorted(texts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if LID_TO_LDNOOBW.get(lang, lang) not in sorted_v2 or DEFAULT.word_list(lang) is None:
            continue
        every, default, words, listed = 0, 0, collections.Counter(), DEFAULT.word_list(lang)
        for sentence in dict.fromkeys(sentences):
            found, _ = find_bad_words(sentence, lang, listed)
            kinds = listed.by_kind(found)
            every += any(kinds.values())
            default += any(kinds.get(k) for k in BadWordsConfig.kinds)
            words.update(found)
        rows.append({"corpus": corpus, "lang": lang, "sentences": len(dict.fromkeys(sentences)), "every kind": every,
                     "default": default, "top": ", ".join(f"{w} {n}" for w, n in words.most_common(4))})
    return rows


def share(n: int, of: int, digits: int = 0) -> str:
    """A percentage that never shows a non-zero count as 0 %."""
    if not n:
        return "0"
    text = f"{100 * n / of:.{digits}f} %"
    return text if float(text[:-2]) else f"< {10 ** -digits:g} %"


def print_tables(table: list[dict], templates: list[dict]) -> None:
    columns = ("every kind", "default") + KINDS
    print("Pages dropped by the rule (>= 3 matches, >= 8 per 1,000 words) counting every kind, the default kinds, "
          "or one kind alone (share of pages):\n")
    print("| group | set | lang | pages | " + " | ".join(columns) + " |")
    print("|---|---|---|---|" + "---|" * len(columns))
    for row in table:
        cells = [share(row[c], row["pages"]) for c in columns]
        print(f"| {row['group']} | {row['set']} | {row['lang']} | {row['pages']} | " + " | ".join(cells) + " |")
    if templates:
        print("\nIdentity templates (Jigsaw): sentences with a listed word of each kind (a sentence alone is never "
              "dropped):\n")
        print("| set | toxic | sentences | a counted kind (default) | " + " | ".join(KINDS) + " |")
        print("|---|---|---|---|" + "---|" * len(KINDS))
        for row in templates:
            cells = [share(row[k], row["sentences"], 1) for k in ("default",) + KINDS]
            print(f"| {row['set']} | {'toxic' if row['toxic'] else 'non-toxic'} | {row['sentences']} | "
                  + " | ".join(cells) + " |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-warc", action="store_true", help="leave out the WARC pages (extraction takes ~2 min)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    shared_data.require("bench/bad_word_kinds.py", {shared_data.path("harmful"): "harmful-content data",
                                                    shared_data.path("multilingual", "lingua_testdata"): "Leipzig sentences (lingua)"})
    table: list[dict] = []

    def add(group: str, name: str, lang: str, texts: list[str], already_pages: bool = False) -> None:
        row = tally(texts if already_pages else pages_of(texts), lang)
        if row is not None:
            table.append({"group": group, "set": name, "lang": lang, **row})

    if not args.no_warc:
        for lang, texts in sorted(warc_pages().items(), key=lambda kv: -len(kv[1])):
            add("ordinary", "WARC pages", lang, texts, already_pages=True)
    for path in sorted(glob.glob(shared_data.path("multilingual", "lingua_testdata", "sentences", "*.txt"))):
        lang = os.path.basename(path)[:-4]
        if DEFAULT.word_list(lang) is not None:
            with open(path, encoding="utf-8") as fh:
                add("ordinary", "Leipzig sentences", lang, [line.strip() for line in fh if line.strip()])
    for name, texts in davidson().items():
        group = {"neither": "ordinary", "hateful": "hateful"}.get(name, "profane, not hateful")
        add(group, f"Davidson: {name}", "en", texts)
    for lang in ("en", "fr", "ar"):
        for name, texts in mlma(lang).items():
            group = {"normal": "ordinary", "hateful": "hateful"}.get(name, "profane, not hateful")
            add(group, f"MLMA: {name}", lang, texts)
    for name, lang, texts in multilingual():
        for label in ("toxic", "clean"):
            add("labelled toxic" if label == "toxic" else "ordinary", f"{name}: {label}", lang, texts[label])
    templates = template_kinds() if os.path.isdir(shared_data.path("harmful", "identity_templates")) else []

    print_tables(table, templates)
    v2 = v2_sentences() if os.path.isdir(shared_data.path("multilingual", "tatoeba_laser")) else []
    if v2:
        print("\nEveryday sentences judged by v2's lists (sorted by kind since 2026-12-05): share with a counted listed "
              "word when every kind counts (as before the sort) and by default; the words most found:\n")
        print("| lang | corpus | sentences | every kind | default | most found |")
        print("|---|---|---|---|---|---|")
        for row in v2:
            print(f"| {row['lang']} | {row['corpus']} | {row['sentences']} | {share(row['every kind'], row['sentences'], 1)}"
                  f" | {share(row['default'], row['sentences'], 1)} | {row['top']} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"pages": table, "templates": templates, "v2_sentences": v2}, fh, indent=1)


if __name__ == "__main__":
    main()
