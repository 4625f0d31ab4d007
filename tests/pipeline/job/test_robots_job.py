"""`--robots`: captures of sites' robots.txt files, in WARC files built like Common Crawl's, joined to their pages by
host: every drop is right and ledgered with the deciding agent, line and capture date; the rest is kept."""
import html
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.job.config import ConfigError
from pipeline.job.outdir import compare_outputs
from pipeline.job.run import run
from tests.conftest import SENTENCES_DIR, finished_rows
from tests.robots_warcs import page_warc, robots_warc

EN = [line for line in (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()
      if line.endswith(".") and len(line.split()) >= 8]
PAGE_DATE = "2024-03-01T10:00:00Z"

CAPTURES = [
    ("https://news.example/robots.txt", "2024-02-01T00:00:00Z", "200 OK",
     "# AI crawlers\nUser-agent: GPTBot\nDisallow: /\n\nUser-agent: *\nAllow: /\n", ()),
    ("https://blog.example/robots.txt", "2024-02-01T00:00:00Z", "200 OK", "User-agent: *\nDisallow: /private/\n", ()),
    ("https://shop.example/robots.txt", "2024-02-01T00:00:00Z", "404 Not Found", "<html>not found</html>", ()),
    ("https://forum.example/robots.txt", "2024-02-01T00:00:00Z", "503 Service Unavailable", "", ()),
    ("http://mag.example/robots.txt", "2024-02-01T00:00:00Z", "301 Moved Permanently", "",
     (("Location", "https://www.mag.example/robots.txt"),)),
    ("https://www.mag.example/robots.txt", "2024-02-01T00:00:01Z", "200 OK", "User-agent: CCBot\nDisallow: /articles/\n", ()),
    ("https://dated.example/robots.txt", "2023-01-01T00:00:00Z", "200 OK", "User-agent: *\nAllow: /\n", ()),
    ("https://dated.example/robots.txt", "2024-06-01T00:00:00Z", "200 OK", "User-agent: GPTBot\nDisallow: /\n", ()),
    ("https://wild.example/robots.txt", "2024-02-01T00:00:00Z", "200 OK",
     "User-agent: ClaudeBot\nDisallow: /*.pdf$\nDisallow: /drafts/*\n", ()),
    ("https://bom.example/robots.txt", "2024-02-01T00:00:00Z", "200 OK",
     "\ufeffUser-agent: Google-Extended\r\nDisallow: /\r\n", ()),
    # 600 KB: a rule after the first 500 KiB is not read (RFC 9309 2.5); one before it is
    ("https://big.example/robots.txt", "2024-02-01T00:00:00Z", "200 OK",
     "User-agent: GPTBot\nDisallow: /early/\n" + "# " + "x" * 998 + "\n" * 1 + ("# " + "y" * 998 + "\n") * 600
     + "Disallow: /\n", ()),
]
# URL -> the reason its page leaves the run by (None: kept), with the default settings
EXPECTED = {
    "https://news.example/2024/story": "robots_ai_disallow",
    "https://blog.example/private/notes": None,   # the * group alone: noted, not dropped
    "https://blog.example/public": None,
    "https://shop.example/item": None,            # 404: everything allowed
    "https://forum.example/thread": None,         # 503: "disallow all" holds for every crawler: noted
    "https://mag.example/articles/1": "robots_ai_disallow",  # via the redirect to www.mag.example
    "https://mag.example/about": None,
    "https://dated.example/a": None,              # judged by the 2023 capture, the one before the page
    "https://wild.example/drafts/one": "robots_ai_disallow",
    "https://wild.example/report.html": None,
    "https://bom.example/x": "robots_ai_disallow",
    "https://nocapture.example/y": None,
    "https://big.example/early/page": "robots_ai_disallow",
    "https://big.example/late/page": None,
}


def page(start: int) -> bytes:
    body = "".join(f"<p>{html.escape(s)}</p>\n" for s in (EN * 2)[start:start + 10])
    return f"<html><head><title>Page {start}</title></head><body><article>{body}</article></body></html>".encode()


@pytest.fixture(scope="module")
def warcs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("robots")
    robots = robots_warc(folder / "CC-MAIN-robotstxt-00000.warc.gz", CAPTURES)
    pages = page_warc(folder / "pages.warc.gz", [(url, PAGE_DATE, page(6 * i)) for i, url in enumerate(EXPECTED)])
    return robots, pages


def outcome(out):
    ledger = {r["url"]: r for r in pq.read_table(str(out / "ledger")).to_pylist()}
    kept = {r["url"] for r in finished_rows(out)}
    return ledger, kept


def test_robots_captures_decide_by_host(tmp_path, warcs):
    robots, pages = warcs
    report = run(["--input", str(pages), "--robots", str(robots), "--output", str(tmp_path / "out"), "--quiet"])
    ledger, kept = outcome(tmp_path / "out")
    assert {url: ledger[url]["reason"] if url in ledger else None for url in EXPECTED} == EXPECTED
    assert kept == {url for url, reason in EXPECTED.items() if reason is None}
    news = ledger["https://news.example/2024/story"]
    assert (news["stage"], news["lang"]) == ("robots", "en")
    assert news["detail"] == "GPTBot disallowed by line 3: Disallow: / (robots.txt fetched 2024-02-01T00:00:00Z)"
    assert news["value"] > 100  # the tokens honouring it cost
    assert "via http://mag.example/robots.txt -> https://www.mag.example/robots.txt" in \
        ledger["https://mag.example/articles/1"]["detail"]
    funnel = {row["stage"]: row for row in report["funnel"]}
    assert funnel["robots"]["notes"] == {"captures_read": 11, "star_disallow": 1, "robots_unreachable": 1,
                                         "no_capture": 1}
    assert report["conservation"]["holds"]
    assert report["optout"]["removed"]["robots_ai_disallow"]["en"]["documents"] == 5
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["optout"]["robots"] == [str(robots)]


def test_two_worker_processes_write_the_same_bytes(tmp_path, warcs):
    """The join's groupings on another runner setting (two worker processes): shards, ledger and report alike."""
    robots, pages = warcs
    args = ["--input", str(pages), "--robots", str(robots), "--quiet"]
    one = run(args + ["--output", str(tmp_path / "one")])
    two = run(args + ["--output", str(tmp_path / "two"), "--direct_running_mode=multi_processing",
                      "--direct_num_workers=2"])
    assert compare_outputs(str(tmp_path / "one"), str(tmp_path / "two")) == []
    assert one["funnel"] == two["funnel"] and one["optout"] == two["optout"]


def test_a_killed_run_resumes_to_the_same_bytes(tmp_path, warcs):
    """SIGKILL after phase 1 (the join not yet run), then --resume: the uninterrupted run's output, byte for byte."""
    import os
    import subprocess
    import sys

    from pipeline.job.faults import KILL_ENV

    robots, pages = warcs
    args = ["--input", str(pages), "--robots", str(robots), "--quiet"]
    run(args + ["--output", str(tmp_path / "whole")])
    env = dict(os.environ, **{KILL_ENV: "prepared:1"})
    killed = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", *args, "--output", str(tmp_path / "out")],
                            capture_output=True, text=True, env=env, timeout=600)
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed = run(args + ["--output", str(tmp_path / "out"), "--resume"])
    assert resumed["prepared"]["files_reused"] == 1 and resumed["conservation"]["holds"]
    assert compare_outputs(str(tmp_path / "whole"), str(tmp_path / "out")) == []


