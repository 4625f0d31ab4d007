"""Compiled selectors select exactly what lxml's XPath selects, and extraction output is unchanged."""
from __future__ import annotations

import random
import re

import lxml.html
import pytest
from lxml import etree

from stages.extraction import trafilatura_speedups
from stages.extraction.extract import ExtractConfig, extract_text
from stages.extraction.warc import read_warc
from stages.extraction.xpath_compiler import EXSLT_REGEXP, compile_selector
from stages.record import Document
from tests.conftest import WARC_DIR

NS = {"re": EXSLT_REGEXP}


@pytest.fixture(scope="module")
def trafilatura_selectors():
    """(name, original lxml XPath) for every selector in trafilatura's lists, speedups off."""
    trafilatura_speedups.uninstall()
    lists = trafilatura_speedups._selector_lists()
    return [(f"{name}[{i}]", xpath) for name, xpaths in sorted(lists.items()) for i, xpath in enumerate(xpaths)]


@pytest.fixture(scope="module")
def real_pages():
    pages = []
    for path in sorted(WARC_DIR.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            pages += [(d.url, d.html) for d in read_warc(fh, source="test") if isinstance(d, Document)]
    assert len(pages) > 150
    return pages


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def test_trafilatura_content_and_boilerplate_selectors_compile(trafilatura_selectors):
    compiled = {name for name, xpath in trafilatura_selectors if compile_selector(xpath.path, NS)}
    # the selectors extraction runs on every page must all compile (metadata ones may not)
    for prefix in ("BODY_XPATH", "OVERALL_DISCARD_XPATH", "REMOVE_COMMENTS_AND_LISTS_XPATH",
                   "RAW_TREE_PRUNE_XPATH", "PRECISION_DISCARD_XPATH", "TEASER_DISCARD_XPATH",
                   "DISCARD_IMAGE_ELEMENTS", "REMOVE_COMMENTS_XPATH"):
        names = [n for n, _ in trafilatura_selectors if n.startswith(prefix + "[")]
        assert names and set(names) <= compiled, prefix


def test_compiled_selectors_match_lxml_on_real_pages(trafilatura_selectors, real_pages):
    from trafilatura.htmlprocessing import convert_tags, tree_cleaning
    from trafilatura.settings import Extractor
    from trafilatura.utils import load_html

    trees = [t for t in (load_html(html) for _, html in real_pages) if t is not None]
    # trafilatura runs most selectors after renaming tags (ul -> list, li -> item, ...)
    options = Extractor(output_format="txt")
    cleaned = [convert_tags(tree_cleaning(lxml.html.fromstring(lxml.html.tostring(t)), options), options)
               for t in trees[:60]]
    checked = 0
    for name, xpath in trafilatura_selectors:
        selector = compile_selector(xpath.path, NS)
        if selector is None:
            continue
        for tree in trees + cleaned:
            for context in (tree, tree.find(".//body")):
                if context is not None:
                    assert _same(xpath(context), selector(context)), name
        checked += 1
    assert checked >= 20


def _fragments(path: str):
    """Attribute-value pieces that can trigger the expression's tests."""
    pieces = set()
    for literal in re.findall(r"'([^']*)'", path):
        for part in literal.split("|"):
            part = re.sub(r"\(\?:|\(\?!|[\^$()?*+\[\]\\]|\\s", "", part)
            if part and len(part) < 40:
                pieces.update({part, part.capitalize(), part.upper()})
    return sorted(pieces) or ["x"]


def _random_tree(rng: random.Random, tags, attrs, fragments, size: int = 300):
    root = etree.Element("html")
    body = etree.SubElement(root, "body")
    nodes = [body]
    for _ in range(size):
        parent = rng.choice(nodes)
        el = etree.SubElement(parent, rng.choice(tags))
        for attr in rng.sample(attrs, rng.randint(0, min(4, len(attrs)))):  # random order on the element
            roll = rng.random()
            if roll < 0.1:
                value = ""
            elif roll < 0.6:
                value = rng.choice(fragments)
            else:
                value = rng.choice(["", "x ", "a-", " "]) + rng.choice(fragments) + rng.choice(["", " y", "-b", "s"])
            el.set(attr, value)
        if rng.random() < 0.05:
            etree.SubElement(el, "h1")
        if rng.random() < 0.05:
            el.append(etree.Comment("comment"))
        nodes.append(el)
    return root


def test_compiled_selectors_match_lxml_on_generated_attributes(trafilatura_selectors):
    rng = random.Random(7)
    for name, xpath in trafilatura_selectors:
        selector = compile_selector(xpath.path, NS)
        if selector is None:
            continue
        tags = sorted(set(re.findall(r"self::([\w-]+)", xpath.path)) | set(re.findall(r"//([a-z]\w*)", xpath.path))
                      | {"div", "span", "p", "a"})
        attrs = sorted(set(re.findall(r"@([\w-]+)", xpath.path)) | {"title"})
        for _ in range(5):
            tree = _random_tree(rng, tags, attrs, _fragments(xpath.path))
            expected = xpath(tree)
            assert _same(expected, selector(tree)), name


@pytest.mark.parametrize("path", [
    "//div", ".//div/p", ".//div[2]", "(.//div)[2]", ".//*[count(p) > 1]", ".//*[@a!='b']",
    ".//*[re:replace(@a, 'x', 'g', 'y')]", ".//*[foo:test(@a, 'x')]", ".//*[@a='b'][1][@c]",
    ".//*[self::div or", ".//*[ancestor::div]",
])
def test_unsupported_xpath_is_left_to_lxml(path):
    assert compile_selector(path, NS) is None


@pytest.mark.parametrize("markup, path", [
    ('<div id="hidden" class="a">1</div><div class="a" id="hidden">2</div>', ".//*[re:test(@id|@class, '^a')]"),
    ('<div>1</div><div id="">2</div><div id="z">3</div>', ".//*[re:test(@id, '^$')]"),
    ('<div>1</div><div id="">2</div>', ".//*[@id]"),
    ('<div><p class="k">1</p><p class="k">2</p></div><p class="k">3</p>', ".//*[self::p][@class='k'][1]"),
    ('<div role="mainNav">1</div><div role="NAVI">2</div>', ".//*[contains(translate(@role, 'N', 'n'), 'nav')]"),
    ('<div class="A">1</div><div class="a">2</div>', ".//*[re:test(@class, 'a', 'i')]"),
    ('<main>1</main><div class="main">2</div>', "(.//*[self::div][starts-with(@class, 'main')])[1]|(.//main)[1]"),
])
def test_xpath_semantics_edge_cases(markup, path):
    tree = lxml.html.fromstring(f"<html><body>{markup}</body></html>")
    expected = tree.xpath(path, namespaces=NS)
    assert expected, "the case must select something to be meaningful"
    assert _same(expected, compile_selector(path, NS)(tree))


def test_document_context_goes_to_lxml():
    tree = lxml.html.fromstring("<html><body><div class='a'>1</div></body></html>")
    selector = compile_selector(".//*[@class='a' or self::html]", NS)
    document = tree.getroottree()
    assert _same(selector(document), etree.XPath(".//*[@class='a' or self::html]")(document))
    assert _same(selector(tree), tree.xpath(".//*[@class='a' or self::html]"))


@pytest.mark.parametrize("fast", [False, True], ids=["default", "fast mode"])
def test_extraction_unchanged_by_speedups(real_pages, gold_pages, fast):
    """Every speedup at once, in both modes (fast mode, the cascade's fallback, also skips two tree copies):
    the crawl pages and the gold pages (a quarter of them in fast mode, for the suite's time)."""
    gold = gold_pages[::4] if fast else gold_pages
    pages = [(url, html) for url, html in real_pages] + [(url, html) for html, url, _, _ in gold]
    options = ExtractConfig(fast=fast).trafilatura_options()
    try:
        shipped = [extract_text(html, url, dict(options, speedups=False)) for url, html in pages]
        assert not trafilatura_speedups.installed()
        sped_up = [extract_text(html, url, options) for url, html in pages]
        assert trafilatura_speedups.installed()
    finally:
        trafilatura_speedups.uninstall()
    assert sum(1 for t in shipped if t) > 150
    assert [i for i, (a, b) in enumerate(zip(shipped, sped_up)) if a != b] == []


def test_install_and_uninstall_restore_trafilatura():
    import trafilatura.utils

    trafilatura_speedups.uninstall()
    before = {name: list(xs) for name, xs in trafilatura_speedups._selector_lists().items()}
    assert trafilatura_speedups.install() >= 20
    assert trafilatura_speedups.install() >= 20  # idempotent
    tree = trafilatura.utils.load_html("<html><body><form><input name=q><label>x</label></form><p>t</p></body></html>")
    assert [type(e).__name__ for e in tree.iter()] == [
        "HtmlElement", "HtmlElement", "FormElement", "InputElement", "LabelElement", "HtmlElement"]
    trafilatura_speedups.uninstall()
    after = trafilatura_speedups._selector_lists()
    assert all(_same(before[name], after[name]) for name in before)
    assert all(isinstance(x, etree.XPath) for xs in after.values() for x in xs)


def test_copy_skip_only_in_a_verified_trafilatura_and_only_in_fast_precision_mode(monkeypatch, capsys, real_pages):
    """The copy skip reasons about trafilatura's extraction sequence: where that source differs from the
    verified one it stays off (said once) and the text is the same; on, it changes nothing in full mode."""
    import trafilatura.core
    import trafilatura.settings
    import trafilatura.utils

    monkeypatch.setattr(trafilatura_speedups, "_said", set())
    shipped = trafilatura.core._prepare_tree
    trafilatura_speedups.uninstall()
    assert trafilatura_speedups.sequence_digest() == trafilatura_speedups.VERIFIED_SEQUENCE[
        trafilatura_speedups.versions()["trafilatura"]]
    url, html = real_pages[0]
    options = ExtractConfig(fast=True).trafilatura_options()
    try:
        trafilatura_speedups.install()
        assert trafilatura.core._prepare_tree is not shipped
        tree = trafilatura.utils.load_html(html)
        full = trafilatura.settings.Extractor(fast=False, precision=True, comments=False)
        assert all(x is not None for x in trafilatura.core._prepare_tree(tree, full, url))  # backup kept
        trafilatura_speedups.uninstall()
        assert trafilatura.core._prepare_tree is shipped
        monkeypatch.setattr(trafilatura_speedups, "VERIFIED_SEQUENCE", {"0.0": "x"})
        capsys.readouterr()
        trafilatura_speedups.install()
        trafilatura_speedups.install()
        assert trafilatura.core._prepare_tree is shipped
        assert capsys.readouterr().err.count("fast-mode copy skip off") == 1
        assert extract_text(html, url, options) == extract_text(html, url, dict(options, speedups=False))
    finally:
        trafilatura_speedups.uninstall()


def test_invalid_xml_char_check_agrees_with_trafilatura_regex_on_every_code_point():
    """The byte-level check behind swap 4 says what trafilatura's regex finds, for every character (surrogates
    included) in ASCII, Latin-1 and wider strings; the swapped `sub` then returns what the regex returns."""
    import trafilatura.utils

    trafilatura_speedups.uninstall()
    pattern = trafilatura.utils.INVALID_XML_CHARS
    assert pattern.pattern == trafilatura_speedups.INVALID_XML_CHARS
    check = trafilatura_speedups.has_invalid_xml_char
    for context in ("a{}b", "é{}", "{}€\U0001F600"):
        wrong = [c for c in range(0x110000)
                 if check(context.format(chr(c))) != (pattern.search(context.format(chr(c))) is not None)]
        assert wrong == []
    assert check("<p>\uffff</p>\n\t\r") and not check("<p>\ufffd\uffef\ud800</p>\n\t\r")
    try:
        trafilatura_speedups.install()
        swapped = trafilatura.utils.INVALID_XML_CHARS
        assert swapped is not pattern
        for text in ("<p>ok</p>\n", "<p>\x00bad\x1f</p>", "caf\xe9\x0b", "\ufffe€"):
            assert swapped.sub("", text) == pattern.sub("", text)
    finally:
        trafilatura_speedups.uninstall()
    assert trafilatura.utils.INVALID_XML_CHARS is pattern


def test_selectors_are_replaced_only_in_a_verified_trafilatura(monkeypatch, capsys, real_pages):
    """This trafilatura is one the tests verified (a new version fails here until its digest is added
    after this file's agreement tests pass); an unverified one keeps its own selectors, said once."""
    trafilatura_speedups.uninstall()
    assert trafilatura_speedups.unverified_reason() is None
    assert trafilatura_speedups.versions()["trafilatura"] in trafilatura_speedups.VERIFIED_SELECTORS
    monkeypatch.setattr(trafilatura_speedups, "VERIFIED_SELECTORS", {"0.0": "x"})
    capsys.readouterr()
    try:
        assert trafilatura_speedups.install() == 0 and trafilatura_speedups.install() == 0
        assert all(isinstance(x, etree.XPath) for xs in trafilatura_speedups._selector_lists().values() for x in xs)
        err = capsys.readouterr().err
        assert err.count("extraction speedups off: trafilatura") == 1 and "not a version whose selectors" in err
        url, html = real_pages[0]
        options = ExtractConfig().trafilatura_options()
        assert extract_text(html, url, options) == extract_text(html, url, dict(options, speedups=False))
    finally:
        trafilatura_speedups.uninstall()
