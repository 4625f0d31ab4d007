"""What a page itself says about AI training and text and data mining, and the licence it states (issue 59).

Read before extraction, from the HTTP headers the WARC kept and the page's `<head>` (its first 100,000 characters;
the licence marks anywhere in the page):
- `<meta name="robots" content="noai">` (DeviantArt's and others' directive; `noimageai` is counted, not acted
  on: this corpus is text) -> `noai_meta`;
- a meta tag named for one of `optout.agents` (`<meta name="GPTBot" content="noindex">`) with noai, noindex or
  none -> `agent_meta`;
- the HTTP header `X-Robots-Tag` with noai, or with noai/noindex/none after a chosen agent's name
  (`X-Robots-Tag: GPTBot: noindex`), also as `<meta http-equiv>` -> `noai_header`;
- the W3C TDM Reservation Protocol (TDMRep, 2024): `tdm-reservation: 1` as an HTTP header or
  `<meta name="tdm-reservation" content="1">` -> `tdm_reserved` (the `tdm-policy` URL goes into the detail);
- licences: a Creative Commons or public-domain mark stated for the page (a `rel="license"` link, a `dc.rights`,
  `dcterms.license` or `license` meta tag) -> `metadata.license` (`cc-by-4.0`, `cc-by-sa-3.0`, `cc0-1.0`, `pdm-1.0`,
  ...) and `metadata.license_source`; `require_license: open` keeps only openly licensed pages (BY, BY-SA, CC0,
  public domain), for a corpus that must be redistributable. Other links to a CC licence are not read: on the
  bench WARC half of them credit a photo (Flickr, Wikimedia Commons), not the page.
All of this costs a dictionary look-up and one bounded pass over the head, so it is on by default. Two stages
share the `optout` settings: `optout_signals` reads the page before extraction (its HTML is gone after) and notes
what it found; `optout` drops after the quality rules, once the page's language and text are known, so that the
report says what honouring opt-outs costs per language in pages that would otherwise be kept, and before dedup, so
that a copy of an opted-out page on a site that did not opt out can be the one kept.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from common.settings import check
from stages.extraction.warc import OPTOUT_KEY
from stages.mix import approx_tokens
from stages.optout.agents import TRAINING_AGENTS
from stages.optout.robots import product_token
from stages.record import Document, Stage, StageResult
from stages.table import GLOBAL, StageSpec

STAGE = "optout"
SIGNALS = "optout_signals"
VERDICT = "optout_verdict"  # metadata: [reason, detail] from optout_signals to optout (not a column)
HEAD_CHARS = 100_000
_META = re.compile(r"<meta\b[^>]{0,2000}>", re.IGNORECASE)        # bounded: linear on any page
_LINK = re.compile(r"<(?:link|a)\b[^>]{0,2000}>", re.IGNORECASE)
_ATTR = re.compile(r"""([a-zA-Z_:.-]{1,40})\s*=\s*(?:"([^"]{0,2000})"|'([^']{0,2000})'|([^\s"'>]{1,2000}))""")
_CC_URL = re.compile(r"creativecommons\.org/(licenses|publicdomain)/([a-z-]{1,20})(?:/(\d(?:\.\d)?))?",
                     re.IGNORECASE)
# Past the head, a licence mark (most often in the footer: a CC badge) is found by the words that make a tag one
# (str.rfind, at memory speed: no parse and no copy of the page; "icense" and "ights" find license/License and
# rights/Rights), from the end of the page back (footers first), then the tag around each is read if the word is
# inside one and can be a mark. At most TAIL_WORDS_READ places of each word and TAIL_TAGS such tags are looked at: a 100 MB page of the word
# "rights" costs two passes of rfind and at most 2 x 4,096 look-backs of 2,000 characters.
_TAIL_WORDS = ("icense", "ights")
TAIL_WORDS_READ, TAIL_TAGS = 4096, 64
_STOP = frozenset({"noai", "noindex", "none"})     # what a directive for a training crawler may say to keep out
OPEN_LICENSES = ("cc-by", "cc-by-sa", "cc0", "pdm")
LICENSE_RULES = ("none", "open", "any")


@dataclass(frozen=True)
class OptOutConfig:
    """Opt-outs a page states (meta tags, HTTP headers, TDMRep) and its licence."""

    enabled: bool = True
    # The crawlers whose opt-outs count (product tokens): ai-robots-txt's training-data crawlers and CCBot
    # (stages/optout/agents.py, list ai-robots-txt@738c80df)
    agents: tuple[str, ...] = TRAINING_AGENTS
    meta: bool = True            # <meta name="robots" content="noai"> and meta tags named for a chosen agent
    headers: bool = True         # X-Robots-Tag (header or http-equiv) with noai, or a chosen agent's noindex/none
    tdm: bool = True             # TDMRep: tdm-reservation 1 (header or meta)
    require_license: str = "none"  # none | open (CC BY, BY-SA, CC0, public domain) | any (any stated licence)
    # With --robots: which capture of a host's robots.txt judges a page: page (the newest fetched at or before
    # the page, else the earliest after) or newest (the newest of all, e.g. files a team fetched this year)
    robots_as_of: str = "page"

    def __post_init__(self):
        check(self.require_license in LICENSE_RULES,
              f"require_license must be one of {', '.join(LICENSE_RULES)}, got {self.require_license!r}")
        check(self.robots_as_of in ("page", "newest"), f"robots_as_of must be page or newest, got {self.robots_as_of!r}")


