"""Main-text extraction (trafilatura, Resiliparse or a cascade of both: stages/extraction/engines.py),
bounded in size and time.

trafilatura has no time limit of its own and a pathological page can run for
minutes, so by default extraction runs in a child process that is killed and
replaced when one page takes too long (a thread cannot be stopped, and SIGALRM
only works on the main thread, which Beam workers do not give us). The child is
a fresh interpreter (stages/processes.py `start_child`): Beam workers run gRPC
threads, and forking a threaded process can deadlock; multiprocessing's spawn
would import the user's script again.
"""
from __future__ import annotations

import contextlib
import resource
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import Any

from common.settings import check
from stages.extraction import engines
from stages.extraction.engines import ENGINES
from stages.origin import canonical_url
from stages.processes import die_with_parent, start_child
from stages.record import Document, DropReason, Stage, StageEnvironmentError, StageResult
from stages.table import EXTRACT, StageSpec

STAGE = "extract"
CASCADE_FALLBACKS = ("fast", "full")
_STARTUP_TIMEOUT_S = 120


MIN_WORKER_MEMORY_MB = 256


@dataclass(frozen=True)
class ExtractConfig:
    """Main-text extraction: trafilatura (FineWeb), Resiliparse (DCLM) or a cascade of the two."""

    # trafilatura: best text, ~15 ms a page; resiliparse: DCLM's extractor, ~10x faster, more boilerplate;
    # cascade: Resiliparse, then trafilatura on the pages a check says it would do better on
    # (bench/RESULTS.md "Extraction engines": F1 and speed of each; docs/stages.md "Choosing an extraction engine").
    engine: str = "trafilatura"
    # cascade: fall back to trafilatura when the check's probability that it does better is at least this;
    # lower = more pages through trafilatura (0.2: ~55 % of article pages, F1 within 1 point of trafilatura's;
    # more of general crawl pages: bench/RESULTS.md "Extraction engines").
    cascade_threshold: float = 0.2
    # cascade: how trafilatura runs on the pages sent to it. fast: its fast mode, with Resiliparse's text kept
    # where trafilatura finds none (the cascade already holds a second extraction, so trafilatura's own fallback
    # extractors, readability and jusText, buy little: at 0.2, F1 0.912 for 47 % of trafilatura's extraction time;
    # full: 0.914 for 73 %, or 0.909 for 54 % at 0.3; sites the check was not fitted on); full: as the
    # trafilatura engine runs it.
    cascade_fallback: str = "fast"
    # FineWeb's settings (datatrove Trafilatura): precision over recall, no comments, no images.
    favor_precision: bool = True
    include_comments: bool = False
    include_tables: bool = True
    # trafilatura's `deduplicate` keeps a process-wide cache of seen paragraphs, so a page's
    # text would depend on which pages the same worker saw before: off, for reproducibility.
    deduplicate: bool = False
    # trafilatura's fast mode skips the fallback extractors (readability, jusText) that run when its
    # own result looks too short; bench/extract_agreement.py measures what that changes.
    fast: bool = False
    # Same output, faster (stages/extraction/trafilatura_speedups.py): trafilatura's XPath selectors compiled
    # to Python, lxml.html's element classes looked up in C. Off = trafilatura as shipped.
    speedups: bool = True
    # Per-page time limit in seconds; None runs in-process with no limit (tests, benchmarks).
    # datatrove uses 1 s; we allow 5 s because shared machines stall, and a spurious timeout
    # would make output depend on machine load.
    timeout_s: float | None = 5.0
    # Decoded HTML larger than this is not parsed: cost grows with size, and real article
    # pages are far smaller (the benchmark WARC averages 140 KB; Common Crawl caps at 1-5 MiB).
    max_html_bytes: int = 5 * 1024 * 1024
    # Address-space cap for the extraction child, so one page cannot exhaust the worker's RAM.
    worker_memory_mb: int = 4096

    def __post_init__(self):
        check(self.engine in ENGINES, f"engine must be one of {', '.join(ENGINES)}")
        check(0.0 <= self.cascade_threshold <= 1.0, "cascade_threshold must be between 0 and 1")
        check(self.cascade_fallback in CASCADE_FALLBACKS, f"cascade_fallback must be {' or '.join(CASCADE_FALLBACKS)}")
        check(self.timeout_s is None or self.timeout_s > 0, "timeout_s must be positive (or none for no limit)")
        check(self.max_html_bytes > 0, "max_html_bytes must be positive")
        check(self.worker_memory_mb >= MIN_WORKER_MEMORY_MB,
              f"worker_memory_mb must be at least {MIN_WORKER_MEMORY_MB}: the extraction child needs ~60 MB "
              "of address space to start, and pages need more")

    def trafilatura_options(self) -> dict[str, Any]:
        """What `extract_text` takes: trafilatura's keyword arguments plus `speedups`."""
        return dict(favor_precision=self.favor_precision, include_comments=self.include_comments,
                    include_tables=self.include_tables, include_images=False,
                    deduplicate=self.deduplicate, fast=self.fast, speedups=self.speedups)

    def engine_options(self) -> dict[str, Any]:
        """What `extract_page` takes: the engine, its settings and trafilatura's."""
        return dict(engine=self.engine, cascade_threshold=self.cascade_threshold, cascade_fallback=self.cascade_fallback,
                    include_comments=self.include_comments, trafilatura=self.trafilatura_options())


