"""robots.txt captures as input, and the decision for one host's pages (issue 59, item 1). Beam-free.

Most Common Crawl pages were fetched before their sites wrote rules for AI crawlers, so the rules are applied
after the crawl, from the robots.txt fetches the crawl itself keeps: per segment, `robotstxt/*.warc.gz` holds a
response record per fetch of `/robots.txt` (HTTP status, redirects with their Location, the fetch date). A team
that fetched current files itself gives a Parquet table of `host, fetch_date, status, body` (and `location`), or a
plain folder of the files (`<host>.txt` or `<host>/robots.txt`).

For one host, `HostRules.decide` picks the capture a page is judged by (`as_of: page`: the newest fetched at or
before the page, else the earliest after; `newest`: the newest), follows its redirects among the host's captures
and the one-hop captures of another host that were joined to it (RFC 9309 2.3.1.2; a redirect that cannot be
followed counts as unavailable, 4xx: everything allowed), and asks the chosen agents. A page is opted out when a
group naming one of them disallows its URL; a disallow by the `*` group alone, or a server error's "disallow all",
is recorded (`star_disallow`, `robots_unreachable`) but does not drop: the crawler obeyed those when it fetched.
"""
from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import quote, urljoin, urlsplit

from stages.optout.robots import MAX_BYTES, RobotsRules, product_token

REASON = "robots_ai_disallow"
MAX_REDIRECTS = 5
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


@dataclass(frozen=True)
class Capture:
    """One fetch of a host's robots.txt."""

    host: str
    scheme: str
    date: str             # ISO 8601 (the WARC-Date), "" when unknown
    status: int | None    # None: no answer
    body: bytes = b""
    location: str | None = None  # a redirect's target, absolute

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}/robots.txt"


def host_of(url: str) -> tuple[str, str] | None:
    """(host in lower case, without port and a final dot; scheme) of a URL, or None."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        return None
    return (host, (parts.scheme or "http").lower()) if host else None


def encoded(url: str) -> str:
    """The URL with its non-ASCII characters percent-encoded (as UTF-8), as crawlers match it (RFC 9309 2.2.2)."""
    return _NON_ASCII.sub(lambda m: quote(m.group(), safe=""), url)


def capture_from_response(url: str, date: str, status: int | None, body: bytes,
                          location: str | None) -> Capture | None:
    """A capture of a robots.txt response record, or None when the URL is not a host's /robots.txt."""
    found = host_of(url)
    if found is None or urlsplit(url).path != "/robots.txt":
        return None
    host, scheme = found
    target = urljoin(url, location) if location and status is not None and 300 <= status < 400 else None
    return Capture(host, scheme, date or "", status, body[:MAX_BYTES], target)


def _date(value: str | None) -> str:
    """An ISO 8601 date-time for ordering (dates of WARC records and Parquet tables; "" when unknown)."""
    if not value:
        return ""
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


