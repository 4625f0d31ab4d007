"""Text repair before any judgment: ftfy undoes mojibake and other Unicode damage (FineWeb-2 runs it on every
document), and what cannot be undone is measured as `encoding_damage`, a column the rules and the quality
score use.

A page decoded with the wrong charset (UTF-8 read as Windows-1252: "cafÃ©", as Windows-1251: "РџСЂРёРІРµС‚")
is fixed in place; one whose bytes were lost on the way ("鏄?笉鏄??": UTF-8 read as GBK with the odd bytes
replaced by "?") cannot be, and without this stage it went through language ID, the rules and the quality model
into the anneal split.
"""
from __future__ import annotations

import codecs
import re
import unicodedata
from dataclasses import dataclass

import ftfy
import ftfy.bad_codecs  # noqa: F401  (registers the sloppy-windows-125x codecs)
import re2
from ftfy.badness import BADNESS_RE as _FTFY_BADNESS

from common.settings import check
from stages.record import Document, Stage, StageResult, clean_text, over
from stages.table import StageSpec

STAGE = "text_repair"
SEGMENT_CHARS = 100_000  # ftfy fixes a page line by line; a line longer than this in pieces (bounded work)

# ftfy's fixes, less three that change correct text: `uncurl_quotes` (typographic quotes are text),
# `fix_character_width` (full-width forms are how CJK text is written) and `unescape_html` (extraction
# already turned entities into characters; a page about "&amp;" keeps it).
FIXES = ftfy.TextFixerConfig(unescape_html=False, uncurl_quotes=False, fix_character_width=False,
                             max_decode_length=SEGMENT_CHARS, explain=True)

# ftfy's fixers that undo a wrong decoding in part of a text (reported under their own names).
MOJIBAKE_FIXERS = frozenset({"decode_inconsistent_utf8", "restore_byte_a0", "replace_lossy_sequences"})

# UTF-8 bytes read as GBK (the common Chinese mojibake) leave runs of characters whose GBK bytes are valid
# UTF-8 of CJK text again (E4-E9 lead, two continuation bytes). Correct Chinese text gives such a run of two
# characters by chance about once in 3,000 positions; mojibake gives it at every position.
_GBK_AS_UTF8 = re.compile(rb"(?:[\xe4-\xe9][\x80-\xbf]{2}){2,}")
_CJK = re.compile("[\u4e00-\u9fff]")
# What ftfy leaves of UTF-8 read as Windows-1252 in a line too short for its evidence ("KoreÄ…"): a lead byte
# of a 2-byte sequence as a Latin capital, then a continuation byte as a symbol no word has after a letter.
_LATIN_MOJIBAKE = re.compile("[ÂÃÄÅÐÑØÙ][€‚ƒ„…†‡ˆ‰Š‹ŒŽ•˜™š›œžŸ¡¢£¤¥¦§¨©ª¬®¯±²³´µ¶¸¹º¼½¾¿]")


@dataclass(frozen=True)
class TextRepairConfig:
    """ftfy's repair of mis-decoded text, and the share of characters damaged beyond repair."""

    enabled: bool = True
    # Drop a page when more than this share of its characters is damaged beyond repair (U+FFFD, mojibake
    # that ftfy cannot undo); none keeps every page and only records `encoding_damage`.
    max_damage: float | None = 0.05

    def __post_init__(self):
        check(self.max_damage is None or 0.0 <= self.max_damage <= 1.0,
              f"max_damage must be in [0, 1] or none, got {self.max_damage}")


def _without_verbose(pattern: str) -> str:
    """A re.VERBOSE pattern as a plain one (RE2 has no verbose mode): whitespace and comments outside character
    classes dropped."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
        elif c == "#":
            i = pattern.find("\n", i)
            i = len(pattern) if i < 0 else i
            continue
        elif not c.isspace():
            out.append(c)
        i += 1
    return "".join(out)


# ftfy's pattern of mojibake sequences, matched by RE2: Python's engine took ~2 MB/s on ordinary pages (it tries
# every branch of the alternation at every character), RE2 ~300 MB/s; a test checks both find the same spans.
BADNESS_RE = re2.compile(_without_verbose(_FTFY_BADNESS.pattern))

# What any of the fixes acts on, so that a page without it skips ftfy (most pages: ~1 MB/s through ftfy's line
# by line checks, 20x that through these two scans): C0 and C1 controls, DEL, lone surrogates, Latin ligatures,
# CR and Unicode line separators, terminal escapes; mojibake is found by ftfy's own badness pattern.
_ACTED_ON = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufb00-\ufb06\r\u2028\u2029]")


def needs_repair(text: str) -> bool:
    """Whether any of ftfy's fixes could change the text."""
    return (_ACTED_ON.search(text) is not None or BADNESS_RE.search(text) is not None
            or not unicodedata.is_normalized("NFC", text))


