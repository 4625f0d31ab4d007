"""Faster trafilatura with the same output: two swaps inside trafilatura, both reversible.

1. Selectors: trafilatura's XPath selector lists get Python equivalents from
   stages/extraction/xpath_compiler.py, replaced in place, so every trafilatura module that imported a list
   sees them. Expressions that do not compile stay lxml XPaths.
2. Element classes: lxml.html picks the Python class of every element proxy it hands out through
   a Python method (`HtmlElementClassLookup.lookup`), over a million calls per 400 pages. trafilatura's
   parser gets the same mapping as a C-level lookup: form/input/select/textarea/label keep their
   special classes, every other element is an HtmlElement, comments an HtmlComment, as before
   (lxml.html lower-cases the tag before its lookup; the C lookup relies on the HTML parser and
   trafilatura producing lower-case tags, which they do).

`install()` and `uninstall()` are idempotent and thread-safe. tests/stages/test_xpath_compiler.py
extracts real pages both ways and requires identical text; bench/extract_agreement.py reports the
speed and the agreement on trafilatura's 990-page evaluation set.

Fenced: the selectors are replaced only when trafilatura's selector source is one the tests
verified (its SHA-256 is in VERIFIED_SELECTORS); another trafilatura keeps its own lxml XPaths
(same text, slower), said once on stderr. The class-lookup swap is best-effort the same way.
"""
from __future__ import annotations

import hashlib
import sys
import threading

from lxml import etree

from stages.extraction.xpath_compiler import EXSLT_REGEXP, CompiledSelector, compile_selector

# SHA-256 of trafilatura's selector lists (`selector_digest()`) for the versions whose compiled
# selectors tests/stages/test_xpath_compiler.py verified. Add a line after verifying a new version.
VERIFIED_SELECTORS = {
    "2.3.1": "99c8b95a37131695c7fd9ed694151edb4eb35cac696dab3ad8fcec8584fae914",
}

_lock = threading.Lock()
_original_selectors: dict[tuple[str, int], etree.XPath] = {}  # (list name, index) -> replaced XPath
_lookup_swapped = False
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
    """Swap both in where verified; returns how many selectors are compiled (0 when fenced off)."""
    global _lookup_swapped, _state
    import lxml.html
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
        _state = True
        return len(_original_selectors)


def uninstall() -> None:
    """Put trafilatura's own selectors and lxml.html's class lookup back."""
    global _lookup_swapped, _state
    import lxml.html
    import trafilatura.utils

    with _lock:
        lists = _selector_lists()
        for (name, i), original in _original_selectors.items():
            lists[name][i] = original
        _original_selectors.clear()
        if _lookup_swapped:
            trafilatura.utils.HTML_PARSER.set_element_class_lookup(lxml.html.HtmlElementClassLookup())
            _lookup_swapped = False
        _state = False


def installed() -> bool:
    return bool(_original_selectors) or _lookup_swapped


def versions() -> dict[str, str]:
    """What extraction ran with, for the manifest."""
    import lxml
    import trafilatura

    return {"trafilatura": getattr(trafilatura, "__version__", "?"), "lxml": lxml.__version__}