class HostRules:
    """The captures of one host (and those of redirect targets joined to it), parsed on demand."""

    def __init__(self, captures: Iterable[Capture], agents: Sequence[str], as_of: str = "page"):
        self._captures = sorted(captures, key=lambda c: (c.date, c.scheme, c.status or 0, c.body, c.location or ""))
        self._by_url: dict[str, list[Capture]] = {}
        for capture in self._captures:
            self._by_url.setdefault(capture.url, []).append(capture)
        self._agents = [(agent, product_token(agent)) for agent in agents]
        self._as_of = as_of
        self._parsed: dict[int, RobotsRules] = {}  # by id(capture): hashing a 500 KiB body per page would cost

    def __bool__(self) -> bool:
        return bool(self._captures)

    def decide(self, host: str, scheme: str, url: str, page_date: str = "") -> tuple[str, str] | None:
        """None (keep; notes aside) or (reason, detail) for a page of `host`."""
        verdict, _ = self.judge(host, scheme, url, page_date)
        return verdict

    def judge(self, host: str, scheme: str, url: str, page_date: str = "",
              hop_out: bool = False) -> tuple[tuple[str, str] | None, str | None] | Hop:
        """(drop verdict or None, a note: "star_disallow", "robots_unreachable", "no_capture" or None). With
        `hop_out`, a redirect to another host whose captures are not here is a `Hop` for that host's group to
        finish (`resume`): the job sends the page to the target's captures, never the captures to every host."""
        chosen = self._choose(host, scheme, page_date)
        if chosen is None:
            return None, "no_capture"
        followed = self._follow(chosen, 0, host if hop_out else None)
        if isinstance(followed, Hop):
            return followed
        return self._verdict(chosen, *followed, url)

    def resume(self, hop: Hop, url: str) -> tuple[tuple[str, str] | None, str | None]:
        """judge's answer for a page whose robots.txt redirected here (`hop`), from this host's captures (one hop
        across hosts, as RFC 9309 2.3.1.2 allows five in all: a further hop to another host is not followed)."""
        targets = self._by_url.get(hop.location)
        start = Capture("", "", hop.date, 301, location=hop.location)
        if not targets:
            return self._verdict(start, start, RobotsRules.for_status(404), url, hop.source)
        followed = self._follow(start, hop.seen - 1, None)  # the hop here is counted in hop.seen
        return self._verdict(start, *followed, url, hop.source)

    def _verdict(self, chosen: Capture, capture: Capture, rules: RobotsRules, url: str,
                 source: str | None = None) -> tuple[tuple[str, str] | None, str | None]:
        target = encoded(url)
        for agent, token in self._agents:  # only the agents a group names can be told apart from the * group
            if token not in rules.named:
                continue
            decision = rules.decide(token, target)
            if not decision.allowed:
                when = f" (robots.txt fetched {capture.date})" if capture.date else ""
                via = f" via {source or chosen.url} -> {capture.url}" if capture is not chosen else ""
                return (REASON, f"{agent} {decision.describe()}{when}{via}"[:500]), None
        if rules.disallow_all:
            return None, "robots_unreachable"
        if rules.has_global and len(self._agents) > sum(t in rules.named for _, t in self._agents) \
                and not rules.decide("", target).allowed:
            return None, "star_disallow"  # an agent without a group of its own obeys the * group
        return None, None

    def _choose(self, host: str, scheme: str, page_date: str) -> Capture | None:
        """The capture that judges a page: of its own scheme if there is one, by `as_of`."""
        own = [c for c in self._captures if c.host == host]
        same = [c for c in own if c.scheme == scheme] or own
        if not same:
            return None
        if self._as_of == "newest" or not page_date:
            return same[-1]
        before = [c for c in same if c.date and c.date <= page_date]
        return before[-1] if before else same[0]

    def _follow(self, capture: Capture, seen: int, hop_from: str | None) -> tuple[Capture, RobotsRules] | Hop:
        """The capture a redirect chain ends in, and its rules (RFC 9309 2.3.1.2: five hops at most); with
        `hop_from` (the page's host), a Hop where the chain leaves for another host whose captures are not here."""
        first = capture
        while capture.location is not None:
            targets = self._by_url.get(capture.location)
            if not targets and hop_from is not None and seen < MAX_REDIRECTS:
                found = host_of(capture.location)
                if found and found[0] != hop_from:
                    return Hop(found[0], capture.location, capture.date, seen + 1, first.url)
            if not targets or seen >= MAX_REDIRECTS:
                return capture, RobotsRules.for_status(404)  # cannot be followed: unavailable, everything allowed
            later = [t for t in targets if t.date >= capture.date]
            capture, seen = (later[0] if later else targets[-1]), seen + 1
        rules = self._parsed.get(id(capture))
        if rules is None:
            rules = self._parsed[id(capture)] = RobotsRules.for_status(capture.status, capture.body)
        return capture, rules


class Hop(NamedTuple):
    """A page's robots.txt redirected to another host: where to (host, robots.txt URL), the date of the redirecting
    capture (the target's capture at or after it is followed), hops so far, and the page's own robots.txt URL."""

    host: str
    location: str
    date: str
    seen: int
    source: str


def redirect_targets(captures: Iterable[Capture]) -> Iterator[tuple[str, str]]:
    """(target host, source host) for each redirect to another host: the job joins the target's captures to the
    source's group (one hop across hosts)."""
    for capture in captures:
        if capture.location:
            found = host_of(capture.location)
            if found and found[0] != capture.host:
                yield found[0], capture.host
