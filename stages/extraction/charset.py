"""Turn a page's bytes into text without ever raising.

Order follows the HTML standard's encoding sniffing, simplified: a byte-order
mark wins, then the charset the server declared (HTTP header, or the WARC
header for archives that store no HTTP block), then a <meta> declaration in the
first bytes, then UTF-8, then statistical detection (charset_normalizer), and
finally UTF-8 with replacement characters. Each candidate must decode strictly;
a wrong label (common on the real web) falls through to the next one.
"""
from __future__ import annotations

import codecs
import re
from collections.abc import Iterable

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: its BOM starts the same way
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# WHATWG aliases: browsers decode these labels with a superset encoding, and so must we,
# or pages labelled latin-1 that use curly quotes (0x93/0x94) decode wrongly.
_SUPERSETS = {
    "iso-8859-1": "cp1252", "latin-1": "cp1252", "latin1": "cp1252", "us-ascii": "cp1252",
    "ascii": "cp1252", "iso-8859-9": "cp1254", "gb2312": "gb18030", "gbk": "gb18030",
    "x-gbk": "gb18030", "euc-cn": "gb18030", "shift_jis": "cp932", "x-sjis": "cp932",
    "ks_c_5601-1987": "cp949", "euc-kr": "cp949", "tis-620": "cp874", "iso-8859-11": "cp874",
    "big5": "big5hkscs",
}
# WHATWG labels Python does not know by that name.
_LABELS = {"windows-874": "cp874", "x-mac-cyrillic": "mac-cyrillic", "x-mac-roman": "mac-roman",
           "iso-8859-8-i": "iso8859-8", "csiso88598i": "iso8859-8", "logical": "iso8859-8", "dos-874": "cp874"}
# The encodings of the WHATWG Encoding Standard (what browsers decode), as Python codec names. A label
# naming anything else (utf-7, which can smuggle markup past filters, rot13, hz, iso-2022-kr, ...) is
# treated as no label at all, as browsers do, and so is a statistical guess of one.
_WEB_CODECS = frozenset({
    "utf-8", "cp866", *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)), "koi8-r", "koi8-u",
    "mac-roman", "mac-cyrillic", "cp874", *(f"cp125{n}" for n in range(9)), "gb18030", "big5hkscs", "euc_jp",
    "iso2022_jp", "cp932", "cp949"})
# Codecs a browser replaces by a superset (resolved names, for labels Python aliases and detected guesses).
_CODEC_SUPERSETS = {"iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254", "iso8859-11": "cp874",
                    "tis_620": "cp874", "gb2312": "gb18030", "gbk": "gb18030", "shift_jis": "cp932",
                    "euc_kr": "cp949", "big5": "big5hkscs"}
# The spaces around an optional quote are one run or two (`\s*(?:["']\s*)?`, not `\s*["']?\s*`: two adjacent
# runs of spaces try every split of a long run between them, quadratic time on a header of spaces)
_META_CHARSET = re.compile(rb"""<meta[^>]{0,512}?charset\s*=\s*(?:["']\s*)?([a-zA-Z0-9_.:\-]{1,40})""", re.I)
_CHARSET_PARAM = re.compile(r"""charset\s*=\s*(?:["']\s*)?([a-zA-Z0-9_.:\-]{1,40})""", re.I)
_DETECT_BYTES = 64 * 1024  # detection cost grows with input; the head of a page is enough


def charset_from_content_type(content_type: str | None) -> str | None:
    if not content_type:
        return None
    m = _CHARSET_PARAM.search(content_type)
    return m.group(1) if m else None


def _codec(label: str | None) -> str | None:
    """Python codec name for a web charset label, or None if unknown or not a text codec."""
    if not label:
        return None
    label = label.strip().lower()
    label = _LABELS.get(label, _SUPERSETS.get(label, label))
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    # utf-16/32 without a BOM are almost always mislabelled UTF-8 on the web (WHATWG says the same)
    if name in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "utf-8-sig"):
        return "utf-8"
    name = _CODEC_SUPERSETS.get(name, name)
    return name if name in _WEB_CODECS else None  # "undefined", "utf-7", "rot13", ...: as if unlabelled


def _strict(data: bytes, codec: str) -> str | None:
    try:
        text = data.decode(codec)
    except (UnicodeError, LookupError, TypeError):  # UnicodeError: codecs that refuse any input
        return None
    return text


def decode_html(data: bytes, declared: Iterable[tuple[str, str | None]] = ()) -> tuple[str, str, str]:
    """Decode page bytes. Returns (text, codec used, where the charset came from).

    `declared` is a sequence of (source, label) pairs in priority order, e.g.
    [("http", "iso-8859-1"), ("warc", None)]. Never raises.
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            text = _strict(data, codec)
            if text is not None:
                return text, codec, "bom"
    candidates = [(source, _codec(label)) for source, label in declared]
    m = _META_CHARSET.search(data[:4096])
    candidates.append(("meta", _codec(m.group(1).decode("ascii")) if m else None))
    candidates.append(("utf-8", "utf-8"))
    tried = set()
    for source, codec in candidates:
        if not codec or codec in tried:
            continue
        tried.add(codec)
        text = _strict(data, codec)
        if text is not None:
            return text, codec, source
    detected = _detect(data)
    if detected and detected not in tried:
        text = _strict(data, detected)
        if text is not None:
            return text, detected, "detected"
    # cp1252 cannot fail on the bytes it defines; latin-1 cannot fail at all, but
    # replacement characters keep the damage visible instead of inventing letters.
    return data.decode("utf-8", errors="replace"), "utf-8", "replace"


def _detect(data: bytes) -> str | None:
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # optional: trafilatura depends on it, so it is normally there
        return None
    best = from_bytes(data[:_DETECT_BYTES]).best()
    return _codec(best.encoding) if best is not None else None