def attributes(tag: str) -> dict[str, str]:
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(tag)}


def license_of(url: str) -> str | None:
    """`cc-by-sa-4.0`, `cc0-1.0`, `pdm-1.0`, ... from a Creative Commons licence or mark URL, else None."""
    found = _CC_URL.search(url)
    if not found:
        return None
    kind, name, version = found.group(1).lower(), found.group(2).lower().strip("-"), found.group(3)
    if kind == "publicdomain":
        name = {"zero": "cc0", "mark": "pdm"}.get(name)
        if name is None:
            return None
    else:
        name = f"cc-{name}"
    return f"{name}-{version}" if version else name


def is_open(license: str | None) -> bool:
    return license is not None and any(license == o or license.startswith(o + "-") and license[len(o) + 1:][:1].isdigit()
                                       for o in OPEN_LICENSES)


class PageOptOut(Stage):
    """Reads what a page states (before extraction): its opt-out, noted for the `optout` stage, and its licence."""

    name = SIGNALS

    def __init__(self, config: OptOutConfig | None = None):
        self.config = config = config or OptOutConfig()
        self._agents = frozenset(product_token(a) for a in config.agents)

    def __call__(self, doc: Document) -> StageResult:
        c = self.config
        headers = doc.metadata.get(OPTOUT_KEY) or {}
        head = (doc.html or "")[:HEAD_CHARS]
        metas = [attributes(m.group()) for m in _META.finditer(head)]
        verdict = (self._headers(headers) if c.headers else None) or self._metas(metas, headers)
        license, source = self._license(head, metas)
        if license is None and len(doc.html or "") > HEAD_CHARS:
            license, source = self._license_past_head(doc.html)
        metadata = {k: v for k, v in doc.metadata.items() if k != OPTOUT_KEY}
        if license:
            metadata.update(license=license, license_source=source)
        if verdict:
            metadata[VERDICT] = list(verdict)
        if any("noimageai" in _tokens(m.get("content", "")) for m in metas if m.get("name", "").lower() == "robots"):
            self.count("noimageai")
        return doc.replace(metadata=metadata)

    def _headers(self, headers: dict[str, str]) -> tuple[str, str] | None:
        tag = headers.get("x-robots-tag")
        if tag and self._robots_tag_stops(tag):
            return "noai_header", f"X-Robots-Tag: {tag}".replace("\n", " | ")[:300]
        if self.config.tdm and headers.get("tdm-reservation", "").strip() == "1":
            return "tdm_reserved", _tdm_detail("header", headers.get("tdm-policy"))
        return None

    def _metas(self, metas: list[dict[str, str]], headers: dict[str, str]) -> tuple[str, str] | None:
        c = self.config
        for meta in metas:
            name, content = meta.get("name", "").strip().lower(), meta.get("content", "")
            if c.meta and name == "robots" and "noai" in _tokens(content):
                return "noai_meta", f'<meta name="robots" content="{content}">'[:300]
            if c.meta and name and product_token(name) in self._agents and name == product_token(name) \
                    and _tokens(content) & _STOP:
                return "agent_meta", f'<meta name="{meta.get("name")}" content="{content}">'[:300]
            if c.headers and meta.get("http-equiv", "").lower() == "x-robots-tag" and self._robots_tag_stops(content):
                return "noai_header", f'<meta http-equiv="X-Robots-Tag" content="{content}">'[:300]
            if c.tdm and name == "tdm-reservation" and content.strip() == "1":
                policy = next((m.get("content") for m in metas if m.get("name", "").lower() == "tdm-policy"), None)
                return "tdm_reserved", _tdm_detail("meta", policy or headers.get("tdm-policy"))
        return None

    def _robots_tag_stops(self, value: str) -> bool:
        """X-Robots-Tag: `noai` for everyone, or noai/noindex/none for one of the chosen agents. A header (one per
        line: the WARC reader joins repeats so) that starts with an agent's name speaks for that agent throughout:
        `googlebot: noindex, noai` is Google's business, not every crawler's."""
        for header in value.split("\n"):
            scope = None
            for part in header.split(","):
                name, colon, rest = part.partition(":")
                name = name.strip()
                if colon and name and product_token(name) == name.lower():
                    # "GPTBot: noindex" (an agent) vs "unavailable_after: 25 Jun 2026" (a directive with a value)
                    scope, part = name.lower(), rest
                directives = _tokens(part)
                if scope is None and "noai" in directives:
                    return True
                if scope is not None and scope in self._agents and directives & _STOP:
                    return True
        return False

    def _license(self, head: str, metas: list[dict[str, str]]) -> tuple[str | None, str | None]:
        for link in _LINK.finditer(head):
            if "license" not in link.group().lower():
                continue  # a page has hundreds of links: parse the attributes of those that can be one
            attrs = attributes(link.group())
            if "license" in attrs.get("rel", "").lower().split():
                found = license_of(attrs.get("href", ""))
                if found:
                    return found, "rel=license"
        for meta in metas:
            if meta.get("name", "").lower() in ("dc.rights", "dcterms.license", "dc.license", "license", "copyright"):
                found = license_of(meta.get("content", ""))
                if found:
                    return found, f"meta {meta['name'].lower()}"
        return None, None  # a CC link elsewhere is most often a photo's credit (5 of 10 on the bench WARC): not read

    def _license_past_head(self, html: str) -> tuple[str | None, str | None]:
        """The same marks past the first HEAD_CHARS characters: for each of the words a mark holds, its enclosing
        tag (within 2,000 characters either side, as the head's patterns bound a tag), read as the head's are."""
        start = max(HEAD_CHARS - 2000, 0)  # from a tag cut by the head's end
        for word in _TAIL_WORDS:
            at, tags = html.rfind(word, start), 0
            for _ in range(TAIL_WORDS_READ):
                if at < 0 or tags >= TAIL_TAGS:
                    break
                opened = html.rfind("<", max(at - 2000, 0), at)
                name = html[opened + 1:opened + 5].lower() if opened >= 0 else ""
                if (name in ("link", "meta") or name[:1] == "a" and name[1:2].isspace()) \
                        and html.find(">", opened, at) < 0 and (closed := html.find(">", at, at + 2000)) >= 0 \
                        and ("name" if name == "meta" else "rel") in (tag := html[opened:closed + 1]).lower():
                    tags += 1  # a tag that can be a mark: a link with a rel, a meta with a name
                    license, source = self._license("", [attributes(tag)]) if name == "meta" else self._license(tag, [])
                    if license:
                        return license, source
                    at = opened  # the rest of this tag is read
                at = html.rfind(word, start, at)
        return None, None


