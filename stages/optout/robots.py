"""robots.txt as RFC 9309 reads it: groups by product token, the longest matching rule, Allow winning ties.

One parse of a file gives a `RobotsRules`; `decide(agent, url)` says whether the agent may fetch the URL and
which line decided. Semantics, each from RFC 9309 (the section in brackets) and checked against Google's
conformance suite (tests/stages/optout/test_robots.py):
- lines are `name: value`, names case-insensitive, `#` starts a comment, lines end in LF, CR or CRLF; a UTF-8
  BOM is skipped; only the first 500 KiB are parsed [2.5];
- a group is one or more user-agent lines and the rules after them; rules before any user-agent line are
  ignored; lines other than user-agent, allow and disallow (sitemap, unknown) neither start nor end a group;
  groups naming the same agent are combined [2.1, 2.2.1];
- a crawler obeys the groups whose user-agent value, read as a product token (the leading run of letters,
  digits, `_` and `-`), equals its own case-insensitively; only when none names it, the `*` groups [2.2.1];
- a rule matches a path (with its parameters and query, without the fragment) from the start; `*` matches any
  run of characters, `$` at the end anchors the end [2.2.3]; non-ASCII characters of a rule are percent-encoded
  and its percent-escapes upper-cased before matching [2.2.2]; the URL is matched as given (a crawler encodes
  its URLs: the pipeline does, `refinery robots check` does not);
- the match with the most octets wins, an Allow wins a tie, an empty rule matches nothing [2.2.2].
Google-specific behaviour followed, because it honours what the file's author evidently meant: a missing colon
(`disallow /`), the frequent misspellings of the line names Google accepts (`useragent`, `dissallow`, ...), `*`
followed by a space and text as the global group, and lines cut at 16,664 bytes. Not followed: Google's reading
of `allow: .../index.html` as also allowing the directory (it would widen an Allow beyond what the file says).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

MAX_BYTES = 500 * 1024             # RFC 9309 2.5: crawlers must parse at least 500 KiB; the rest is ignored
MAX_LINE_BYTES = 8 * 2083          # Google: longer lines are cut (a URL is at most 2,083 characters in IE)
_LINE_END = re.compile(r"\r\n|\r|\n")
_PRODUCT_TOKEN = re.compile(r"[A-Za-z0-9_-]*")
_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}")
_USER_AGENT = ("user-agent", "useragent", "user agent")
_DISALLOW = ("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw")


@dataclass(frozen=True)
class Rule:
    allow: bool
    pattern: str      # percent-encoded as matched
    line: int         # 1-based line number in the file
    text: str         # the line as written (comment and surrounding space removed)


@dataclass
class Group:
    agents: list[str] = field(default_factory=list)  # product tokens, lower case
    is_global: bool = False
    rules: list[Rule] = field(default_factory=list)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    rule: Rule | None        # the rule that decided; None when no rule matched (allowed by default)
    group: str               # "specific", "*" or "none": which groups were obeyed

    def describe(self) -> str:
        verdict = "allowed" if self.allowed else "disallowed"
        if self.rule is None:
            why = {"specific": "a group names the agent, no rule matches",
                   "*": "the * group has no matching rule", "none": "no group applies"}[self.group]
            return f"{verdict} ({why})"
        return f"{verdict} by line {self.rule.line}: {self.rule.text}" + (" (* group)" if self.group == "*" else "")


def product_token(value: str) -> str:
    """The user-agent value's product token: its leading run of letters, digits, `_` and `-`, lower-cased. RFC 9309
    2.2.1's grammar has no digits and Google's parser stops at one, reading `AI2Bot` as `AI`; AI crawlers are
    named with digits (AI2Bot, img2dataset) and sites write their names so: the digits stay."""
    return _PRODUCT_TOKEN.match(value).group().lower()


def encode_pattern(value: str) -> str:
    """Non-ASCII characters as UTF-8 percent-escapes, existing escapes in upper case (RFC 9309 2.2.2)."""
    if value.isascii():
        return _ESCAPE.sub(lambda m: m.group().upper(), value) if "%" in value else value
    out = []
    for char in value:
        out.append(char if char.isascii() else "".join(f"%{b:02X}" for b in char.encode("utf-8")))
    return _ESCAPE.sub(lambda m: m.group().upper(), "".join(out))


def path_of(url: str) -> str:
    """The path, parameters and query of a URL, without its fragment; "/" when it has none (as Google's
    GetPathParamsQuery: a URL without a scheme counts from its start)."""
    start = 2 if url.startswith("//") else 0
    early_path = _find_any(url, "/?;", start)
    scheme_end = url.find("://", start)
    if scheme_end < 0 or (early_path >= 0 and early_path < scheme_end):
        scheme_end = start
    else:
        scheme_end += 3
    path_start = _find_any(url, "/?;", scheme_end)
    if path_start < 0:
        return "/"
    fragment = url.find("#", start)
    if 0 <= fragment < path_start:
        return "/"
    path = url[path_start:fragment if fragment >= 0 else len(url)]
    return path if path.startswith("/") else "/" + path


def _find_any(text: str, chars: str, start: int) -> int:
    found = [i for i in (text.find(c, start) for c in chars) if i >= 0]
    return min(found) if found else -1


def matches(path: str, pattern: str) -> bool:
    """Whether `pattern` (with `*` and a final `$`) matches the start of `path`. Each literal piece is found at its
    leftmost place after the previous one: that is optimal for `*`-only patterns, and linear in the path."""
    anchored = pattern.endswith("$")
    pieces = (pattern[:-1] if anchored else pattern).split("*")
    first = pieces[0]
    if not path.startswith(first):
        return False
    position = len(first)
    if len(pieces) == 1:
        return position == len(path) if anchored else True
    for piece in pieces[1:-1]:
        found = path.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    last = pieces[-1]
    if anchored:  # the last piece must end the path, after everything matched so far
        return len(path) - len(last) >= position and path.endswith(last)
    return path.find(last, position) >= 0


GRAM = 4  # a wildcard rule is tried only where a GRAM-character run of one of its later pieces is in the path


@lru_cache(maxsize=4)
def path_grams(path: str) -> frozenset[str]:
    """The path's GRAM-character runs (kept for the last few paths: every agent's rules ask of the same page)."""
    return frozenset(path[i:i + GRAM] for i in range(len(path) - GRAM + 1))


class CompiledRules:
    """The rules a crawler obeys (its groups', in file order), compiled once to find the rule that decides a path:
    the longest matching one, an Allow winning a tie, the first in the file among equals (what a scan of every
    rule gives). Rules are tried longest first and the first match decides; a rule is tried only when the path
    can hold it: its first piece (the text before any `*`) is a prefix of the path, looked up by the path's first
    PREFIX characters, and a `*` rule's longest later piece of GRAM or more characters starts with a GRAM-character
    run of the path. A page costs O(path length) to index (its prefixes and GRAM-runs, a set built once per path
    for all agents) plus
    O(path length) per candidate rule (str.startswith and str.find, in C): with the 500 KiB cap, the candidates
    are the rules that share text with the path, not every rule of the file for every agent. The last path's
    decision is kept: the agents named by one group ask the same question."""

    PREFIX = 8

    def __init__(self, rules: list[Rule]):
        order = sorted(range(len(rules)), key=lambda i: (-len(rules[i].pattern), not rules[i].allow, i))
        self._rules = [rules[i] for i in order if rules[i].pattern]
        self._by_prefix: dict[str, list[int]] = {}  # first piece's first PREFIX characters -> positions in _rules
        self._by_gram: dict[str, list[int]] = {}
        for position, rule in enumerate(self._rules):
            pieces = rule.pattern.removesuffix("$").split("*")
            later = max(pieces[1:], key=len, default="")
            if len(later) >= GRAM:
                self._by_gram.setdefault(later[:GRAM], []).append(position)
            else:
                self._by_prefix.setdefault(pieces[0][:self.PREFIX], []).append(position)
        self._last: tuple[str, Rule | None] | None = None

    def decisive(self, path: str) -> Rule | None:
        """The rule that decides `path`, or None when none matches (allowed)."""
        if self._last is not None and self._last[0] == path:
            return self._last[1]
        candidates: set[int] = set()
        for size in range(min(len(path), self.PREFIX) + 1):
            candidates.update(self._by_prefix.get(path[:size], ()))
        if self._by_gram:
            grams = path_grams(path)
            small, large = (grams, self._by_gram) if len(grams) < len(self._by_gram) else (self._by_gram, grams)
            for gram in small:
                if gram in large:
                    candidates.update(self._by_gram[gram])
        decided = next((self._rules[i] for i in sorted(candidates) if matches(path, self._rules[i].pattern)), None)
        self._last = (path, decided)
        return decided


class RobotsRules:
    """The groups of one robots.txt file."""

    def __init__(self, groups: list[Group], allow_all: bool = False, disallow_all: bool = False):
        self.groups = groups
        self.allow_all, self.disallow_all = allow_all, disallow_all  # from the fetch's status (RFC 9309 2.3.1)
        self.named = frozenset(agent for group in groups for agent in group.agents)  # product tokens with a group
        self.has_global = any(group.is_global for group in groups)
        self._compiled: dict[tuple[int, ...], CompiledRules] = {}

    @classmethod
    def parse(cls, content: str | bytes) -> RobotsRules:
        if isinstance(content, bytes):
            content = content[:MAX_BYTES].decode("utf-8", errors="replace")
        elif len(content) > MAX_BYTES // 4:  # cheap bound first; exact on the encoded bytes
            content = content.encode("utf-8")[:MAX_BYTES].decode("utf-8", errors="ignore")
        content = content.removeprefix("\ufeff")
        groups: list[Group] = []
        current: Group | None = None
        rules_seen = False  # a rule line ends the current group's run of user-agent lines
        for number, raw in enumerate(_LINE_END.split(content), start=1):
            line = _cut(raw).split("#", 1)[0].strip()
            key, value = _key_value(line)
            if key is None:
                continue
            if key.startswith(_USER_AGENT):
                if current is None or rules_seen:
                    current, rules_seen = Group(), False
                    groups.append(current)
                if value.startswith("*") and (len(value) == 1 or value[1].isspace()):
                    current.is_global = True
                else:
                    current.agents.append(product_token(value))
            elif key.startswith("allow") or key.startswith(_DISALLOW):
                if current is None:
                    continue  # a rule outside any group is ignored
                rules_seen = True
                current.rules.append(Rule(key.startswith("allow"), encode_pattern(value), number, line))
        return cls(groups)

    @classmethod
    def for_status(cls, status: int | None, body: str | bytes = b"") -> RobotsRules:
        """The rules a crawler applies after fetching robots.txt with this HTTP status (RFC 9309 2.3.1): 2xx the
        file; 4xx none (everything allowed); 5xx or no answer (None) everything disallowed. Redirects are the
        caller's to follow (up to five hops; beyond, the file counts as unavailable: 4xx)."""
        if status is not None and 200 <= status < 300:
            return cls.parse(body)
        if status is not None and 400 <= status < 500:
            return cls([], allow_all=True)
        return cls([], disallow_all=True)

    def decide(self, agent: str, url: str) -> Decision:
        if self.allow_all:
            return Decision(True, None, "none")
        if self.disallow_all:
            return Decision(False, Rule(False, "/", 0, "(robots.txt unreachable or a server error: all disallowed)"),
                            "none")
        token = agent.lower()
        specific = [i for i, g in enumerate(self.groups) if token and token in g.agents] if token in self.named else []
        chosen = tuple(specific or [i for i, g in enumerate(self.groups) if g.is_global])
        which = "specific" if specific else ("*" if chosen else "none")
        compiled = self._compiled.get(chosen)
        if compiled is None:  # once per set of groups: the agents a group names share it
            compiled = self._compiled[chosen] = CompiledRules([r for i in chosen for r in self.groups[i].rules])
        rule = compiled.decisive(path_of(url))
        return Decision(rule is None or rule.allow, rule, which)

    def allowed(self, agent: str, url: str) -> bool:
        return self.decide(agent, url).allowed


def _cut(line: str) -> str:
    """A line cut at MAX_LINE_BYTES bytes of UTF-8."""
    if len(line) <= MAX_LINE_BYTES // 4:
        return line
    return line.encode("utf-8")[:MAX_LINE_BYTES].decode("utf-8", errors="ignore")


def _key_value(line: str) -> tuple[str | None, str]:
    """(lower-cased name, value) of a line, or (None, "") for a line without one. Without a colon, a line of
    exactly two runs of non-space characters is read as name and value (Google: `disallow /`)."""
    if not line:
        return None, ""
    key, colon, value = line.partition(":")
    if not colon:
        parts = line.split()
        if len(parts) != 2:
            return None, ""
        key, value = parts
    key = key.strip().lower()
    return (key, value.strip()) if key else (None, "")