def repair(text: str) -> tuple[str, list[str]]:
    """The text with ftfy's fixes applied, and the kinds of fix made ("mojibake" for an encoding undone,
    else ftfy's fixer names: remove_control_chars, fix_line_breaks, ...), each once."""
    if not needs_repair(text):
        return text, []
    kinds: list[str] = []
    out = []
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos) + 1 or len(text)
        end = min(end, pos + SEGMENT_CHARS)
        segment = text[pos:end]
        if not segment.isascii() or _ACTED_ON.search(segment):
            fixed, steps = ftfy.fix_and_explain(segment, FIXES)
            if fixed != segment:
                for action, name in steps or ():
                    kind = "mojibake" if action in ("encode", "decode", "transcode") or name in MOJIBAKE_FIXERS \
                        else name
                    if kind not in kinds:
                        kinds.append(kind)
            segment = fixed
        out.append(segment)
        pos = end
    return "".join(out), kinds


# The single-byte charsets UTF-8 is misread as (WHATWG's forms: undefined bytes as C1 controls).
MISREAD_AS = ("sloppy-windows-1252", "sloppy-windows-1250", "sloppy-windows-1251", "latin-1")


def is_mojibake(sequence: str, following: str = "") -> bool:
    """Whether a sequence ftfy's badness pattern found is UTF-8 misread: its bytes in some single-byte charset are
    UTF-8. Correct text the pattern also finds is not: Slovenian »Če (a quote, then a capital with caron), Lombard
    œ, Ewe ƒã, and words run together ("nienawidzęŻydów": ę Ż in Windows-1250 is EA AF, the start of a 3-byte
    sequence that the next letter, y, does not go on). A sequence that ends inside a multi-byte character is
    finished with the characters that follow it (`following`, the text after it); only where the text ends
    there does an unfinished character count (its last byte lost)."""
    for charset in MISREAD_AS:
        try:
            raw = sequence.encode(charset)
        except UnicodeEncodeError:
            continue
        if not any(byte >= 0xC2 for byte in raw):
            continue
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            decoded = decoder.decode(raw, final=False)
        except UnicodeDecodeError:
            continue
        for char in following:
            if not decoder.getstate()[0] or not _is_continuation(char, charset):
                break
            try:
                decoded += decoder.decode(char.encode(charset), final=False)
            except UnicodeDecodeError:  # an overlong or surrogate form: not UTF-8 after all
                break
        # a whole misread character, or the text ends inside one (its last byte lost)
        if not decoded.isascii() or all(_is_continuation(c, charset) for c in following):
            return True
    return False


def _is_continuation(char: str, charset: str) -> bool:
    try:
        byte = char.encode(charset)
    except UnicodeEncodeError:
        return False
    return len(byte) == 1 and 0x80 <= byte[0] <= 0xBF


def damage(text: str) -> float:
    """Share of the characters damaged beyond repair: replacement characters, the sequences ftfy's badness
    measure calls mojibake and Windows-1252 pairs (what is left after fixing), and runs of UTF-8 read as GBK."""
    if not text:
        return 0.0
    text = clean_text(text)  # a lone surrogate (RE2 reads UTF-8) counts as the U+FFFD it stands for
    misread = sum(len(m.group()) for m in BADNESS_RE.finditer(text) if is_mojibake(m.group(), text[m.end():m.end() + 3]))
    damaged = text.count("\ufffd") + misread + 2 * len(_LATIN_MOJIBAKE.findall(text))
    if _CJK.search(text):
        gbk = text.encode("gbk", errors="replace")
        damaged += sum(len(m.group()) for m in _GBK_AS_UTF8.finditer(gbk)) // 2  # two GBK bytes a character
    return min(damaged / len(text), 1.0)


class TextRepair(Stage):
    """Stage: fixes the text (ftfy), notes each kind of fix, sets `text_fixed` and `encoding_damage`; drops
    a page damaged beyond `max_damage`."""

    name = STAGE

    def __init__(self, config: TextRepairConfig | None = None):
        self.config = config or TextRepairConfig()

    def __call__(self, doc: Document) -> StageResult:
        text, kinds = repair(doc.text)
        for kind in kinds:
            self.count(f"fixed.{kind}")
        damaged = damage(text)
        verdict = over(REASON, damaged, self.config.max_damage, ".3f", "damaged share ")
        if verdict:
            reason, detail, value, limit = verdict
            return doc.replace(text=text).drop(STAGE, reason, detail, value=value, threshold=limit)
        return doc.replace(text=text).with_score("text_fixed", 1.0 if kinds else 0.0) \
            .with_score("encoding_damage", damaged)


REASON = "encoding_damage"
SPEC = StageSpec(
    name=STAGE, order=15, config=TextRepairConfig, build=TextRepair,
    about="ftfy's fixes (mojibake, control characters) → `text_fixed`, `encoding_damage`",
    reasons={REASON: "more than `max_damage` of the characters damaged beyond repair (U+FFFD, mojibake)"})
