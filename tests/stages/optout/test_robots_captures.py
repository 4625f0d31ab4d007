"""One host's robots.txt captures judging its pages (stages/optout/captures.py), without Beam."""
from __future__ import annotations

from stages.optout.capture_files import read_capture_warc
from stages.optout.captures import Capture, HostRules, capture_from_response, encoded
from tests.robots_warcs import robots_warc

AGENTS = ("GPTBot", "CCBot")


def capture(date: str, body: str = "", status: int = 200, host: str = "h.example", scheme: str = "https",
            location: str | None = None) -> Capture:
    return Capture(host, scheme, date, status, body.encode(), location)


def test_the_capture_before_the_page_judges_it_else_the_first_after():
    rules = HostRules([capture("2023-05-01", "User-agent: GPTBot\nDisallow: /\n"),
                       capture("2024-05-01", "User-agent: *\nAllow: /\n")], AGENTS)
    assert rules.decide("h.example", "https", "https://h.example/a", "2024-01-01")[0] == "robots_ai_disallow"
    assert rules.decide("h.example", "https", "https://h.example/a", "2024-06-01") is None
    assert rules.decide("h.example", "https", "https://h.example/a", "2020-01-01")[0] == "robots_ai_disallow"
    newest = HostRules(rules._captures, AGENTS, as_of="newest")
    assert newest.decide("h.example", "https", "https://h.example/a", "2024-01-01") is None


def test_the_pages_own_scheme_first():
    rules = HostRules([capture("2024-01-01", "User-agent: CCBot\nDisallow: /\n", scheme="http"),
                       capture("2024-01-01", "User-agent: *\nAllow: /\n", scheme="https")], AGENTS)
    assert rules.decide("h.example", "https", "https://h.example/a") is None
    assert rules.decide("h.example", "http", "http://h.example/a")[0] == "robots_ai_disallow"
    assert rules.decide("h.example", "ftp", "ftp://h.example/a") is None  # no capture of its scheme: the newest


def test_redirects_are_followed_and_a_dead_end_allows():
    start = capture("2024-01-01", status=301, scheme="http", location="https://www.h.example/robots.txt")
    target = capture("2024-01-01T00:00:01", "User-agent: GPTBot\nDisallow: /x\n", host="www.h.example")
    verdict = HostRules([start, target], AGENTS).decide("h.example", "http", "http://h.example/x/1")
    assert verdict[0] == "robots_ai_disallow" and "via http://h.example/robots.txt -> https://www.h.example/robots.txt" \
        in verdict[1]
    assert HostRules([start], AGENTS).judge("h.example", "http", "http://h.example/x/1") == (None, None)
    loop = [capture("2024-01-01", status=302, scheme=s, location=f"{t}://h.example/robots.txt")
            for s, t in (("http", "https"), ("https", "http"))]
    assert HostRules(loop, AGENTS).judge("h.example", "http", "http://h.example/x") == (None, None)


def test_notes_for_what_does_not_drop():
    star = HostRules([capture("2024-01-01", "User-agent: *\nDisallow: /\n")], AGENTS)
    assert star.judge("h.example", "https", "https://h.example/a") == (None, "star_disallow")
    down = HostRules([capture("2024-01-01", status=500)], AGENTS)
    assert down.judge("h.example", "https", "https://h.example/a") == (None, "robots_unreachable")
    assert HostRules([], AGENTS).judge("h.example", "https", "https://h.example/a") == (None, "no_capture")


def test_urls_are_matched_percent_encoded():
    assert encoded("https://h.example/café/ツ?q=ü") == "https://h.example/caf%C3%A9/%E3%83%84?q=%C3%BC"
    rules = HostRules([capture("2024-01-01", "User-agent: GPTBot\nDisallow: /café\n")], AGENTS)
    assert rules.decide("h.example", "https", "https://h.example/café/menu")[0] == "robots_ai_disallow"


def test_captures_come_from_robots_responses_only(tmp_path):
    path = robots_warc(tmp_path / "r.warc.gz", [
        ("https://a.example/robots.txt", "2024-02-01T00:00:00Z", "200 OK", "User-agent: *\nDisallow:\n", ()),
        ("https://a.example/robots.txt?x=1", "2024-02-01T00:00:00Z", "200 OK", "x", ()),
        ("https://b.example/other.txt", "2024-02-01T00:00:00Z", "200 OK", "x", ()),
        ("http://c.example:8080/robots.txt", "2024-02-02T00:00:00Z", "302 Found", "", (("Location", "/r2.txt"),))])
    with open(path, "rb") as fh:
        found = list(read_capture_warc(fh))
    assert [(c.host, c.status, c.date, c.location) for c in found] == [
        ("a.example", 200, "2024-02-01T00:00:00Z", None), ("a.example", 200, "2024-02-01T00:00:00Z", None),
        ("c.example", 302, "2024-02-02T00:00:00Z", "http://c.example:8080/r2.txt")]
    assert capture_from_response("https://a.example/robots.txt", "", 200, b"x" * 600_000, None).body == b"x" * 512_000
