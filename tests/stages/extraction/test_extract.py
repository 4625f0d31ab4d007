"""Extraction on real pages with trafilatura's gold snippets, and its size and time limits."""
import time

import pytest

from stages.extraction.extract import ExtractConfig, Extractor
from stages.record import Document, Drop, DropReason
from tests.conftest import many_paragraphs_html, real_page_html


def doc(html, url="http://example.com/page"):
    return Document(id="x", url=url, source="web", html=html)


@pytest.fixture(scope="module")
def extractor():
    e = Extractor(ExtractConfig(timeout_s=30))
    e.setup()
    yield e
    e.teardown()


def test_gold_snippets_on_real_pages(extractor, gold_pages):
    """trafilatura with FineWeb's settings: most `with` snippets found, most `without` snippets absent."""
    found = expected = leaked = boilerplate = 0
    for html, url, with_snippets, without_snippets in gold_pages:
        result = extractor(doc(html, url or ""))
        text = result.text if isinstance(result, Document) else ""
        found += sum(s in text for s in with_snippets)
        expected += len(with_snippets)
        leaked += sum(s in text for s in without_snippets)
        boilerplate += len(without_snippets)
    assert expected > 40 and boilerplate > 40
    assert found / expected >= 0.75, f"recall of gold snippets {found}/{expected}"
    assert leaked / boilerplate <= 0.15, f"boilerplate leaked {leaked}/{boilerplate}"


def test_result_is_a_new_record_with_html_cleared(extractor):
    original = doc(real_page_html())
    result = extractor(original)
    assert isinstance(result, Document) and result is not original
    assert result.html is None and len(result.text) > 500
    assert original.html is not None and original.text == ""  # the input was not mutated


def test_in_process_mode_gives_the_same_text(extractor):
    page = doc(real_page_html("lemire.me.json.html"))
    in_process = Extractor(ExtractConfig(timeout_s=None))
    assert in_process(page).text == extractor(page).text


def test_too_large_page_is_not_parsed():
    e = Extractor(ExtractConfig(timeout_s=None, max_html_bytes=100_000))
    started = time.monotonic()
    result = e(doc(many_paragraphs_html(10_000)))  # ~0.6 MB; parsing it would take seconds
    assert isinstance(result, Drop) and result.reason is DropReason.TOO_LARGE and result.stage == "extract"
    assert time.monotonic() - started < 5
    # multi-byte characters count as bytes, not characters
    result = Extractor(ExtractConfig(timeout_s=None, max_html_bytes=1000))(doc("<p>" + "ü" * 600 + "</p>"))
    assert isinstance(result, Drop) and result.reason is DropReason.TOO_LARGE


def test_slow_page_times_out_and_the_worker_is_replaced():
    e = Extractor(ExtractConfig(timeout_s=0.5))
    e.setup()
    try:
        slow = e(doc(many_paragraphs_html(50_000)))  # trafilatura needs seconds for this page
        assert isinstance(slow, Drop) and slow.reason is DropReason.EXTRACT_TIMEOUT
        # the killed worker was replaced: the next page is extracted normally
        e.config = ExtractConfig(timeout_s=30)
        after = e(doc(real_page_html()))
        assert isinstance(after, Document) and len(after.text) > 500
    finally:
        e.teardown()


def test_a_worker_that_dies_mid_page_is_ledgered_saying_how_it_died():
    """The child's pipe closes before it is reaped: its end was reported as `exit None` (issue 54)."""
    import os
    import signal
    import threading

    e = Extractor(ExtractConfig(timeout_s=60))
    e.setup()
    try:
        threading.Timer(0.5, lambda: os.kill(e._worker._proc.pid, signal.SIGKILL)).start()
        died = e(doc(many_paragraphs_html(50_000)))  # seconds of work: killed in the middle of it
        assert isinstance(died, Drop) and died.reason is DropReason.EXTRACT_ERROR
        assert "extraction worker died (killed by SIGKILL (out of memory?))" in died.detail, died.detail
        assert isinstance(e(doc(real_page_html())), Document)  # and the next page goes to a new child
    finally:
        e.teardown()


def test_empty_and_textless_pages(extractor):
    assert extractor(doc("   ")).reason is DropReason.NO_TEXT
    nested = "<html><body>" + "<div>" * 100_000 + "deep" + "</div>" * 100_000 + "</body></html>"
    result = extractor(doc(nested))
    assert isinstance(result, Drop) and result.reason in (DropReason.NO_TEXT, DropReason.EXTRACT_ERROR)


def test_stage_pickles_without_its_worker(extractor):
    import pickle

    clone = pickle.loads(pickle.dumps(extractor))
    assert clone._worker is None and clone.config == extractor.config


def test_worker_that_cannot_start_is_an_environment_error_not_a_ledger_entry(tmp_path, monkeypatch):
    """A broken installation (the child imports a trafilatura that raises): every page would fail, so setup
    raises, naming the memory setting it started under."""
    from stages.record import StageEnvironmentError

    broken = tmp_path / "trafilatura"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('a broken trafilatura installation')\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned child starts with this process's sys.path
    e = Extractor(ExtractConfig(timeout_s=5, worker_memory_mb=512))
    with pytest.raises(StageEnvironmentError, match="did not start under extract.worker_memory_mb = 512: "
                                                     "extraction engine trafilatura: ImportError: a broken"):
        e.setup()


def test_a_worker_memory_cap_too_small_to_start_is_refused_naming_the_setting():
    from common.settings import ConfigError

    with pytest.raises(ConfigError, match="worker_memory_mb must be at least 256"):
        ExtractConfig(worker_memory_mb=1)


def test_fast_mode_counts_the_pages_it_leaves_without_text():
    """A real page where trafilatura's fast mode finds nothing and its fallback extractors find the article:
    fast mode drops it (as asked) and says so, in the detail and in a counter the funnel shows."""
    page = doc(real_page_html("rnz.de.witzel.html"))
    for timeout in (None, 30.0):  # in-process and in the extraction child alike
        fast = Extractor(ExtractConfig(fast=True, timeout_s=timeout))
        counted = []
        fast.count = lambda name, n=1, counted=counted: counted.append(name)
        fast.setup()
        try:
            result = fast(page)
            again = fast(doc(real_page_html("lemire.me.json.html")))  # text found: nothing counted
        finally:
            fast.teardown()
        assert isinstance(result, Drop) and result.reason is DropReason.NO_TEXT and "fast mode" in result.detail
        assert isinstance(again, Document) and counted == ["fast_mode_left_without_text"]
    full = Extractor(ExtractConfig(timeout_s=None))(page)
    assert isinstance(full, Document) and len(full.text) > 200
