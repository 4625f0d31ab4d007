"""Words, lines and stop words, shared by the quality and repetition rules.

Word segmentation: whitespace for languages that write spaces; ICU's dictionary-based
word break iterator (PyICU) for those that do not (zh, ja, th, ...), because a
whitespace split turns a whole Chinese paragraph into one "word" and every
word-count rule then drops it.
"""
from __future__ import annotations

import collections
import functools
import string
import threading
import unicodedata
from collections.abc import Callable

# Languages written without spaces between words: segment them with ICU.
NO_SPACE_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "yue", "wuu"})

# Terminal punctuation across scripts (FineWeb's rule and the quality signals look for it at line ends): also
# the double danda, Armenian, Ethiopic, Tibetan, Myanmar and Khmer full stops and the Ethiopic question mark.
TERMINAL_PUNCTUATION = (".", "!", "?", '"', "'", "”", "»", "。", "！", "？", "…", "؟", "।", "۔", "｡",
                        "॥", "։", "።", "፧", "།", "။", "។")
# Characters that separate words like a space in some scripts: the Ethiopic wordspace (፡), with which Amharic
# and Tigrinya text is traditionally written; a whitespace split made each line one "word".
WORD_SEPARATORS = "\u1361"

# Stripped from a word's ends: the clause and sentence marks of the scripts (a word before Urdu's ۔ or Hindi's । is
# still that word: without them `بہنچود۔` and `चूत।` matched no listed word), never a mark written inside words
_PUNCT = frozenset(string.punctuation) | frozenset("«»„“”‘’‚‹›–—…·•、。，！？；：（）【】《》「」『』〈〉፡።፣፤፥፦፧፨"
                                                   "¡¿،؛؟۔٪।॥։՝՞།။၊។៕׃")
_STRIP = "".join(sorted(_PUNCT))

# Stop words: Gopher's rule needs >= 2 of {the, be, to, of, and, that, have, with} in English.
# For other languages we use eight of their most frequent function words, so that the same
# rule means the same thing ("reads like running prose") instead of "is English".
STOP_WORDS = {
    "en": ("the", "be", "to", "of", "and", "that", "have", "with"),
    "de": ("der", "die", "das", "und", "ist", "nicht", "mit", "zu"),
    "fr": ("le", "la", "de", "et", "les", "des", "est", "que"),
    "es": ("de", "la", "que", "el", "en", "y", "los", "se"),
    "it": ("di", "che", "il", "la", "e", "per", "un", "non"),
    "pt": ("de", "que", "o", "a", "e", "do", "da", "em"),
    "nl": ("de", "het", "een", "en", "van", "is", "dat", "niet"),
    "sv": ("och", "att", "det", "som", "en", "på", "är", "av"),
    "da": ("og", "at", "det", "en", "den", "til", "er", "som"),
    "no": ("og", "i", "det", "på", "som", "er", "en", "til"),
    "pl": ("i", "w", "nie", "na", "się", "z", "że", "to"),
    "cs": ("a", "se", "na", "je", "v", "že", "to", "s"),
    "ru": ("и", "в", "не", "на", "что", "с", "по", "это"),
    "uk": ("і", "в", "не", "на", "що", "з", "та", "до"),
    "tr": ("bir", "ve", "bu", "da", "de", "için", "ile", "çok"),
    "fi": ("ja", "on", "ei", "se", "että", "oli", "hän", "mutta"),
    "hu": ("a", "az", "és", "hogy", "nem", "is", "egy", "van"),
    "ro": ("și", "de", "în", "a", "la", "cu", "că", "nu"),
    "ca": ("de", "la", "i", "que", "el", "a", "les", "en"),
    "id": ("yang", "dan", "di", "itu", "dengan", "untuk", "ini", "dari"),
    "vi": ("của", "và", "là", "có", "các", "không", "được", "cho"),
    "el": ("και", "το", "να", "η", "της", "του", "στο", "με"),
    "ar": ("في", "من", "على", "أن", "إلى", "التي", "عن", "ما"),
    "zh": ("的", "是", "了", "在", "和", "有", "我", "这"),
    "ja": ("の", "に", "は", "を", "た", "が", "で", "て"),
    "th": ("ที่", "และ", "การ", "ใน", "มี", "ของ", "ได้", "เป็น"),
}


def stop_words(lang: str | None) -> frozenset[str] | None:
    words = STOP_WORDS.get(lang or "")
    return frozenset(words) if words else None


def _all_punctuation(token: str) -> bool:
    return all(ch in _PUNCT or unicodedata.category(ch).startswith("P") for ch in token)


_short_token_is_punctuation = functools.lru_cache(maxsize=1 << 16)(_all_punctuation)


def is_punctuation(token: str) -> bool:
    # Words repeat: memoize short ones (a bounded cache; long tokens are rare and not kept)
    return _short_token_is_punctuation(token) if len(token) <= 32 else _all_punctuation(token)


