"""Group terms, insults and sentence frames per language (stages/harmful/identity/<lang>.yaml), for a toxicity
score keyed on what makes text harmful, not on which group it names (issue 56).

* `counterfactuals`: a labelled text with each group term it names swapped for another group of its language
  (Dixon et al. 2018's counterfactual augmentation, Garg et al. 2019): the copy keeps the label, so across the
  training data a group's name comes with toxic and clean labels alike and only the words around it decide.
* `training_sentences`: sentences from the `clean`, `toxic`, `personal` and `personal_clean` frames: every group
  named in friendly and neutral sentences (clean) and in insults, dehumanisation and threats (toxic), and insults
  and threats at a person that name no group (toxic) beside praise in the same words ("You are a {x}" / "You are
  a {p}": clean), and the `adj_frames`/`verb_frames` filled once with bad adjectives or harmful verbs (toxic),
  once with good ones or kind verbs (clean), so that the insult, not the name or the frame, is the signal; and the
  `counter` frames (clean, as often as the others since the everyday-word fills below; drawn half as often before,
  when at full weight the insults lost more of their weight in the languages without labelled text,
  bench/RESULTS.md): counter-speech and negated hate, the same
  insults quoted, reported or denied in order to reject them ("Saying that {g} are {bad} is hateful", "I do not
  hate {g}"), so that the words around an insult count, not the insult alone; and the `form_frames`/`form_clean`
  frames, which name one person by a singular or adjective form of a group (`forms`: "christelijk", "Türkin"),
  each with a bad and a good adjective and alone: with the plural only, such a form reached the model as character
  n-grams of the insults it resembles (Dutch "vrouwelijk" scored 0.999 alone).
* `ordinary_word_sentences`: the frames an insult or a bad adjective fills ("You are a {p}", "You are so {a}")
  filled with a language's everyday news words, clean: with only its frames as a language's toxic text, an unknown
  word was judged by the character n-grams it shares with the frames' insults.
* `evaluation_rows`: the `eval_clean`/`eval_toxic` frames, other wording than any frame trained on, with the group
  each names: our own identity templates for the bias measures (stages/harmful/bias.py) in the languages Jigsaw's
  templates lack. Written by us; they measure wording the model has not seen, not real text.
* `counter_rows`: the `eval_counter` frames (counter-speech and negated hate, other wording than the `counter`
  frames; clean) against the `eval_toxic` ones: does the score tell hate from its rejection?
"""
from __future__ import annotations

import functools
import glob
import os
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import yaml

from stages.harmful.bias import Labelled

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "identity")
UNSPACED = frozenset({"zh", "ko", "ja"})  # group terms found inside words (no spaces; Korean particles attach)


@dataclass(frozen=True)
class Lexicon:
    lang: str
    groups: tuple[str, ...]
    swap: tuple[str, ...]
    good: tuple[str, ...]
    bad: tuple[str, ...]
    insult: tuple[str, ...]
    praise: tuple[str, ...]
    bad_adj: tuple[str, ...]
    good_adj: tuple[str, ...]
    harm_verbs: tuple[str, ...]
    kind_verbs: tuple[str, ...]
    names: tuple[str, ...]
    frames: dict
    forms: tuple[str, ...] = ()   # singular and adjective forms of the groups (default: `swap`)

    def pattern(self, terms: tuple[str, ...]) -> re.Pattern:
        alternatives = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
        if self.lang in UNSPACED:
            return re.compile(f"({alternatives})", re.I)
        return re.compile(rf"(?<!\w)({alternatives})(?!\w)", re.I)


@functools.cache
def lexicons() -> dict[str, Lexicon]:
    out = {}
    for path in sorted(glob.glob(os.path.join(FOLDER, "*.yaml"))):
        lang = os.path.basename(path)[:-len(".yaml")]
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
        frames = {k: tuple(data[k]) for k in ("clean", "toxic", "personal", "personal_clean", "adj_frames",
                                                 "verb_frames", "eval_clean", "eval_toxic", "counter", "eval_counter")}
        frames.update({k: tuple(data.get(k, ())) for k in ("form_frames", "form_clean")})
        words = {k: tuple(str(x) for x in data.get(k, ()))
                 for k in ("groups", "swap", "good", "bad", "insult", "praise", "bad_adj", "good_adj", "harm_verbs",
                           "kind_verbs", "names", "forms")}
        forms = words.pop("forms") or words["swap"]
        out[lang] = Lexicon(lang, **words, frames=frames, forms=forms)
    return out


def _fill(frame: str, lex: Lexicon, rng: random.Random, group: str = "", adjectives=(), verbs=(), form: str = "") -> str:
    text = frame.replace("{g}", group).replace("{s}", form)
    for slot, words in (("{a}", adjectives), ("{v}", verbs), ("{good}", lex.good), ("{bad}", lex.bad), ("{x}", lex.insult), ("{p}", lex.praise), ("{name}", lex.names)):
        while slot in text:
            text = text.replace(slot, rng.choice(words), 1)
    return text[0].upper() + text[1:] if text else text


