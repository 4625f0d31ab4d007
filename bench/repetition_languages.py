"""Gopher's n-gram repetition rules in scripts without spaces: ICU's pieces (n x ngram_scale of them) against
words of content (stages/ngrams.py, chars_per_word from the bundled thresholds), with English as the yardstick.

    .venv/bin/python bench/repetition_languages.py [--data ../shared/data/multilingual]

Text: NTREX-128 (123 news documents, the same in every language; the calibration's text) and FLORES-200 (1,000
Wikipedia sentences, 10 to a document; never used to fit anything); "long" is each corpus as one document.
Counted: documents over any n-gram limit (top 2-4-gram, duplicated 5-10-gram), and the long document's highest
share over its limit. Lines and paragraphs rules are off: they do not depend on the unit.
"""
import argparse
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from stages.calibration import ngram_scale  # noqa: E402
from stages.gopher import GopherRepetition, GopherRepetitionConfig  # noqa: E402
from stages.reference import flores_documents, ntrex_documents  # noqa: E402
from stages.text import normalized_words  # noqa: E402
from stages.thresholds import attach, bundled_path  # noqa: E402

# NTREX code -> (lid.176 code, FLORES folder)
LANGUAGES = {"eng": ("en", "eng_Latn"), "jpn": ("ja", "jpn_Jpan"), "zho-CN": ("zh", "zho_Hans"),
             "zho-TW": ("zh", "zho_Hant"), "tha": ("th", "tha_Thai"), "lao": ("lo", "lao_Laoo"),
             "khm": ("km", "khm_Khmr"), "mya": ("my", "mya_Mymr"), "bod": ("bo", "bod_Tibt")}
NGRAM_ONLY = dict(max_dup_line_fraction=None, max_dup_line_chars=None, max_dup_para_fraction=None,
                  max_dup_para_chars=None, rescue_margin=None)


def judged(stage, texts, lang):
    """(documents over a limit, the long document's highest share of its limit over every n-gram rule)."""
    from stages.calibration import measure

    over = sum(stage.evaluate(t, lang) is not None for t in texts)
    c = stage.config_for(lang)
    shares = measure("\n".join(texts), lang, ngram_scale=c.ngram_scale, chars_per_word=c.chars_per_word)
    limits = [(f"max_top_ngram_chars.{n}", v) for n, v in c.max_top_ngram_chars]
    limits += [(f"max_dup_ngram_chars.{n}", v) for n, v in c.max_dup_ngram_chars]
    return over, max(shares[f"gopher_repetition.{key}"] / limit for key, limit in limits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="../shared/data/multilingual")
    args = parser.parse_args()
    news = {c: [] for c in LANGUAGES}
    for code, _, text in ntrex_documents(args.data):
        if code in news:
            news[code].append(text)
    folders = {f: c for c, (_, f) in LANGUAGES.items()}
    wiki = {c: [] for c in LANGUAGES}
    for folder, _, text in flores_documents(args.data, per_doc=10):
        if folder in folders:
            wiki[folders[folder]].append(text)
    content = GopherRepetition(GopherRepetitionConfig(**NGRAM_ONLY))
    attach(content, content.config, "gopher_repetition", bundled_path())
    english_words = [float(len(normalized_words(t, "en"))) for t in news["eng"]]
    print("| language | unit | NTREX docs over a limit | FLORES docs over a limit | long NTREX: worst share / limit "
          "| long FLORES: worst share / limit |")
    print("|---|---|---|---|---|---|")
    for code, (lang, _) in LANGUAGES.items():
        if not news[code] or not wiki[code]:
            continue
        config = content.config_for(lang)
        scale = ngram_scale([float(len(normalized_words(t, lang))) for t in news[code]], english_words)
        pieces = GopherRepetition(dataclasses.replace(config, chars_per_word=None, ngram_scale=scale))
        pieces.config_for = lambda _lang, c=pieces.config: c
        units = [("English words", content)] if lang == "en" else [
            (f"ICU pieces x {scale}", pieces), (f"content, {config.chars_per_word} chars a word", content)]
        for unit, stage in units:
            n_over, n_worst = judged(stage, news[code], lang)
            f_over, f_worst = judged(stage, wiki[code], lang)
            print(f"| {code} | {unit} | {n_over} of {len(news[code])} | {f_over} of {len(wiki[code])} "
                  f"| {n_worst:.2f} | {f_worst:.2f} |")


if __name__ == "__main__":
    main()
