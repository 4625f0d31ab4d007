"""Faster trafilatura with the same output: four swaps inside trafilatura, all reversible.

1. Selectors: trafilatura's XPath selector lists get Python equivalents from
   stages/extraction/xpath_compiler.py, replaced in place, so every trafilatura module that imported a list
   sees them. Expressions that do not compile stay lxml XPaths.
2. Element classes: lxml.html picks the Python class of every element proxy it hands out through
   a Python method (`HtmlElementClassLookup.lookup`), over a million calls per 400 pages. trafilatura's
   parser gets the same mapping as a C-level lookup: form/input/select/textarea/label keep their
   special classes, every other element is an HtmlElement, comments an HtmlComment, as before
   (lxml.html lower-cases the tag before its lookup; the C lookup relies on the HTML parser and
   trafilatura producing lower-case tags, which they do).
3. Dead copies: `trafilatura_sequence` copies the raw tree before cleaning it and the cleaned tree as a
   backup. In fast mode with precision focus and comments off (the cascade's fallback, `extract.fast`) it
   uses neither again: the backup feeds readability/jusText and the forum path, the raw tree those and
   the baseline rescue and recall retry, none of which run there. Skipping both copies (and freeing them)
   saves ~0.7 ms of ~7 on such a page.
4. Invalid XML characters: before parsing, trafilatura deletes control characters and U+FFFE/U+FFFF from
   the whole page with a regex (~0.5 ms on a 140 KB page). They are almost never there: a check on the
   page's UTF-8 bytes (C loops, ~0.3 ms) finds whether any is, and only then does the regex run.

`install()` and `uninstall()` are idempotent and thread-safe. tests/stages/extraction/test_xpath_compiler.py
extracts real pages both ways and requires identical text; bench/extract_agreement.py reports the
speed and the agreement on trafilatura's 990-page evaluation set.

Fenced: the selectors are replaced only when trafilatura's selector source is one the tests
verified (its SHA-256 is in VERIFIED_SELECTORS); another trafilatura keeps its own lxml XPaths
(same text, slower), said once on stderr. The class-lookup swap is best-effort the same way. The copy
skip is made only where the source of the functions it reasons about has the SHA-256 in VERIFIED_SEQUENCE.
"""
from __future__ import annotations

import hashlib
import inspect
import re
import sys
import threading

from lxml import etree

from stages.extraction.xpath_compiler import EXSLT_REGEXP, CompiledSelector, compile_selector

# SHA-256 of trafilatura's selector lists (`selector_digest()`) for the versions whose compiled
# selectors tests/stages/extraction/test_xpath_compiler.py verified. Add a line after verifying a new version.
VERIFIED_SELECTORS = {
    "2.3.1": "99c8b95a37131695c7fd9ed694151edb4eb35cac696dab3ad8fcec8584fae914",
}

# SHA-256 of the trafilatura functions whose use of the raw and backup trees the copy skip relies on
# (`sequence_digest()`); re-read them before adding a version.
VERIFIED_SEQUENCE = {
    "2.3.1": "197af543278ffef1bae5c19ce639245df1e8f2bac439754c2a4836187c591fad",
}
SEQUENCE_FUNCTIONS = ("bare_extraction", "trafilatura_sequence", "_prepare_tree", "_extract_and_compare",
                      "_recall_retry")

# The regex swap 4 replaces, exactly (another pattern keeps trafilatura's own).
INVALID_XML_CHARS = r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]"
_CONTROL_BYTES = bytes(c for c in range(0x20) if c not in b"\t\n\r")

_lock = threading.Lock()
_original_selectors: dict[tuple[str, int], etree.XPath] = {}  # (list name, index) -> replaced XPath
_lookup_swapped = False
_original_prepare_tree = None  # trafilatura.core._prepare_tree while ours is in its place
_tree_cleaning = _convert_tags = None  # trafilatura.core's, what ours calls in their place
_original_invalid_chars = None  # trafilatura.utils.INVALID_XML_CHARS while ours is in its place
_said = set()  # warnings already printed by this process
_state: bool | None = None  # True after install(), False after uninstall()