def training_sentences(lang: str, seed: int = 0, draws: int = 2) -> Iterator[tuple[str, bool]]:
    """(sentence, toxic) from the trained frames: each frame with each group `draws` times (slots drawn)."""
    lex = lexicons()[lang]
    rng = random.Random(f"{seed}:{lang}")
    for kind, toxic, times in (("clean", False, draws), ("toxic", True, draws), ("counter", False, draws)):
        for frame in lex.frames[kind]:
            for group in lex.groups:
                for _ in range(times):
                    yield _fill(frame, lex, rng, group), toxic
    for kind, toxic in (("personal", True), ("personal_clean", False)):
        for frame in lex.frames[kind]:
            for _ in range(len(lex.groups) * draws // 4):
                yield _fill(frame, lex, rng), toxic
    # the same frame with a bad and with a good word: only the word decides
    for words, toxic in ((lex.bad_adj, True), (lex.good_adj, False)):
        for frame in lex.frames["adj_frames"]:
            for _ in range(len(lex.groups) * draws // 2):
                yield _fill(frame, lex, rng, adjectives=words), toxic
    for words, toxic in ((lex.harm_verbs, True), (lex.kind_verbs, False)):
        for frame in lex.frames["verb_frames"]:
            for group in lex.groups:
                for _ in range(draws):
                    yield _fill(frame, lex, rng, group, verbs=words), toxic
    yield from _form_sentences(lex, rng)


def ordinary_word_sentences(lang: str, words: Sequence[str], seed: int, per_frame: int
                            ) -> Iterator[tuple[str, bool]]:
    """(sentence, False): the frames that an insult or a bad adjective makes toxic ("You are a {p}", "You are so
    {a}"), filled with `words`: ordinary words of the language (its news, `toxicity_train.ordinary_words`), each
    frame `per_frame` times. Clean: with only the frames' few insults as a language's toxic text, character n-grams
    of a word the model never saw decided ("uitstekend", "excellent", shares "steke" with "neersteken", "stab": "U
    bent een uitstekend persoon" scored 0.79); the language's own everyday words in the same frames teach that the
    frame and an unknown word are not the signal. The lexicon's own hostile words (one-word entries of `bad`,
    `insult`, `bad_adj`, `harm_verbs`: news reports "rape", "attack") are left out."""
    lex = lexicons()[lang]
    hostile = hostile_words(lang)
    words = [w for w in words if w.lower() not in hostile]
    if not words:
        return
    rng = random.Random(f"ordinary:{seed}:{lang}")
    for frame in lex.frames["personal_clean"] + lex.frames["adj_frames"]:
        for _ in range(per_frame):
            word = rng.choice(words)
            yield _fill(frame.replace("{p}", word).replace("{a}", word), lex, rng), False


@functools.cache
def hostile_words(lang: str) -> frozenset[str]:
    """The one-word entries of the lexicon's `bad`, `insult`, `bad_adj` and `harm_verbs` lists, lower case (none for
    a language without a lexicon): words our lexicon declares hostile in that language."""
    lex = lexicons().get(lang)
    if lex is None:
        return frozenset()
    return frozenset(w.lower() for kind in (lex.bad, lex.insult, lex.bad_adj, lex.harm_verbs) for w in kind
                     if " " not in w)


def _form_sentences(lex: Lexicon, rng: random.Random) -> Iterator[tuple[str, bool]]:
    """One person named by a singular or adjective form ("Mijn collega is christelijk en {a}"): each form with a bad
    and with a good adjective, and alone (clean), so that no form of a group's name carries a label."""
    for form in lex.forms:
        for frame in lex.frames["form_frames"]:
            for words, toxic in ((lex.bad_adj, True), (lex.good_adj, False)):
                yield _fill(frame, lex, rng, adjectives=words, form=form), toxic
        for frame in lex.frames["form_clean"]:
            yield _fill(frame, lex, rng, form=form), False


def evaluation_rows(lang: str, seed: int = 1, draws: int = 2,
                    kinds=(("eval_clean", False), ("eval_toxic", True))) -> list[Labelled]:
    """Our own identity templates of `lang`: the eval frames, each group `draws` times."""
    lex = lexicons()[lang]
    rng = random.Random(f"eval:{seed}:{lang}")
    rows = {}
    for kind, toxic in kinds:
        for frame in lex.frames[kind]:
            for group in lex.groups:
                for _ in range(draws):  # a frame without other slots gives one sentence
                    text = _fill(frame, lex, rng, group)
                    rows.setdefault(text, Labelled(text, toxic, group, lang, frame))
    return list(rows.values())


def counter_rows(lang: str, seed: int = 1, draws: int = 2) -> list[Labelled]:
    """Counter-speech and negated hate (clean) against hate (toxic), in our own wording: the `eval_counter` and
    `eval_toxic` frames, each group `draws` times."""
    return evaluation_rows(lang, seed, draws, (("eval_counter", False), ("eval_toxic", True)))


def counterfactuals(text: str, lang: str, rng: random.Random, copies: int = 1) -> list[str]:
    """`text` with the group terms it names swapped for others of its language, `copies` times; [] if it names
    none (or the language has no lexicon)."""
    lex = lexicons().get(lang)
    if lex is None:
        return []
    out = []
    for terms in (lex.groups, lex.swap):
        if not terms or not (pattern := _pattern(lex.lang, terms)).search(text):
            continue
        for _ in range(copies):
            out.append(pattern.sub(lambda m, terms=terms: _other(m.group(0), terms, rng), text))
        break
    return out


@functools.cache
def _pattern(lang: str, terms: tuple[str, ...]) -> re.Pattern:
    return lexicons()[lang].pattern(terms)


def _other(term: str, terms: tuple[str, ...], rng: random.Random) -> str:
    choice = rng.choice(terms)
    while choice.lower() == term.lower() and len(terms) > 1:
        choice = rng.choice(terms)
    return choice.lower() if term[:1].islower() else choice