class OptOutDecision(Stage):
    """Drops the pages whose opt-out `optout_signals` noted, and those without the licence `require_license` asks."""

    name = STAGE

    def __init__(self, config: OptOutConfig | None = None):
        self.config = config or OptOutConfig()

    def __call__(self, doc: Document) -> StageResult:
        verdict = doc.metadata.get(VERDICT)
        license, rule = doc.metadata.get("license"), self.config.require_license
        if not verdict and rule == "open" and not is_open(license):
            verdict = ("no_open_license", f"license {license}" if license else "no licence stated")
        if not verdict and rule == "any" and not license:
            verdict = ("no_license", "no licence stated")
        if verdict:  # the ledger's value: the tokens the page would have given (what honouring it costs)
            return doc.drop(STAGE, verdict[0], verdict[1], value=approx_tokens(doc.text))
        return doc


def _tokens(content: str) -> set[str]:
    return {t for t in re.split(r"[\s,;]+", content.strip().lower()) if t}


def _tdm_detail(where: str, policy: str | None) -> str:
    return f"tdm-reservation: 1 ({where})" + (f"; tdm-policy: {policy}" if policy else "")


SPECS = (
    StageSpec(name=SIGNALS, order=7, config=OptOutConfig, section=STAGE, build=PageOptOut, reasons={},
              about="reads the opt-outs a page states (noai, TDMRep, X-Robots-Tag) and its licence (`metadata.license`)"),
    StageSpec(name=STAGE, order=72, config=OptOutConfig, build=OptOutDecision,
              about="drops the pages whose opt-out `optout_signals` read (after the quality rules, before dedup)",
              reasons={"noai_meta": "`<meta name=\"robots\" content=\"noai\">`",
                       "agent_meta": "a meta tag named for one of `optout.agents` says noai, noindex or none",
                       "noai_header": "X-Robots-Tag (header or http-equiv) says noai, or noai/noindex/none for a "
                                      "chosen agent",
                       "tdm_reserved": "TDMRep: tdm-reservation 1 as HTTP header or meta tag (detail: the tdm-policy)",
                       "no_open_license": "`require_license: open` and the page states no open licence (CC BY, "
                                          "BY-SA, CC0, PD)",
                       "no_license": "`require_license: any` and the page states no licence"}),
    StageSpec(name="robots", order=73, runs=GLOBAL, config=OptOutConfig, section=STAGE,
              job="pipeline.job.globals.robots:Robots",
              enabled=lambda run: bool(run.robots) and run.optout.enabled,
              about="with `--robots`: the host's robots.txt capture disallows the page for a chosen AI crawler",
              reasons={"robots_ai_disallow": "a group of the host's robots.txt that names one of `optout.agents` "
                                             "disallows the URL (detail: the agent, the deciding line, the capture's "
                                             "date); a `*` group alone is noted, not dropped"}),
)
