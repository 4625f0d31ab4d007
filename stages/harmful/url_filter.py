"""URL filter: block-listed domains and URLs (UT1) and FineWeb's URL word rules, before extraction.

It runs right after reading, on the URL alone, so a blocked page costs no extraction. Recipe as
FineWeb's (datatrove `URLFilter`, Penedo et al. 2024), with these differences, each on purpose:
- a listed domain blocks every host below it: the host and each of its parents down to the registered
  domain (public suffix list: tldextract's bundled snapshot, no network) are looked up, where datatrove
  looks up the registered domain and the full host only (a listed `blog.example.com` did not block
  `www2.blog.example.com`);
- a listed URL (`host/path`) blocks that path and everything below it, matched without scheme and `www.`
  (datatrove compares the whole URL, scheme included, with entries that have none: it never matched);
- URL words are matched case-insensitively (datatrove's tokens keep their case: `/Porn/` passed);
- allow lists (UT1 `sexual_education`, the user's) win over every block rule.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from urllib.parse import urlsplit

from common.settings import check
from stages.harmful.hashset import HashedSet, load_hashed_sets, read_lines
from stages.record import Document, Stage, StageEnvironmentError, StageResult
from stages.table import StageSpec

STAGE = "url_filter"
LISTED_SCORE = "url_listed"  # 1.0: the site is on a `second_look` list; the page's text decides (listed_site)
LISTS = os.path.join(os.path.dirname(__file__), "lists")
UT1 = os.path.join(LISTS, "ut1")
URL_WORDS = os.path.join(LISTS, "url_words")
MAX_PATH_SEGMENTS = 16  # URL-list lookups per page: host/a, host/a/b, ... (bounded for hostile URLs)
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def ut1_categories() -> list[str]:
    """The UT1 categories shipped with the package (each has a domains and/or a urls list)."""
    return sorted({name.split(".", 1)[0] for name in os.listdir(UT1)})


@dataclass(frozen=True)
class UrlFilterConfig:
    """URL block lists (UT1, FineWeb's list) and FineWeb's URL word rules; runs before extraction."""

    enabled: bool = True
    # UT1 categories to block: adult (4.56 M domains, FineWeb's list), mixed_adult, phishing, malware,
    # gambling, dating, agressif
    categories: tuple[str, ...] = ("adult",)
    allow_categories: tuple[str, ...] = ("sexual_education",)  # UT1 categories that are never blocked
    block_lists: tuple[str, ...] = ()   # files: one domain or host/path URL per line, blocked like UT1's
    allow_lists: tuple[str, ...] = ()   # files: domains or URLs never blocked (wins over every block rule)
    # Block lists (UT1 categories or list files by name) whose domain and URL matches are judged on the page's
    # text instead (stage listed_site): the page is marked (`url_listed`), not dropped here. For sites a domain
    # list calls adult that are community, health or news sites (gay.ch, siegessaeule.de: LGBTQ magazines)
    second_look: tuple[str, ...] = ()
    word_rules: bool = True             # FineWeb's URL words: banned word, banned sub-word, soft-banned words
    soft_word_threshold: int = 2        # soft-banned words (e.g. "sexy", "girls") a URL needs to be dropped
    sources: tuple[str, ...] = ()       # run on documents of these sources only; empty = every source

    def __post_init__(self):
        known = ut1_categories()
        unknown = sorted((set(self.categories) | set(self.allow_categories)) - set(known))
        check(not unknown, f"unknown UT1 categories {unknown}; shipped: {', '.join(known)}")
        blocking = set(self.categories) | {os.path.basename(f) for f in self.block_lists}
        check(set(self.second_look) <= blocking,
              f"second_look names lists that block nothing: {sorted(set(self.second_look) - blocking)}; "
              f"blocking: {', '.join(sorted(blocking))}")
        check(self.soft_word_threshold >= 1, f"soft_word_threshold must be >= 1, got {self.soft_word_threshold}")


def _domain(entry: str) -> str | None:
    entry = entry.lower().rstrip(".")
    return None if "/" in entry else entry.removeprefix("www.")


def _url(entry: str) -> str | None:
    entry = entry.lower().split("://", 1)[-1].rstrip("/")
    return entry.removeprefix("www.") if "/" in entry else None


@cache
def _lists(paths: tuple[str, ...]) -> tuple[HashedSet, HashedSet]:
    """(domains, URLs) of list files; cached per process: every stage of a worker shares them."""
    sets = load_hashed_sets(paths, {"domain": _domain, "url": _url})
    return sets["domain"], sets["url"]


def _word_list(name: str) -> list[str]:
    return [w for w in (_NON_ALNUM.sub("", line.lower()) for line in read_lines(os.path.join(URL_WORDS, name))) if w]


@dataclass(frozen=True)
class UrlParts:
    host: str          # lower case, without port, `www.` and a trailing dot
    hosts: tuple[str, ...]   # the host and its parents down to the registered domain
    paths: tuple[str, ...]   # host/a, host/a/b, ... (URL-list keys)


class UrlFilter(Stage):
    """Stage: drops a page whose URL is block-listed or has FineWeb's banned URL words."""

    name = STAGE

    def __init__(self, config: UrlFilterConfig = UrlFilterConfig()):
        self.config = config
        self._blocked: list[tuple[str, HashedSet, HashedSet]] | None = None
        self._allowed: list[tuple[HashedSet, HashedSet]] = []
        self._tld = None

    def _sources(self, categories: Sequence[str], files: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
        named = [(f"ut1:{c}", tuple(sorted(p for p in (os.path.join(UT1, f"{c}.domains.xz"),
                                                        os.path.join(UT1, f"{c}.urls.xz")) if os.path.exists(p))))
                 for c in categories]
        return named + [(f"list:{os.path.basename(f)}", (f,)) for f in files]

    def check(self) -> None:
        for path in self.config.block_lists + self.config.allow_lists:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"url_filter: list file {path!r} does not exist")

    def setup(self) -> None:
        if self._blocked is not None:
            return
        try:
            import tldextract

            self._tld = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # bundled snapshot only
            self._blocked = [(name, *_lists(paths)) for name, paths in
                             self._sources(self.config.categories, self.config.block_lists)]
            self._allowed = [_lists(paths) for _, paths in
                             self._sources(self.config.allow_categories, self.config.allow_lists)]
        except (OSError, ImportError) as exc:
            raise StageEnvironmentError(f"url_filter: cannot load its lists: {exc}") from exc
        self._banned = frozenset(_word_list("banned_words.txt"))
        self._soft = frozenset(_word_list("soft_banned_words.txt"))
        self._subwords = tuple(_word_list("banned_subwords.txt"))

    def teardown(self) -> None:
        self._blocked, self._allowed = None, []

    def __getstate__(self):
        return {"config": self.config, "_blocked": None, "_allowed": [], "_tld": None}

    def parts(self, url: str) -> UrlParts:
        try:
            split = urlsplit(url if "://" in url else "http://" + url)
            host = (split.hostname or "").rstrip(".")
        except ValueError:  # e.g. an unbalanced IPv6 bracket: no host to look up
            return UrlParts("", (), ())
        host = host.removeprefix("www.")
        registered = self._tld.extract_str(host).top_domain_under_public_suffix if host else ""
        labels = host.split(".")
        stop = len(registered.split(".")) if registered else len(labels)
        hosts = tuple(".".join(labels[i:]) for i in range(max(len(labels) - stop + 1, 1)))
        segments = [s for s in split.path.lower().split("/") if s][:MAX_PATH_SEGMENTS]
        paths = tuple(host + "/" + "/".join(segments[:i + 1]) for i in range(len(segments)))
        return UrlParts(host, hosts, paths)

    def verdict(self, url: str) -> tuple[str, str] | None:
        """None (keep) or (reason, detail) for one URL."""
        return self.judge(url)[0]

    def judge(self, url: str) -> tuple[tuple[str, str] | None, bool]:
        """(verdict, listed): `listed` when the URL's only blocks are lists named in `second_look` (its page's
        text decides, stage listed_site); FineWeb's URL words still give a verdict then."""
        if self._blocked is None:
            self.setup()
        parts = self.parts(url)
        if any(h in domains for h in parts.hosts for domains, _ in self._allowed) or \
                any(p in urls for p in parts.paths for _, urls in self._allowed):
            self.count("allowed")
            return None, False
        listed = False
        for name, domains, urls in self._blocked:
            match = next((("blocked_domain", f"{host} ({name})") for host in parts.hosts if host in domains), None) \
                or next((("blocked_url", f"{path} ({name})") for path in parts.paths if path in urls), None)
            if match is None:
                continue
            if name.split(":", 1)[-1] not in self.config.second_look:
                return match, False
            listed = True  # a later list may still block it outright
        words = self._word_verdict(url) if self.config.word_rules else None
        return words, listed and words is None

    def _word_verdict(self, url: str) -> tuple[str, str] | None:
        lower = url.lower()
        tokens = set(_NON_ALNUM.split(lower))
        banned = sorted(tokens & self._banned)
        if banned:
            return "banned_word", ", ".join(banned)
        soft = sorted(tokens & self._soft)
        if len(soft) >= self.config.soft_word_threshold:
            return "soft_banned_words", f"{', '.join(soft)} (>= {self.config.soft_word_threshold})"
        squeezed = _NON_ALNUM.sub("", lower)
        for word in self._subwords:
            if word in squeezed:
                return "banned_subword", word
        return None

    def __call__(self, doc: Document) -> StageResult:
        if not doc.url:
            self.count("no_url")
            return doc
        verdict, listed = self.judge(doc.url)
        if listed:
            self.count("second_look")
            return doc.with_score(LISTED_SCORE, 1.0)
        return doc if verdict is None else doc.drop(self.name, *verdict)


SPEC = StageSpec(
    name=STAGE, order=5, config=UrlFilterConfig, build=UrlFilter,
    about="UT1 block lists and FineWeb's URL words, on the URL before extraction",
    reasons={"blocked_domain": "the host or a parent domain is on a block list (detail: the entry and its list)",
             "blocked_url": "the URL or a parent path is on a block list's URLs",
             "banned_word": "a URL token is one of FineWeb's banned words",
             "soft_banned_words": "at least `soft_word_threshold` of FineWeb's soft-banned words in the URL",
             "banned_subword": "one of FineWeb's banned sub-words anywhere in the URL (non-alphanumerics removed)"})
