"""Bad-word density: the LDNOOBW lists of the page's language, per 1,000 words.

C4 (Raffel et al. 2020) dropped every page containing any word of the English LDNOOBW list; that
removed disproportionately many pages on medicine, sexuality and LGBTQ topics and in African-American
and Hispanic dialects (Dodge et al. 2021, "Documenting Large Webtext Corpora"). So the default here is a
density: matched words per 1,000 words at or over `max_density` (and at least `min_matches` of them),
with C4's rule as `mode: any`. Left out unless `full_list`: the words LDNOOBW v2 itself calls
questionable (gay, lesbian, breast, menstruation, drug names, ...) and the entries that are ordinary words
of their language, found in professionally translated news and Wikipedia text (NTREX-128, FLORES-200;
`scripts/build_badword_exclusions.py` lists them in lists/ldnoobw/ordinary/).

Matching: words (lower case, punctuation stripped; ICU segments for zh/ja/th/...) against single-word
entries, and word sequences against multi-word entries; entries in scripts written without spaces (CJK,
Thai, Lao, Khmer, Myanmar, Tibetan) are found as substrings that start and end at a boundary ICU's word
break iterator finds (they may span several of its words: slang is often split into characters); Korean
entries as plain substrings, since a Korean word carries its particles. Which list: the page's language (lid.176 code; `tl` is LDNOOBW's `fil`, `kn` its `kh`, a Kannada list), from
v1 where it has one (curated, 28 languages), else v2 (75 languages, noisier: `versions`).

Kinds: every entry of v1 and of the v2 lists a page can be judged by has one (lists/ldnoobw/kinds/: sexual,
clinical, slur, profanity, identity, other, with the gloss it was decided from); the density counts only the
`kinds` named (default: sexual terms, the clinical words erotica written in a literary register uses, slurs, and
the entries nobody could sort). Swearing marks forums and novels, and group names mark community pages: counting them is how C4's rule
erased those pages. The ledger's reason names what most counted matches are: `bad_words_sexual` (sexual and
clinical words), `bad_words_slur`, `bad_words_unsorted`, or a kind a user chose to count.
"""
from __future__ import annotations

import collections
import csv
import glob
import itertools
import os
import re
import unicodedata
from dataclasses import dataclass
from functools import cache

from common.settings import check, check_not_negative, per_language
from stages.record import RuleStage
from stages.table import StageSpec
from stages.text import NO_SPACE_LANGS, normalized_words, word_boundaries

STAGE = "bad_words"
LISTS = os.path.join(os.path.dirname(__file__), "lists", "ldnoobw")
QUESTIONABLE = os.path.join(LISTS, "v2", "questionable_international_words.csv")
ORDINARY = os.path.join(LISTS, "ordinary")  # entries found in news/Wikipedia text (scripts/build_badword_exclusions.py)
KIND_FILES = os.path.join(LISTS, "kinds")  # <version>/<lang>.txt: entry | kind | gloss (kinds/README.md)
# <version>/<code>.txt and <code>.<lid>.txt: spelling | entry: an entry in the script the language's pages are written
# in, where the list has it in another (LDNOOBW v1's Hindi list is romanized; lid.176 labels Devanagari Hindi `hi`,
# and Urdu, which shares Hindi's abuse, `ur`: hi.ur.txt)
SPELLINGS = os.path.join(LISTS, "spellings")
KINDS = ("sexual", "clinical", "slur", "profanity", "identity", "other", "unsorted")
UNSORTED = "unsorted"
LID_TO_LDNOOBW = {"tl": "fil", "kn": "kh",  # LDNOOBW v2 names its Kannada list `kh`
                  "hi-Latn": "hi",  # romanized Hindi (GlotLID's hin_Latn): LDNOOBW's Hindi list is romanized
                  # lid.176 labels Bosnian text hr (70 % of Leipzig's Bosnian sentences), sh (22 %) or bs: LDNOOBW
                  # has neither sh nor bs, and its Croatian list holds the swearing the three share
                  "sh": "hr", "bs": "hr",
                  # pages langid relabels as written Cantonese or Egyptian Arabic (stages/dialects.py), or lid.176
                  # calls Wu or Nynorsk: the Chinese list holds the Cantonese words (閪, 屌), the Arabic one dialect
                  "yue": "zh", "wuu": "zh", "arz": "ar", "nn": "no",
                  # the Indonesian list holds Javanese and Sundanese swearing and sex words (tempik, heunceut, ewe);
                  # on FLORES's 1,004 Javanese and 1,004 Sundanese sentences it counts no word
                  "jv": "id", "su": "id",
                  # Urdu shares Hindi's swearing and slurs; its pages are judged by the Hindi list's Urdu spellings
                  "ur": "hi"}
