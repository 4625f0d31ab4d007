"""Evidence of which copy of a text is the original, for the owner of a repeated paragraph (paragraph dedup).

The copy the quality model likes best is not the original: syndicated news keeps the agency's text, an answer
quotes its source, a scraper republishes an article. What a page says about itself is better evidence, in this
order: a `<link rel="canonical">` naming another URL (the page declares itself a copy); the earliest date the
text is known to have existed (the HTTP Last-Modified header, the capture date of a Wayback copy, the fetch
date, a text record's own date); then quality, length and id only to break ties.
"""
from __future__ import annotations

import email.utils
import re
from collections.abc import Mapping
from datetime import date, datetime, timezone
from typing import Any
from urllib.parse import urljoin, urlsplit

HEAD_CHARS = 100_000  # <link rel=canonical> belongs in the head: only the page's start is looked at
_LINK = re.compile(r"<link\b[^>]{0,2000}>", re.IGNORECASE)  # bounded: linear on any page
_CANONICAL = re.compile(r"""\brel\s*=\s*["']?\s*canonical\b""", re.IGNORECASE)
_HREF = re.compile(r"""\bhref\s*=\s*(?:"([^"]{1,2000})"|'([^']{1,2000})'|([^\s>"']{1,2000}))""", re.IGNORECASE)
_WAYBACK = re.compile(r"^https?://web\.archive\.org/web/([^/]*)/(.+)$", re.IGNORECASE)
NO_DATE = "~"  # sorts after every ISO date: a page without a date has no evidence of being early


def canonical_url(html: str, url: str) -> str | None:
    """The absolute URL of the page's `<link rel="canonical">`, or None."""
    for link in _LINK.finditer(html, 0, min(len(html), HEAD_CHARS)):
        tag = link.group()
        if _CANONICAL.search(tag):
            href = _HREF.search(tag)
            if href:
                value = next(g for g in href.groups() if g is not None).strip()
                try:
                    return urljoin(url, value)[:2000] if value else None
                except ValueError:
                    return None
    return None


def http_date(value: str | None) -> str | None:
    """An HTTP date (Last-Modified) as ISO 8601 UTC, or None when it cannot be read."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _same_page(a: str, b: str) -> bool:
    def key(u: str) -> tuple[str, str]:
        try:
            parts = urlsplit(u)
        except ValueError:
            return u, ""
        return (parts.hostname or "").removeprefix("www."), parts.path.rstrip("/") or "/"
    return key(a) == key(b)


def wayback_capture(url: str | None) -> tuple[str, str] | None:
    """(capture stamp, archived URL) of a Wayback Machine copy (web.archive.org/web/STAMP/URL), else None."""
    wayback = _WAYBACK.match(url or "")
    if not wayback:
        return None
    archived = wayback.group(2)
    return wayback.group(1), archived if "://" in archived else "http://" + archived


def original_url(url: str | None) -> str:
    """The URL a page stands for: a Wayback copy's archived URL, else the URL itself."""
    capture = wayback_capture(url)
    return capture[1] if capture else url or ""


def original_host(url: str | None) -> str | None:
    """The site of a page: its URL's host, or for a Wayback Machine capture the archived page's host."""
    try:
        return urlsplit(original_url(url)).hostname
    except ValueError:
        return None


def is_declared_copy(url: str, canonical: str | None) -> bool:
    """The page names another page as the canonical one."""
    return bool(canonical) and not _same_page(original_url(url), original_url(canonical))


def earliest_date(url: str, metadata: Mapping[str, Any]) -> str:
    """The earliest date the page's text is known to have existed (ISO 8601), or NO_DATE."""
    dates = [d for d in (metadata.get("last_modified"), iso_utc(metadata.get("warc_date")), metadata.get("source_date"))
             if d]
    capture = wayback_capture(url)
    stamp = capture[0][:14] if capture else ""
    if len(stamp) == 14 and stamp.isdigit():
        dates.append(f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[8:10]}:{stamp[10:12]}:{stamp[12:14]}Z")
    return min(dates) if dates else NO_DATE


def iso_utc(value: Any) -> str | None:
    """A moment as ISO 8601 UTC seconds, or None when it is none: ISO 8601 text (a WARC-Date, a text record's
    date: a trailing Z, fractions, an offset or a bare date; at most 64 characters), a datetime or date (a Parquet
    timestamp; naive means UTC) or Unix seconds."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if isinstance(value, (int, float)):
            moment = datetime.fromtimestamp(value, tz=timezone.utc)
        elif isinstance(value, datetime):
            moment = value
        elif isinstance(value, date):
            moment = datetime(value.year, value.month, value.day)
        elif isinstance(value, str) and 0 < len(value) <= 64:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def origin_evidence(url: str | None, metadata: Mapping[str, Any] | None) -> tuple[int, str]:
    """(1 if the page declares another page canonical else 0, the earliest date it is known to have existed):
    smaller is more likely the original."""
    metadata = metadata or {}
    return int(is_declared_copy(url or "", metadata.get("canonical_url"))), earliest_date(url or "", metadata)


def origin_rank(url: str, metadata: Mapping[str, Any], quality: float | None, chars: int,
                doc_id: str) -> tuple[int, str, float, int, str]:
    """Smaller is more likely the original: not a declared copy, then the earliest date, then (ties) the
    highest quality score, the longest text, the smallest id."""
    return (*origin_evidence(url, metadata), -(quality if quality is not None else -1.0), -chars, doc_id)