def use_speedups(on: bool) -> None:
    """Install (or remove) the trafilatura speedups in this process, once: a worker calls it when it
    starts; later calls with the same value cost one comparison."""
    from stages.extraction import trafilatura_speedups

    if trafilatura_speedups.state() is on:
        return
    if on:
        trafilatura_speedups.install()
    else:
        trafilatura_speedups.uninstall()


def extract_text(html: str, url: str | None, options: dict[str, Any]) -> str | None:
    """The extraction itself, no limits: trafilatura's main text or None."""
    import trafilatura  # imported here so the parent process of a worker need not load it

    options = dict(options)
    use_speedups(options.pop("speedups", True))
    return trafilatura.extract(html, url=url or None, **options)


def extract_trafilatura(html: str, url: str | None, options: dict[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """(text, notes): the note `fast_mode_left_without_text` when fast mode found no text but trafilatura's
    fallbacks would have (the full extraction runs again on those pages only, to count what fast mode gives up)."""
    text = extract_text(html, url, options)
    if text and text.strip() or not options.get("fast"):
        return text, ()
    full = extract_text(html, url, {**options, "fast": False})
    return text, (("fast_mode_left_without_text",) if full and full.strip() else ())


def extract_page(html: str, url: str | None, options: dict[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """(text, notes to count) by `ExtractConfig.engine_options()`: the engine's main text, no limits."""
    engine = options["engine"]
    if engine == "trafilatura":
        return extract_trafilatura(html, url, options["trafilatura"])
    if engine == "resiliparse":
        return engines.resiliparse_text(html, options["include_comments"]), ()
    check, page = engines.load_check(), engines.page_features(html)
    if engines.page_check_sends_on(page, check, options["cascade_threshold"]):
        text, notes = cascade_fallback(html, url, options, None)
        return text, ("cascade_sent_on_by_page_check", *notes)
    fast = engines.cascade_fast_text(html, options["include_comments"])
    if fast.strip() and engines.trafilatura_would_do_better(fast, html, check, page) < options["cascade_threshold"]:
        broken = engines.fast_text_is_broken(fast, html) if options.get("cascade_guard", True) else None
        if broken is None:
            return fast, ("cascade_kept_resiliparse",)
        text, notes = cascade_fallback(html, url, options, fast)
        return text, (f"cascade_guard_{broken}", *notes)
    return cascade_fallback(html, url, options, fast)


def cascade_fallback(html: str, url: str | None, options: dict[str, Any],
                     fast: str | None) -> tuple[str | None, tuple[str, ...]]:
    """The cascade on a page its check sends on (`fast`: Resiliparse's text of it; None: not made yet), by
    `cascade_fallback`: trafilatura as its engine runs it, or its fast mode with Resiliparse's text standing in
    where that finds none."""
    if options["cascade_fallback"] == "full":
        text, notes = extract_trafilatura(html, url, options["trafilatura"])
        return text, ("cascade_fell_back_to_trafilatura", *notes)
    text = extract_text(html, url, {**options["trafilatura"], "fast": True})
    if text and text.strip() and engines.too_few_words(text):
        # fast mode found a few lines that Gopher's length rule would drop: trafilatura's own fallbacks, as its
        # engine runs it, often find the article (bench/cascade_articles.py)
        full = extract_text(html, url, {**options["trafilatura"], "fast": False})
        if full and len(full) > len(text):
            return full, ("cascade_fell_back_to_trafilatura", "cascade_fast_mode_too_short_ran_full")
    if text and text.strip():
        return text, ("cascade_fell_back_to_trafilatura",)
    if fast is None:
        fast = engines.cascade_fast_text(html, options["include_comments"])
    if fast.strip():  # Resiliparse's text stands in for trafilatura's fallbacks
        return fast, ("cascade_fell_back_to_trafilatura", "cascade_kept_resiliparse_where_trafilatura_found_none")
    return text, ("cascade_fell_back_to_trafilatura",)


def prepare_engine(options: dict[str, Any]) -> None:
    """Imports and loads what the engine needs, so the first page's clock does not pay for it."""
    if options["engine"] != "resiliparse":  # trafilatura, or the cascade's fallback
        import trafilatura  # noqa: F401

        use_speedups(options["trafilatura"].get("speedups", True))
    if options["engine"] != "trafilatura":
        engines.resiliparse_text("<p>Refinery</p>", False)
    if options["engine"] == "cascade":
        engines.load_check()


class Extractor(Stage):
    """Stage: html -> text. Call `setup()` before use and `teardown()` after (Beam does both)."""

    name = STAGE

    def __init__(self, config: ExtractConfig = ExtractConfig()):
        self.config = config
        self._worker: _ExtractionWorker | None = None

    def setup(self) -> None:
        """Start the extraction child now, so a broken installation fails here, not page by page."""
        if self.config.timeout_s is None:  # extraction in this process
            prepare_engine(self.config.engine_options())
        elif self._worker is None:
            self._worker = _ExtractionWorker(self.config.engine_options(), self.config.worker_memory_mb)
            self._worker.start()

    def check(self) -> None:
        """Extract one tiny page in this process: raises StageEnvironmentError if the engine is unusable."""
        try:
            extract_page("<html><body><p>Refinery installation check.</p></body></html>", None,
                         self.config.engine_options())
        except Exception as exc:
            raise StageEnvironmentError(f"extract.engine {self.config.engine} cannot run here: "
                                        f"{type(exc).__name__}: {exc}") from exc

    def teardown(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __call__(self, doc: Document) -> StageResult:
        html = doc.html or ""
        # A character is 1-4 UTF-8 bytes: only encode (a copy) when the page could be over the cap.
        size = len(html.encode("utf-8", "surrogatepass")) if len(html) * 4 > self.config.max_html_bytes else len(html)
        if size > self.config.max_html_bytes:
            return doc.drop(STAGE, DropReason.TOO_LARGE, f"{size} bytes of HTML > {self.config.max_html_bytes}")
        if not html.strip():
            return doc.drop(STAGE, DropReason.NO_TEXT, "empty page")
        if self._worker is None:
            if self.config.timeout_s is not None:
                self.setup()
            else:
                return self._finish(doc, extract_page(html, doc.url, self.config.engine_options()), None)
        result, error = self._worker.extract(html, doc.url, self.config.timeout_s)
        return self._finish(doc, result, error)

    def _finish(self, doc: Document, result: tuple[str | None, tuple[str, ...]] | None,
                error: tuple[DropReason, str] | None) -> StageResult:
        if error is not None:
            return doc.drop(STAGE, *error)
        text, notes = result
        for note in notes:  # the funnel says how often the cascade fell back, what extract.fast costs
            self.count(note)
        if not text or not text.strip():
            if "fast_mode_left_without_text" in notes:
                return doc.drop(STAGE, DropReason.NO_TEXT, "no main text found by fast mode (trafilatura's "
                                                           "fallback extractors would have found some)")
            return doc.drop(STAGE, DropReason.NO_TEXT, "no main text found")
        canonical = canonical_url(doc.html or "", doc.url)  # the page's own word on where its original is
        metadata = {**doc.metadata, "canonical_url": canonical} if canonical else doc.metadata
        return doc.replace(text=text.strip(), html=None, metadata=metadata)

    def __getstate__(self):  # Beam pickles stages; a live child process does not travel
        return {"config": self.config, "_worker": None}


class _ExtractionWorker:
    """A child process running `extract_page`, replaced whenever it times out or dies."""

    def __init__(self, options: dict[str, Any], memory_mb: int):
        self._options = options
        self._memory_mb = memory_mb
        self._proc = None
        self._conn = None

    def start(self) -> None:
        with _sigint_ignored_in_children():
            self._proc, self._conn = start_child(f"{__name__}:_worker_main", self._options, self._memory_mb)
        # Wait for the child's imports, so start-up never counts against a page's time limit.
        try:
            message = self._conn.recv() if self._conn.poll(_STARTUP_TIMEOUT_S) \
                else ("failed", f"no answer in {_STARTUP_TIMEOUT_S} s")
        except (EOFError, OSError) as exc:
            message = ("failed", f"child exited ({type(exc).__name__}, {_how_it_ended(self._proc)})")
        if message != ("ready", None):
            self.close()
            raise StageEnvironmentError(f"extraction worker did not start under extract.worker_memory_mb = "
                                        f"{self._memory_mb}: {message[1]}")

    def extract(self, html: str, url: str, timeout_s: float) -> tuple[tuple[str | None, bool] | None,
                                                                       tuple[DropReason, str] | None]:
        """((text, notes to count), None) or (None, (reason, detail))."""
        if self._proc is None or self._proc.poll() is not None:
            self.start()
        try:
            self._conn.send((html, url))
            if not self._conn.poll(timeout_s):
                self.close()
                return None, (DropReason.EXTRACT_TIMEOUT, f"no result after {timeout_s:g} s")
            status, value = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:  # the child died (e.g. out of memory)
            how = _how_it_ended(self._proc)
            self.close()
            return None, (DropReason.EXTRACT_ERROR, f"extraction worker died ({how}): {type(exc).__name__}")
        if status == "ok":
            return value, None
        return None, (DropReason.EXTRACT_ERROR, value)

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn = None, None


def _how_it_ended(proc) -> str:
    """A dead child's end in words: its pipe closes before it is reaped, so wait for that first (its exit code
    was read as None)."""
    if proc is None:
        return "no process"
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        code = None
    if code is None:
        return "still running after its pipe closed"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return f"killed by {name}" + (" (out of memory?)" if -code == signal.SIGKILL else "")
    return f"exit code {code}"


@contextlib.contextmanager
def _sigint_ignored_in_children():
    """Ctrl-C reaches the whole process group. The parent handles it and ends the extraction child
    (which also leaves when the parent's end of the pipe closes); the child must not print a traceback
    of its own, even while it is still starting, so it is started with SIGINT ignored (inherited across
    exec; Python then installs no handler). Only the main thread may change signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _worker_main(conn, options: dict[str, Any], memory_mb: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # also when started from a thread other than the main one
    die_with_parent()  # a kill -9 of the parent mid-page must not leave this child running
    if memory_mb:
        # Never above the limits this process already has (e.g. under `ulimit -v`): raising one is refused.
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = min([memory_mb * 1024 * 1024] + [x for x in (soft, hard) if x != resource.RLIM_INFINITY])
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    # Pay the engine's imports and set-up once, before the first page's clock starts.
    try:
        prepare_engine(options)
    except Exception as exc:  # e.g. ImportError of an optional lxml part: tell the parent why
        _answer(conn, ("failed", f"extraction engine {options['engine']}: {type(exc).__name__}: {exc}"))
        return
    if not _answer(conn, ("ready", None)):
        return
    while True:
        try:
            html, url = conn.recv()
        except (EOFError, OSError):
            return
        try:
            result = ("ok", extract_page(html, url, options))
        except MemoryError:
            result = ("error", "MemoryError: page needs more than the worker memory cap")
        except Exception as exc:  # lxml and trafilatura raise many types on broken markup
            result = ("error", f"{type(exc).__name__}: {exc}"[:300])
        if not _answer(conn, result):
            return


def _answer(conn, message) -> bool:
    """Send to the parent; False when it is gone (stopped, or it gave up on this page)."""
    try:
        conn.send(message)
    except OSError:
        return False
    return True


SPEC = StageSpec(
    name=STAGE, order=10, runs=EXTRACT, config=ExtractConfig, build=Extractor,
    about="main text by `extract.engine`: trafilatura, resiliparse or cascade (HTML documents only)",
    reasons={
        DropReason.TOO_LARGE: "HTML over `extract.max_html_bytes`",
        DropReason.EXTRACT_TIMEOUT: "extraction exceeded `extract.timeout_s`",
        DropReason.EXTRACT_ERROR: "the engine raised, or its worker died (e.g. memory cap)",
        DropReason.NO_TEXT: "no main text found"})
