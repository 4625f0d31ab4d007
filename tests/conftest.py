"""Shared fixtures: paths to the bundled real data, and a WARC writer for crafted edge cases."""
from __future__ import annotations

import gzip
import io
import json
import pathlib
import random
import uuid

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

REPO = pathlib.Path(__file__).resolve().parents[1]
WARC_DIR = REPO / "data" / "warc"
TEST_DATA = REPO / "tests" / "data"
HTML_DIR = TEST_DATA / "html"
SENTENCES_DIR = TEST_DATA / "multilingual" / "sentences"
# Small real samples kept in the repo, so a user's clone (no ../shared) still exercises each stage
DAVIDSON_SAMPLE = TEST_DATA / "harmful" / "davidson_labeled_sample.csv"
MULTILINGUAL_SAMPLE = TEST_DATA / "multilingual"   # ntrex128/: the first 40 NTREX documents in 9 languages
# The workspace's full data sets: CI has them, a user's clone does not (tests that need them skip, saying so)
SHARED_DATA = REPO.parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"needs the full data sets in {SHARED_DATA}, "
                                                                    "which only the project's workspace and CI have")

# The test files that take longest (`pytest --durations=0`, 2026-12-04, second run of the day: 152 s down to 37 s each),
# run first. With `--dist loadfile` a file runs whole on one worker in collection order, and tests/training/ (collected
# last) kept one worker busy alone at the end of the suite; longest first is the usual cure for that tail.
LONGEST_FIRST = ("training/test_train_runs.py", "pipeline/engines/test_portable.py", "reliability/test_run_failures.py",
                 "training/test_signals.py", "training/test_data_to_model.py", "pipeline/engines/test_slurm.py",
                 "pipeline/job/test_resume.py", "pipeline/test_object_store.py", "pipeline/job/test_robots_job.py",
                 "pipeline/commands/test_plan.py", "reliability/test_processes.py", "pipeline/job/test_paragraph_dedup.py",
                 "pipeline/test_cli.py")


def pytest_configure(config):
    config.addinivalue_line("markers", "job: runs a whole job or process (tests/tiers.py); `make test-fast` leaves "
                                       "these out")