def test_the_newest_capture_and_a_table_of_captures(tmp_path, warcs):
    """`robots_as_of: newest` judges the dated site by its 2024-06 file; the same captures as a Parquet table
    (host, fetch_date, status, body, location) decide as the WARC does."""
    robots, pages = warcs
    run(["--input", str(pages), "--robots", str(robots), "--output", str(tmp_path / "newest"), "--quiet",
         "--optout-robots-as-of", "newest"])
    ledger, _ = outcome(tmp_path / "newest")
    assert ledger["https://dated.example/a"]["reason"] == "robots_ai_disallow"

    rows = [{"host": url.split("/")[2], "scheme": url.split(":")[0], "fetch_date": date,
             "status": int(status.split()[0]), "body": body.encode("utf-8"),
             "location": dict(headers).get("Location")} for url, date, status, body, headers in CAPTURES]
    table = tmp_path / "robots.parquet"
    pq.write_table(pa.Table.from_pylist(rows), table)
    run(["--input", str(pages), "--robots", str(table), "--output", str(tmp_path / "table"), "--quiet"])
    ledger, _ = outcome(tmp_path / "table")
    assert {url: ledger[url]["reason"] if url in ledger else None for url in EXPECTED} == EXPECTED

    # files a team fetched itself, in a plain folder: HOST.txt or HOST/robots.txt (status 200)
    folder = tmp_path / "fetched"
    (folder / "wild.example").mkdir(parents=True)
    (folder / "news.example.txt").write_text(CAPTURES[0][3], encoding="utf-8")
    (folder / "wild.example" / "robots.txt").write_text(CAPTURES[8][3], encoding="utf-8")
    run(["--input", str(pages), "--robots", str(folder), "--output", str(tmp_path / "folder"), "--quiet"])
    ledger, _ = outcome(tmp_path / "folder")
    assert sorted(url for url, r in ledger.items() if r["stage"] == "robots") == [
        "https://news.example/2024/story", "https://wild.example/drafts/one"]


def test_robots_inputs_that_name_nothing_are_one_error(tmp_path, warcs):
    _, pages = warcs
    with pytest.raises(ConfigError, match="no robots.txt captures there"):
        run(["--input", str(pages), "--robots", str(tmp_path / "none-*.warc.gz"), "--output", str(tmp_path / "o")])