# Scripts written without spaces between words: their entries are matched as substrings.
_NO_SPACE_SCRIPT = re.compile("[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
                              "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
REASON = "bad_words"  # + "_<what>": what most counted matches are
# What a kind's matches say a page is: clinical words count towards sexual content. Ties go to the first.
_REASON_OF_KIND = {"slur": "slur", "sexual": "sexual", "clinical": "sexual", "unsorted": "unsorted",
                   "profanity": "profanity", "identity": "identity", "other": "other"}
_PRECEDENCE = ("slur", "sexual", "unsorted", "profanity", "identity", "other")


@dataclass(frozen=True)
class BadWordsConfig:
    """Bad-word density (LDNOOBW lists, per detected language)."""

    enabled: bool = True
    # LDNOOBW versions, in order of preference: the first with a list for the page's language is used.
    # v1 (28 languages, curated; C4 used its English list); v2 (75 languages, many lists joined: its
    # English file has 13,000 entries, among them "c", "parse", "config", "fat", "spa")
    versions: tuple[str, ...] = ("v1", "v2")
    mode: str = "density"       # density (per 1,000 words) or any (C4: drop on one listed word)
    # Drop at this many matched words per 1,000 or more. Ordinary text never has 3 matches (0 of 1,191 pages
    # of shared/data/warc, 0 of 2,708 20-sentence pages of Leipzig web text in 55 languages), so the limit is
    # set by what it must catch: pages of offensive tweets have 35-108, a page-long erotic story only ~12 (its
    # words are diluted by narration; the Chinese story in the demo's Common Crawl excerpt: 12.4), hence 8 ...
    max_density: float = 8.0
    min_matches: int = 3        # ... and at least this many matches (one word on a short page is no signal)
    max_density_by_language: tuple[str, ...] = ()  # LANG=DENSITY overrides of max_density, e.g. [de=15, ja=30]
    # The kinds of listed words that count (lists/ldnoobw/kinds/README.md): sexual, clinical, slur, profanity,
    # identity, other, unsorted (entries without a kind). Swearing and group names are left out: on
    # pages of profane but not hateful tweets they are most of the matches (bench/bad_word_kinds.py). Clinical
    # words stay in: an erotic story in the demo's crawl says 做爱 and 阴部, not slang (11 of its 17 matches)
    kinds: tuple[str, ...] = ("sexual", "clinical", "slur", "unsorted")
    # A page whose language ID scores under this (short or mixed text: Hindi in Latin script is labelled en,
    # nl or es) is also checked against the curated (v1) lists of every language written in the page's
    # script, and the list matching most words judges it; none = the top label's list only
    unsure_below: float | None = 0.5
    # Also match entries that are ordinary words of the language (found in NTREX news or FLORES Wikipedia
    # text: v2's English file has "a", "i", "as", "fish") and v2's questionable words (gay, breast, drugs)
    full_list: bool = False
    sources: tuple[str, ...] = ()    # run on documents of these sources only; empty = every source

    def __post_init__(self):
        check(self.unsure_below is None or 0.0 <= self.unsure_below <= 1.0, "unsure_below must be in [0, 1] or none")
        check(bool(self.versions) and set(self.versions) <= {"v1", "v2"},
              f"versions must be v1 and/or v2, got {self.versions}")
        check(self.mode in ("density", "any"), f"mode must be density or any, got {self.mode!r}")
        check(bool(self.kinds) and set(self.kinds) <= set(KINDS), f"kinds must be among {', '.join(KINDS)}, got {self.kinds}")
        check_not_negative(self)
        self.density_limits()

    def density_limits(self) -> dict[str, float]:
        """max_density_by_language as {lang: density}; a malformed entry is a ConfigError."""
        return per_language(tuple(self.max_density_by_language), "max_density_by_language", "DENSITY")


@dataclass(frozen=True)
class WordList:
    words: frozenset[str]                                # single-word entries
    phrases: dict[str, tuple[tuple[str, ...], ...]]      # first word -> multi-word entries
    substrings: re.Pattern | None                        # entries in no-space scripts
    kinds: dict[str, str]                                # matched entry (as find_bad_words names it) -> kind

    def kind(self, entry: str) -> str:
        return self.kinds.get(entry, UNSORTED)

    def by_kind(self, found: collections.Counter) -> collections.Counter:
        """Matches per kind."""
        counts: collections.Counter = collections.Counter()
        for entry, n in found.items():
            counts[self.kind(entry)] += n
        return counts


def list_languages(version: str) -> list[str]:
    return sorted(name.rsplit(".", 1)[0] for name in os.listdir(os.path.join(LISTS, version))
                  if name.endswith(".txt"))


def split_entries(entries) -> tuple[set[str], set[tuple[str, ...]], set[str]]:
    """Lower-cased list entries as (single words, word sequences, no-space-script substrings), each
    word normalized as page text is (`normalized_words`: punctuation around it stripped)."""
    words, phrases, substrings = set(), set(), set()
    for entry in entries:
        if _NO_SPACE_SCRIPT.search(entry):
            substrings.add(entry)
            continue
        tokens = tuple(normalized_words(entry))
        if len(tokens) == 1:
            words.add(tokens[0])
        elif tokens:
            phrases.add(tokens)
    return words, phrases, substrings


def match_name(entry: str) -> str:
    """How find_bad_words names a match of this (lower-cased) list entry."""
    return entry if _NO_SPACE_SCRIPT.search(entry) else " ".join(normalized_words(entry))


@cache
def entry_kinds(version: str, code: str) -> dict[str, str]:
    """{match name: kind} of one list (LDNOOBW code), empty where no kind file exists. A kind file that
    names an unknown kind or an entry the list lacks is a packaging error, caught by the tests."""
    path = os.path.join(KIND_FILES, version, f"{code}.txt")
    kinds = {}
    for line in read_entries(path):
        entry, kind, _gloss = (part.strip() for part in line.split("|", 2))
        kinds[match_name(entry)] = kind
    return kinds


# Devanagari letters with a nukta: web text writes them as the letter and U+093C or as one precomposed code point
# (U+0958-U+095F, which Unicode normalization never composes), so a spelling is listed both ways
_NUKTA_LETTERS = {"\u0915\u093c": "\u0958", "\u0916\u093c": "\u0959", "\u0917\u093c": "\u095a",
                  "\u091c\u093c": "\u095b", "\u0921\u093c": "\u095c", "\u0922\u093c": "\u095d",
                  "\u092b\u093c": "\u095e", "\u092f\u093c": "\u095f"}


# Urdu's yeh, keheh and heh goal: web text often types Arabic's yeh, kaf and heh for some or all of them
_ARABIC_LOOKALIKE = {"\u06cc": "\u064a", "\u06a9": "\u0643", "\u06c1": "\u0647"}


def letter_forms(text: str) -> set[str]:
    """`text` as written and as web text also types it: Devanagari nukta letters decomposed and precomposed
    (`nukta_forms`), and each of its Urdu letters also as its Arabic look-alike, in every combination (a spelling
    has a few: at most 2 ** 8 forms are made, the rest keep the Urdu letter)."""
    varied = [i for i, c in enumerate(text) if c in _ARABIC_LOOKALIKE][:8]
    choices = [(c, _ARABIC_LOOKALIKE[c]) if i in varied else (c,) for i, c in enumerate(text)]
    return {form for spelled in map("".join, itertools.product(*choices)) for form in nukta_forms(spelled)}


def nukta_forms(text: str) -> set[str]:
    """`text` as written, and with its nukta letters decomposed and precomposed (one form if it has none)."""
    decomposed = unicodedata.normalize("NFC", text)
    precomposed = decomposed
    for pair, letter in _NUKTA_LETTERS.items():
        precomposed = precomposed.replace(pair, letter)
    return {text, decomposed, precomposed}


@cache
def spellings(version: str, code: str) -> dict[str, str]:
    """{spelling: the list entry it spells} of one list (LDNOOBW code), of all its spelling files, empty where it has
    none; each spelling in its `letter_forms`."""
    out = {}
    for path in spelling_files(version, code):
        out.update(read_spellings(path))
    return out


def spelling_files(version: str, code: str) -> list[str]:
    """The spelling files of one list: <code>.txt and <code>.<lid code>.txt (one a script or language)."""
    return sorted(glob.glob(os.path.join(SPELLINGS, version, f"{glob.escape(code)}.txt"))
                  + glob.glob(os.path.join(SPELLINGS, version, f"{glob.escape(code)}.*.txt")))


@cache
def read_spellings(path: str) -> dict[str, str]:
    out = {}
    for line in read_entries(path):
        spelling, _, entry = (part.strip() for part in line.partition("|"))
        out.update(dict.fromkeys(letter_forms(spelling), entry))
    return out


def read_entries(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [e for e in (line.strip().lower() for line in fh) if e and not e.startswith("#")]


@cache
def questionable_words() -> frozenset[str]:
    with open(QUESTIONABLE, encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return frozenset(cell.strip().lower() for row in rows[1:] for cell in row[1:-1] if cell.strip())


def word_list(version: str, lang: str, full_list: bool = False) -> WordList | None:
    """The compiled list of one language (lid.176 code), or None if LDNOOBW has none for it; languages judged by
    one list (Hindi, romanized Hindi and Urdu) share one compiled copy."""
    return compiled_list(version, LID_TO_LDNOOBW.get(lang, lang), full_list)


@cache
def compiled_list(version: str, code: str, full_list: bool = False) -> WordList | None:
    """The compiled list of one LDNOOBW list (its code), None if there is none."""
    path = os.path.join(LISTS, version, f"{code}.txt")
    if not os.path.exists(path):
        return None
    spelled = spellings(version, code)
    words, phrases, substrings = split_entries(read_entries(path) + list(spelled))
    if not full_list:
        ordinary = {form for e in read_entries(os.path.join(ORDINARY, version, f"{code}.txt")) for form in letter_forms(e)}
        skip_words, skip_phrases, skip_substrings = split_entries(questionable_words() | set(ordinary))
        words, phrases, substrings = words - skip_words, phrases - skip_phrases, substrings - skip_substrings
    first: dict[str, set] = collections.defaultdict(set)
    for phrase in phrases:
        first[phrase[0]].add(phrase)
    pattern = re.compile("|".join(map(re.escape, sorted(substrings, key=len, reverse=True)))) if substrings else None
    kinds = entry_kinds(version, code)
    kinds = {**kinds, **{match_name(s): kinds.get(match_name(e), UNSORTED) for s, e in spelled.items()}}
    return WordList(frozenset(words), {k: tuple(v) for k, v in first.items()}, pattern, kinds)


def find_bad_words(text: str, lang: str | None, words: WordList) -> tuple[collections.Counter, int]:
    """(matched entries and how often, number of words of the text). Matches do not overlap: at each word the
    longest entry starting there counts, and the words it covers are not matched again (`fils de pute` is one
    match, not also `pute`)."""
    tokens = tuple(normalized_words(text, lang))
    found: collections.Counter = collections.Counter()
    i = 0
    while i < len(tokens):
        token = tokens[i]
        phrase = max((p for p in words.phrases.get(token, ()) if tokens[i:i + len(p)] == p), key=len, default=None)
        if phrase is not None:
            found[" ".join(phrase)] += 1
            i += len(phrase)
            continue
        if token in words.words:
            found[token] += 1
        i += 1
    if words.substrings is not None:  # one alternation, longest entries first: matches never overlap
        lowered = text.lower()
        matches = list(words.substrings.finditer(lowered))
        if matches and lang in NO_SPACE_LANGS:  # a match must start and end where a word may: 做爱 is not in
            bounds = word_boundaries(lowered, lang)  # 做爱尔兰人 ("being Irish")
            found.update(m.group(0) for m in matches if m.start() in bounds and m.end() in bounds)
        else:  # Korean writes spaces, but a word carries its particles: 씨발놈아 holds 씨발놈
            found.update(m.group(0) for m in matches)
    return found, len(tokens)


@cache
def script_languages(version: str, script: str) -> tuple[str, ...]:
    """The languages of `version` whose list is written in `script` (a script family: Latin, Cyrillic, ...),
    judged by the letters of their entries or of their spellings in another script (LDNOOBW's Hindi list is
    romanized, its spellings Devanagari: both)."""
    from stages.thresholds import dominant_script_family

    def written_in(texts) -> bool:
        return bool(texts) and dominant_script_family(" ".join(texts), sample=5000) == script

    return tuple(lang for lang in list_languages(version)
                 if written_in(read_entries(os.path.join(LISTS, version, f"{lang}.txt")))
                 or any(written_in(list(read_spellings(path))) for path in spelling_files(version, lang)))


class BadWordsFilter(RuleStage):
    """Drops pages dense in listed bad words of their language (or with any, in C4's mode)."""

    name = STAGE

    def __init__(self, config: BadWordsConfig = BadWordsConfig()):
        super().__init__(config)
        self._limits = config.density_limits()

    def counted(self, found: collections.Counter, words: WordList, lang: str | None = None) -> collections.Counter:
        """The matches of the kinds this stage counts (the page language's `kinds`)."""
        kinds = self.config_for(lang).kinds
        return collections.Counter({entry: n for entry, n in found.items() if words.kind(entry) in kinds})

    def check(self) -> None:
        questionable_words()
        self.word_list("en")

    def word_list(self, lang: str | None) -> WordList | None:
        """The list of the first preferred version that has one for `lang`."""
        for version in self.config.versions:
            words = word_list(version, lang or "", self.config.full_list)
            if words is not None:
                return words
        return None

    def __call__(self, doc):
        return self.result(doc, self.evaluate(doc.text, doc.lang, doc.lang_score))

    def evaluate(self, text: str, lang: str | None, lang_score: float | None = None) -> tuple | None:
        c = self.config_for(lang)
        candidates = [lang or ""]
        if c.unsure_below is not None and lang_score is not None and lang_score < c.unsure_below:
            from stages.thresholds import dominant_script_family

            script = dominant_script_family(text)
            candidates += [other for other in script_languages("v1", script) if other not in candidates]
            self.count("unsure_language_checked")
        best = None
        for candidate in candidates:
            words = self.word_list(candidate)
            if words is None:
                continue
            found, n_words = find_bad_words(text, candidate, words)
            if best is None or sum(found.values()) > sum(best[1].values()):
                best = (candidate, found, n_words, words)
        if best is None:
            self.count(f"no_list.{lang}")
            return None
        judged, found, n_words, words = best
        counted = self.counted(found, words, lang)
        matches = sum(counted.values())
        if not matches:
            return None
        density = 1000.0 * matches / max(n_words, 1)
        limit = self._limits.get(lang or "", c.max_density)
        if c.mode == "any" or (matches >= c.min_matches and density >= limit):
            kinds = words.by_kind(found)
            what: collections.Counter = collections.Counter()
            for kind in c.kinds:
                what[_REASON_OF_KIND[kind]] += kinds.get(kind, 0)
            reason = min(what, key=lambda r: (-what[r], _PRECEDENCE.index(r)))
            tally = ", ".join(f"{k} {kinds[k]}" for k in KINDS if k in c.kinds and kinds.get(k))
            uncounted = ", ".join(f"{k} {kinds[k]}" for k in KINDS if k not in c.kinds and kinds.get(k))
            top = ", ".join(f"{w}×{n}" for w, n in counted.most_common(8))
            which = "" if judged == (lang or "") else f" ({judged} list: language ID unsure)"
            return (f"{REASON}_{reason}",
                    f"{density:.1f} per 1000 words ({matches} in {n_words}; {tally}"
                    f"{'; not counted: ' + uncounted if uncounted else ''}){which}: {top}"[:500], density,
                    None if c.mode == "any" else limit)
        return None


SPEC = StageSpec(
    name=STAGE, order=68, config=BadWordsConfig, build=BadWordsFilter,
    about="LDNOOBW words of the page's language, per 1,000 words",
    reasons={f"{REASON}_{what}": f"at least `min_matches` listed words of the counted `kinds` and `max_density` per "
                                 f"1,000 words (mode any: one word), most of them {about}; detail: the density, the "
                                 f"matches per kind and the words"
             for what, about in (("sexual", "sexual or clinical words"), ("slur", "slurs"),
                                 ("unsorted", "of no kind (entries nobody could sort)"), ("profanity", "profanity (when counted)"),
                                 ("identity", "group names (when counted)"), ("other", "other listed words (when counted)"))})