def state() -> bool | None:
    """What was last asked of this process: installed (True), removed (False), or nothing (None)."""
    return _state


def _selector_lists() -> dict[str, list]:
    """trafilatura's module-level lists of selectors, by name."""
    import trafilatura.xpaths as xpaths

    return {name: value for name, value in vars(xpaths).items()
            if isinstance(value, list) and value
            and all(isinstance(x, (etree.XPath, CompiledSelector)) for x in value)}


def _html_class_lookup() -> etree.ElementNamespaceClassLookup:
    """lxml.html's element classes as a C-level lookup (HTML elements have no namespace)."""
    import lxml.html

    lookup = etree.ElementNamespaceClassLookup(etree.ElementDefaultClassLookup(
        element=lxml.html.HtmlElement, comment=lxml.html.HtmlComment,
        pi=lxml.html.HtmlProcessingInstruction, entity=lxml.html.HtmlEntity))
    no_namespace = lookup.get_namespace(None)
    for tag, cls in lxml.html.HtmlElementClassLookup._default_element_classes.items():
        no_namespace[tag] = cls
    return lookup


def selector_digest() -> str:
    """SHA-256 of trafilatura's own selector lists (names, order and XPath source)."""
    lists = _selector_lists()
    source = "\n".join(f"{name}[{i}]={_original_selectors.get((name, i), x).path}"
                       for name in sorted(lists) for i, x in enumerate(lists[name]))
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def sequence_digest() -> str:
    """SHA-256 of the source of trafilatura's extraction sequence (SEQUENCE_FUNCTIONS, as shipped)."""
    import trafilatura.core as core

    functions = {name: getattr(core, name) for name in SEQUENCE_FUNCTIONS}
    if _original_prepare_tree is not None:
        functions["_prepare_tree"] = _original_prepare_tree
    return hashlib.sha256("\n".join(inspect.getsource(functions[name]) for name in SEQUENCE_FUNCTIONS)
                          .encode("utf-8")).hexdigest()


def _prepare_tree_without_dead_copies(tree, options, url):
    """trafilatura's `_prepare_tree`, without the two copies nothing reads in fast precision mode, comments off."""
    if options.fast and options.focus == "precision" and not options.comments:
        return _convert_tags(_tree_cleaning(tree, options), options, url), None
    return _original_prepare_tree(tree, options, url)


def _swap_prepare_tree(version: str) -> None:
    global _convert_tags, _original_prepare_tree, _tree_cleaning
    import trafilatura.core as core

    if _original_prepare_tree is not None:
        return
    try:
        verified = VERIFIED_SEQUENCE.get(version) == sequence_digest()
    except (AttributeError, OSError, TypeError) as exc:  # functions renamed, or no source installed
        verified, version = False, f"{version} ({type(exc).__name__})"
    if not verified:
        _say_once(f"fast-mode copy skip off: trafilatura {version}'s extraction sequence is not the verified one")
        return
    _tree_cleaning, _convert_tags = core.tree_cleaning, core.convert_tags  # looked up once, not per page
    _original_prepare_tree, core._prepare_tree = core._prepare_tree, _prepare_tree_without_dead_copies


def has_invalid_xml_char(text: str) -> bool:
    """Whether INVALID_XML_CHARS matches `text`. In UTF-8 a byte below 0x20 is only ever that ASCII character,
    and EF BF BE/BF only ever U+FFFE/U+FFFF (lead and continuation bytes differ), so the bytes tell exactly."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data.translate(None, _CONTROL_BYTES)) != len(data):
        return True
    return not text.isascii() and (b"\xef\xbf\xbe" in data or b"\xef\xbf\xbf" in data)


class _InvalidXmlChars:
    """trafilatura's INVALID_XML_CHARS pattern, its `sub` skipped on text it would not change."""

    def __init__(self, pattern: re.Pattern):
        self.pattern = pattern

    def sub(self, repl, string, count=0):
        if isinstance(string, str) and not has_invalid_xml_char(string):
            return string
        return self.pattern.sub(repl, string, count)

    def __getattr__(self, name):
        return getattr(self.pattern, name)