def pytest_collection_modifyitems(config, items):
    from tests.tiers import is_job_test

    for item in items:
        if is_job_test(item):
            item.add_marker(pytest.mark.job)
    rank = {f"tests/{name}": i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: files stay whole


CC_EXCERPT = WARC_DIR / "resiliparse_CC-MAIN-2020-34_warcfile.warc.gz"
CLIPPED = WARC_DIR / "resiliparse_clipped.warc.gz"
WAYBACK = WARC_DIR / "copycat_wayback-topic-02.warc.gz"
WARCIO_EXAMPLE = WARC_DIR / "warcio_example.warc.gz"


@pytest.fixture(scope="session")
def gold_pages():
    """[(html, url, with_snippets, without_snippets)] for the bundled trafilatura pages."""
    evaldata = json.loads((HTML_DIR / "evaldata.json").read_text(encoding="utf-8"))
    pages = []
    for url, entry in sorted(evaldata.items()):
        html = (HTML_DIR / entry["file"]).read_bytes().decode("utf-8", errors="replace")
        pages.append((html, None if url.startswith("hard::") else url, entry.get("with", []), entry.get("without", [])))
    return pages


def real_page_html(name: str = "boingboing.net.millenials.html") -> str:
    return (HTML_DIR / name).read_text(encoding="utf-8", errors="replace")


def many_paragraphs_html(n: int) -> str:
    """Valid HTML that trafilatura handles in time superlinear in n (~10 s for n=100,000 here)."""
    return "<html><body>" + "<p>The quick brown fox jumps over the lazy dog again.</p>" * n + "</body></html>"


def finished_rows(out: pathlib.Path, columns=None) -> list[dict]:
    """The documents a run kept: its training shards (data/) and its validation split (valid/data/), which holds
    out a share of the kept documents by a hash of their id. A test of what is kept reads both."""
    import pyarrow.parquet as pq

    return [row for split in ("data", "valid/data") if (out / split).is_dir()
            for row in pq.read_table(str(out / split), columns=columns).to_pylist()]


class ReproducibleWARCWriter(WARCWriter):
    """warcio's gzipping writer with each record's WARC-Record-ID numbered in writing order and WARC-Date fixed
    (unless a record names its own), so a test's WARC is the same bytes on every run: a document's id holds its
    record's offset, and with random ids the compressed lengths, the offsets and so the ids (and which documents the
    id-hashed validation split holds out) changed from run to run."""

    DATE = "2024-01-01T00:00:00Z"

    def __init__(self, fh):
        super().__init__(fh, gzip=True)
        self._records = 0

    def _make_warc_id(self):
        self._records += 1
        return f"<urn:uuid:{uuid.UUID(int=self._records)}>"

    def curr_warc_date(self):
        return self.DATE


class WarcBuilder:
    """Writes a real gzipped WARC with warcio: response records with whatever payload a test needs."""

    def __init__(self, path: pathlib.Path):
        self.path = path
        self._fh = open(path, "wb")
        self._writer = ReproducibleWARCWriter(self._fh)

    def response(self, url: str, body: bytes, *, content_type: str = "text/html; charset=utf-8",
                 status: str = "200 OK", extra_http=()) -> WarcBuilder:
        http = StatusAndHeaders(status, [("Content-Type", content_type), *extra_http], protocol="HTTP/1.1")
        record = self._writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
        self._writer.write_record(record)
        return self

    def close(self) -> pathlib.Path:
        self._fh.close()
        return self.path


@pytest.fixture
def warc_builder(tmp_path):
    builders = []

    def make(name: str = "crafted.warc.gz") -> WarcBuilder:
        builders.append(WarcBuilder(tmp_path / name))
        return builders[-1]

    yield make
    for b in builders:
        if not b._fh.closed:
            b._fh.close()


def pathological_warc(path: pathlib.Path) -> dict:
    """A WARC of hostile records, each with the (stage, reason) it must end in; returns {url: expected}."""
    good = real_page_html().encode("utf-8")
    rng = random.Random(0)
    chunked_gzip = gzip.compress(good)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunked_gzip[i:i + 4096]), chunked_gzip[i:i + 4096])
                       for i in range(0, len(chunked_gzip), 4096)) + b"0\r\n\r\n"
    b = WarcBuilder(path)
    expected = {}

    def add(url, body, expect, **kw):
        b.response(url, body, **kw)
        expected[url] = expect

    add("http://t.example/good", good, None)
    add("http://t.example/wget-chunked-gzip", chunked, None,
        extra_http=[("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")])
    add("http://t.example/huge-20mb", b"<html><body>" + b"<p>word salad here.</p>" * 900_000 + b"</body></html>",
        ("warc", "too_large"))  # decoded size over the HTML cap: never leaves the reader
    add("http://t.example/deeply-nested", b"<html><body>" + b"<div>" * 100_000 + b"deep text" + b"</div>" * 100_000
        + b"</body></html>", ("extract", "no_text"))
    add("http://t.example/binary", rng.randbytes(50_000), ("warc", "binary_content"))
    add("http://t.example/empty", b"", ("warc", "empty_payload"))
    add("http://t.example/image.png", rng.randbytes(1000), ("warc", "non_html"), content_type="image/png")
    add("http://t.example/missing", b"<html><body>Not found</body></html>", ("warc", "http_status"),
        status="404 Not Found")
    add("http://t.example/bad-gzip", b"\x1f\x8b\x08\x00garbage that is not deflate", ("warc", "undecodable"),
        extra_http=[("Content-Encoding", "gzip")])
    b.close()
    return expected


def built_once(tmp_path_factory, name: str, build):
    """`build(folder)`'s result, built by one test process of the session and read by the others (pytest-xdist
    workers share the session's temporary root): a demo run or training shards cost ~9 s each time they are built.
    `build` writes below `folder` and returns what pickle can hold; without xdist, or while another worker builds
    it (waiting would leave a core idle), a folder of this process's own."""
    import fcntl
    import os
    import pickle
    import shutil

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent  # the session's root: popen-gw0/, popen-gw1/, ... lie below it
    folder, result = root / f"built-{name}", root / f"built-{name}.pickle"
    with open(root / f"built-{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another worker is building it now: a copy of our own costs no more than waiting
            return build(tmp_path_factory.mktemp(name))
        if not result.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed in another worker: fail here the same way
            folder.mkdir()
            value = build(folder)
            result.write_bytes(pickle.dumps(value))
        return pickle.loads(result.read_bytes())
