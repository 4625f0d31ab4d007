"""Words, lines and stop words, shared by the quality and repetition rules.

Word segmentation: whitespace for languages that write spaces; ICU's dictionary-based
word break iterator (PyICU) for those that do not (zh, ja, th, ...), because a
whitespace split turns a whole Chinese paragraph into one "word" and every
word-count rule then drops it.
"""
from __future__ import annotations

import functools
import string
import unicodedata

# Languages written without spaces between words: segment them with ICU.
NO_SPACE_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "yue", "wuu"})

# Terminal punctuation across scripts (FineWeb and C4 rules look for it at line ends).
TERMINAL_PUNCTUATION = (".", "!", "?", '"', "'", "”", "»", "。", "！", "？", "…", "؟", "।", "۔", "｡")

_PUNCT = frozenset(string.punctuation) | frozenset("«»„“”‘’‚‹›–—…·•、。，！？；：（）【】《》「」『』〈〉")
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


# The quality and repetition rules (and MinHash) tokenize the same text one after another on the
# same worker: keep the last few results instead of segmenting again. Tuples, so no caller can
# change a cached result.
@functools.lru_cache(maxsize=4)
def _split_words(text: str, lang: str | None) -> tuple[str, ...]:
    if lang in NO_SPACE_LANGS:
        return tuple(_icu_words(text, lang))
    return tuple(text.split())


@functools.lru_cache(maxsize=4)
def _normalized_words(text: str, lang: str | None) -> tuple[str, ...]:
    return tuple(filter(is_word, [w.strip(_STRIP).lower() for w in _split_words(text, lang)]))


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