def _swap_invalid_chars() -> None:
    global _original_invalid_chars
    import trafilatura.utils

    pattern = getattr(trafilatura.utils, "INVALID_XML_CHARS", None)
    if _original_invalid_chars is None and isinstance(pattern, re.Pattern) \
            and (pattern.pattern, pattern.flags) == (INVALID_XML_CHARS, re.UNICODE):
        _original_invalid_chars, trafilatura.utils.INVALID_XML_CHARS = pattern, _InvalidXmlChars(pattern)


def unverified_reason() -> str | None:
    """Why the selectors must not be replaced in this installation (None: they may)."""
    import trafilatura

    version = getattr(trafilatura, "__version__", "?")
    expected = VERIFIED_SELECTORS.get(version)
    if expected is None:
        return f"trafilatura {version} is not a version whose selectors were verified ({', '.join(VERIFIED_SELECTORS)})"
    if selector_digest() != expected:
        return f"trafilatura {version}'s selectors differ from the verified ones"
    return None


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        print(f"[refinery] {message}", file=sys.stderr, flush=True)


def install() -> int:
    """Swap all four in where verified; returns how many selectors are compiled (0 when fenced off)."""
    global _lookup_swapped, _state
    import lxml.html
    import trafilatura
    import trafilatura.utils
    import trafilatura.xpaths as xpaths

    namespaces = {"re": getattr(xpaths, "REGEXP_NS", EXSLT_REGEXP)}
    with _lock:
        reason = unverified_reason() if not _original_selectors else None
        if reason:
            _say_once(f"extraction speedups off: {reason}; trafilatura's own XPath selectors are used "
                      "(same text, slower)")
        else:
            for name, selectors in _selector_lists().items():
                for i, selector in enumerate(selectors):
                    if isinstance(selector, etree.XPath):
                        compiled = compile_selector(selector.path, namespaces)
                        if compiled is not None:
                            _original_selectors[(name, i)] = selector
                            selectors[i] = compiled
        parser = getattr(trafilatura.utils, "HTML_PARSER", None)
        # lxml.html.HTMLParser always sets HtmlElementClassLookup(), the lookup ours reproduces
        if not _lookup_swapped and type(parser) is lxml.html.HTMLParser:
            try:
                parser.set_element_class_lookup(_html_class_lookup())
                _lookup_swapped = True
            except Exception as exc:  # another lxml: keep its Python lookup
                _say_once(f"lxml class-lookup speedup off: {type(exc).__name__}: {exc}")
        _swap_prepare_tree(getattr(trafilatura, "__version__", "?"))
        _swap_invalid_chars()
        _state = True
        return len(_original_selectors)


def uninstall() -> None:
    """Put trafilatura's own selectors, lxml.html's class lookup, `_prepare_tree` and regex back."""
    global _lookup_swapped, _original_invalid_chars, _original_prepare_tree, _state
    import lxml.html
    import trafilatura.core
    import trafilatura.utils

    with _lock:
        lists = _selector_lists()
        for (name, i), original in _original_selectors.items():
            lists[name][i] = original
        _original_selectors.clear()
        if _lookup_swapped:
            trafilatura.utils.HTML_PARSER.set_element_class_lookup(lxml.html.HtmlElementClassLookup())
            _lookup_swapped = False
        if _original_prepare_tree is not None:
            trafilatura.core._prepare_tree, _original_prepare_tree = _original_prepare_tree, None
        if _original_invalid_chars is not None:
            trafilatura.utils.INVALID_XML_CHARS, _original_invalid_chars = _original_invalid_chars, None
        _state = False


def installed() -> bool:
    return bool(_original_selectors) or _lookup_swapped or _original_prepare_tree is not None \
        or _original_invalid_chars is not None


def versions() -> dict[str, str]:
    """What extraction ran with, for the manifest."""
    import lxml
    import trafilatura

    return {"trafilatura": getattr(trafilatura, "__version__", "?"), "lxml": lxml.__version__}
