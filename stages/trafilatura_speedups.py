"""Faster trafilatura with the same output: two swaps inside trafilatura, both reversible.

1. Selectors: trafilatura's XPath selector lists get Python equivalents from
   stages/xpath_compiler.py, replaced in place, so every trafilatura module that imported a list
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
"""
from __future__ import annotations

import threading
from typing import Dict, Tuple

from lxml import etree

from stages.xpath_compiler import EXSLT_REGEXP, CompiledSelector, compile_selector

_lock = threading.Lock()
_original_selectors: Dict[Tuple[str, int], etree.XPath] = {}  # (list name, index) -> replaced XPath
_lookup_swapped = False


def _selector_lists() -> Dict[str, list]:
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


def install() -> int:
    """Swap both in; returns how many selectors are compiled."""
    global _lookup_swapped
    import lxml.html
    import trafilatura.utils
    import trafilatura.xpaths as xpaths

    namespaces = {"re": getattr(xpaths, "REGEXP_NS", EXSLT_REGEXP)}
    with _lock:
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
            parser.set_element_class_lookup(_html_class_lookup())
            _lookup_swapped = True
        return len(_original_selectors)


def uninstall() -> None:
    """Put trafilatura's own selectors and lxml.html's class lookup back."""
    global _lookup_swapped
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


def installed() -> bool:
    return bool(_original_selectors) or _lookup_swapped