def is_word(token: str) -> bool:
    """Not punctuation only. Hot (every token of every page): a token starting with a letter or digit is a word
    without the lookup (no letter or digit is punctuation); the empty token is not a word."""
    return token[:1].isalnum() or not is_punctuation(token)


def split_words(text: str, lang: str | None = None) -> list[str]:
    """Words as a reader would count them: whitespace tokens, or ICU segments for no-space scripts."""
    return list(_split_words(text, lang))


def normalized_words(text: str, lang: str | None = None) -> list[str]:
    """Lower-cased words without surrounding punctuation; punctuation-only tokens removed."""
    return list(_normalized_words(text, lang))


class _RecentTexts:
    """A function of (text, lang) that keeps its results for the texts seen last, while they hold at most
    `max_chars` characters. The job takes a chunk of documents through one stage after another (stages/runner.py):
    the Gopher, bad-word and MinHash steps then normalize the words of each text of the chunk in turn (strip,
    lower-case and test every word in Python), so the cache must hold a chunk's texts, and is bounded by characters,
    not entries, so that its memory is bounded too. Results are tuples, so no caller can change one. Thread-safe
    (Beam may run a DoFn on several threads)."""

    def __init__(self, function: Callable[[str, str | None], tuple[str, ...]], max_chars: int):
        self._function, self._max_chars = function, max_chars
        self._results: collections.OrderedDict[tuple[str, str | None], tuple[str, ...]] = collections.OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        functools.update_wrapper(self, function)

    def __call__(self, text: str, lang: str | None) -> tuple[str, ...]:
        key = (text, lang)
        with self._lock:
            found = self._results.get(key)
            if found is not None:
                self._results.move_to_end(key)
                return found
        result = self._function(text, lang)
        if len(text) <= self._max_chars:
            with self._lock:
                if key not in self._results:
                    self._results[key] = result
                    self._chars += len(text)
                while self._chars > self._max_chars:
                    (old, _), _ = self._results.popitem(last=False)
                    self._chars -= len(old)
        return result


# Characters of text kept tokenized: a chunk of 256 pages of up to ~8,000 characters (the bench WARC's pages average
# 5,200). Normalized words and their tuples take ~9 bytes a character: ~20 MB at most (a chunk of longer texts
# misses, as every chunk did with 4 entries).
TOKENIZED_CHARS = 2 << 20


# A whitespace split is one C call: only the last few are kept, for the stages that follow each other on one text.
@functools.lru_cache(maxsize=4)
def _split_words(text: str, lang: str | None) -> tuple[str, ...]:
    if lang in NO_SPACE_LANGS:
        return tuple(_icu_words(text, lang))
    if WORD_SEPARATORS in text:
        text = text.replace(WORD_SEPARATORS, " ")
    return tuple(text.split())


def _normalized_words_uncached(text: str, lang: str | None) -> tuple[str, ...]:
    return tuple(filter(is_word, [w.strip(_STRIP).lower() for w in _split_words(text, lang)]))


_normalized_words = _RecentTexts(_normalized_words_uncached, TOKENIZED_CHARS)


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs are separated by blank lines (trafilatura writes one paragraph a line, so also lines)."""
    paragraphs, current = [], []
    for line in text.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append("\n".join(current))
            current = []
    if current:
        paragraphs.append("\n".join(current))
    return paragraphs


def _icu_words(text: str, lang: str) -> list[str]:
    import icu  # PyICU (pyicu-wheels): bundles ICU's dictionaries for CJK and South-East Asian scripts

    # A new iterator per call: it holds per-text state, and Beam may run DoFns on several threads.
    breaker = icu.BreakIterator.createWordInstance(icu.Locale(lang))
    # ICU offsets count UTF-16 code units, not Python characters: slice ICU's own string
    utext = icu.UnicodeString(text)
    breaker.setText(utext)
    words, start = [], breaker.first()
    for end in breaker:
        if breaker.getRuleStatus() != 0:  # 0 = UBRK_WORD_NONE: spaces and punctuation
            words.append(str(utext[start:end]))
        start = end
    return words


def word_boundaries(text: str, lang: str | None) -> frozenset[int]:
    """The offsets (Python characters) where ICU's word break iterator puts a boundary, 0 and len(text) included:
    where a word of a script without spaces may start or end."""
    import icu

    breaker = icu.BreakIterator.createWordInstance(icu.Locale(lang or "und"))
    utext = icu.UnicodeString(text)  # ICU counts UTF-16 units: add up the Python lengths of its segments
    breaker.setText(utext)
    offsets, start, position = {0}, breaker.first(), 0
    for end in breaker:
        position += len(str(utext[start:end]))
        offsets.add(position)
        start = end
    return frozenset(offsets)
