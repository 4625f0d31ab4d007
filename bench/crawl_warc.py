"""A crawl-like WARC file at Common Crawl's size, built from the workspace's real pages; the same bytes from the same seed.

    .venv/bin/python bench/crawl_warc.py OUT.warc.gz [--responses 40000] [--seed 0] [--pages 'GLOB' ...]

Common Crawl's layout (CC-MAIN-2024-22's WARC files: ~1 GB gzip, ~35-45 k responses): one `warcinfo`, then
per capture a `request`, its `response` and a `metadata` record (fetchTimeMs, charset), each record its own gzip
member, responses with `WARC-Identified-Payload-Type`, payload and block digests, payloads truncated at the crawler's
1 MiB cap with `WARC-Truncated: length`. Also in a small share, as the issue of this bench asks (real CC keeps most of
them in its crawldiagnostics files): revisits, redirects, 404s and non-HTML payloads (feeds, JSON, PDF, plain text).

Pages: every 2xx HTML response of the source WARCs (default: the bench WARC and the bundled ones, ~1,050 real
pages) is a *site template*: its markup and boilerplate kept, its long text nodes (the article) replaced by text
nodes drawn from the pages of the same language (lid.176), so each generated page is real markup around real
sentences in a new combination; sites have several pages sharing their template (menus, footers). Copies: 5 % exact
(the same payload at another URL), 10 % near (an earlier article again on its site, a few words of one text node
changed: an update, a print view). The same seed gives the same bytes.
"""
from __future__ import annotations

import argparse
import base64
import glob
import hashlib
import html
import json
import os
import random
import re
import sys
import time
import uuid
import zlib
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PAGES = [os.path.join(HERE, "..", "shared", "data", "warc", "bench_trafilatura_pages.warc.gz"),
                 os.path.join(HERE, "data", "warc", "*.warc.gz")]
TRUNCATE_AT = 1024 * 1024  # Common Crawl's payload cap (1 MiB until 2025)
# Shares of responses by kind (the rest are new articles on a site's template).
SHARES = {"exact": 0.05, "near": 0.10, "non_html": 0.04, "not_found": 0.01, "redirect": 0.015,
          "truncated": 0.005, "revisit": 0.01}
PAGES_PER_SITE = 4  # mean pages per site in one file (geometric)
MIN_NODE_CHARS = 60
# Linear on any page: a text node holds no angle bracket, script/style tags are paired by a scan (not a lazy match to
# the page's end per unclosed tag), a meta tag's charset is looked for within its first 1,024 characters.
_TEXT_NODE = re.compile(r">([^<>]{" + str(MIN_NODE_CHARS) + r",})(?=<)")
_SCRIPT_TAG = re.compile(r"<(/?)(?:script|style)\b", re.I)
_META_CHARSET = re.compile(r"(<meta\b[^<>]{0,1024}?charset\s*=\s*[\"']?)[\w-]+", re.I)


@dataclass
class Template:
    """A real page cut at its article's text nodes: pieces[0] node pieces[1] node ... pieces[-1]."""
    url: str
    lang: str
    pieces: list[str]

    @property
    def slots(self) -> int:
        return len(self.pieces) - 1

    def render(self, nodes: list[str]) -> bytes:
        out = [self.pieces[0]]
        for node, piece in zip(nodes, self.pieces[1:]):
            out += [node, piece]
        return "".join(out).encode("utf-8")


@dataclass
class Pools:
    templates: list[Template]
    nodes: dict[str, list[str]] = field(default_factory=dict)  # language -> text nodes of its pages


def _http_pages(paths: list[str]):
    from warcio.archiveiterator import ArchiveIterator

    from stages.extraction.charset import charset_from_content_type, decode_html

    for path in paths:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type != "response" or rec.http_headers is None:
                    continue
                status = rec.http_headers.get_statuscode() or ""
                ctype = rec.http_headers.get_header("Content-Type") or ""
                if not status.startswith("2") or "html" not in ctype.lower():
                    continue
                body = rec.content_stream().read()
                text = decode_html(body, [("http", charset_from_content_type(ctype))])[0] if body else ""
                url = rec.rec_headers.get_header("WARC-Target-URI") or ""
                if text and url.startswith("http"):
                    yield url, text


def load_pools(patterns: list[str]) -> Pools:
    """Site templates and per-language text nodes from the real pages of `patterns`."""
    import fasttext

    from stages.langid import bundled_model_path

    paths = sorted({p for pattern in patterns for p in glob.glob(pattern)})
    if not paths:
        raise SystemExit(f"no source WARC matches {patterns}")
    model = fasttext.load_model(bundled_model_path())
    pools = Pools(templates=[])
    for url, text in _http_pages(paths):
        text = _META_CHARSET.sub(r"\g<1>utf-8", text)
        hidden = _script_spans(text)
        pieces, nodes, last = [], [], 0
        for m in _TEXT_NODE.finditer(text):
            start, end = m.span(1)
            if any(a <= start < b for a, b in hidden) or len(m.group(1).split()) < 5 and not _cjk(m.group(1)):
                continue
            pieces.append(text[last:start])
            nodes.append(m.group(1))
            last = end
        pieces.append(text[last:])
        if len(nodes) < 2:
            continue
        sample = " ".join(html.unescape(n) for n in nodes)[:2000].replace("\n", " ")
        lang = model.predict(sample)[0][0].removeprefix("__label__")
        pools.templates.append(Template(url, lang, pieces))
        pools.nodes.setdefault(lang, []).extend(nodes)
    return pools


def _script_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each <script>/<style> element; an unclosed one runs to the end of the page."""
    spans, opened = [], None
    for m in _SCRIPT_TAG.finditer(text):
        if not m.group(1) and opened is None:
            opened = m.start()
        elif m.group(1) and opened is not None:
            spans.append((opened, m.end()))
            opened = None
    if opened is not None:
        spans.append((opened, len(text)))
    return spans


def _cjk(s: str) -> bool:
    return any("\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7a3" for ch in s)


# ---- records ----------------------------------------------------------------------------------------------

def _digest(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def _record(rtype: str, headers: dict, block: bytes, level: int) -> bytes:
    head = {"WARC-Type": rtype, **headers, "Content-Length": str(len(block))}
    raw = ("WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode() + block + b"\r\n\r\n"
    z = zlib.compressobj(level, zlib.DEFLATED, 31)  # one gzip member per record, as Common Crawl writes them
    return z.compress(raw) + z.flush()


def _http(status: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body


class CrawlWriter:
    """Writes captures as Common Crawl does; record ids and dates come from the seeded generator."""

    def __init__(self, out, rng: random.Random, level: int):
        self.out, self.rng, self.level = out, rng, level
        self.n = 0
        self.counts: dict[str, int] = {}
        self.warcinfo = self._id()
        info = (b"isPartOf: CC-MAIN-REHEARSAL\r\npublisher: refinery bench/crawl_warc.py\r\n"
                b"format: WARC File Format 1.1\r\nrobots: checked via crawler-commons\r\n")
        self._write("warcinfo", {"WARC-Date": self._date(), "WARC-Record-ID": self.warcinfo,
                                 "Content-Type": "application/warc-fields"}, info)

    def _id(self) -> str:
        return f"<urn:uuid:{uuid.UUID(int=self.rng.getrandbits(128), version=4)}>"

    def _date(self) -> str:
        t = 1716000000 + self.n * 7  # May 2024, as CC-MAIN-2024-22
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))

    def _write(self, rtype: str, headers: dict, block: bytes) -> None:
        self.out.write(_record(rtype, headers, block, self.level))
        self.counts[rtype] = self.counts.get(rtype, 0) + 1

    def capture(self, url: str, status: str, headers: list[tuple[str, str]], body: bytes, payload_type: str,
                kind: str) -> tuple[str, str]:
        """request, response, metadata; returns the response's (record id, payload digest)."""
        self.n += 1
        date, host = self._date(), url.split("/")[2]
        request = (f"GET /{url.split('/', 3)[3] if url.count('/') > 2 else ''} HTTP/1.1\r\nHost: {host}\r\n"
                   "User-Agent: CCBot/2.0 (https://commoncrawl.org/faq/)\r\nAccept: text/html\r\n\r\n").encode()
        common = {"WARC-Date": date, "WARC-Warcinfo-ID": self.warcinfo, "WARC-Target-URI": url}
        response_id = self._id()
        ip = f"10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.{self.rng.randrange(1, 255)}"
        self._write("request", {**common, "WARC-Record-ID": self._id(), "WARC-IP-Address": ip,
                                "WARC-Concurrent-To": response_id, "Content-Type": "application/http; msgtype=request",
                                "WARC-Block-Digest": _digest(request)}, request)
        truncated = len(body) > TRUNCATE_AT
        body = body[:TRUNCATE_AT]
        block = _http(status, headers + [("Content-Length", str(len(body)))], body)
        fields = {**common, "WARC-Record-ID": response_id, "WARC-IP-Address": ip,
                  "Content-Type": "application/http; msgtype=response", "WARC-Payload-Digest": _digest(body),
                  "WARC-Block-Digest": _digest(block), "WARC-Identified-Payload-Type": payload_type}
        if truncated:
            fields["WARC-Truncated"] = "length"
        self._write("response", fields, block)
        meta = f"fetchTimeMs: {self.rng.randrange(20, 3000)}\r\ncharset-detected: UTF-8\r\nrehearsal-kind: {kind}\r\n"
        self._write("metadata", {**common, "WARC-Record-ID": self._id(), "WARC-Concurrent-To": response_id,
                                 "Content-Type": "application/warc-fields"}, meta.encode())
        return response_id, fields["WARC-Payload-Digest"]

    def revisit(self, url: str, refers_to: str, refers_url: str, digest: str) -> None:
        self.n += 1
        head = _http("200 OK", [("Content-Type", "text/html; charset=utf-8")], b"")
        self._write("revisit", {"WARC-Date": self._date(), "WARC-Record-ID": self._id(), "WARC-Target-URI": url,
                                "WARC-Warcinfo-ID": self.warcinfo, "WARC-Refers-To": refers_to,
                                "WARC-Refers-To-Target-URI": refers_url, "WARC-Payload-Digest": digest,
                                "WARC-Profile": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
                                "Content-Type": "application/http; msgtype=response"}, head)


# ---- pages ------------------------------------------------------------------------------------------------

def _non_html(rng: random.Random, nodes: list[str]) -> tuple[str, bytes]:
    text = [html.unescape(rng.choice(nodes)) for _ in range(rng.randrange(3, 12))]
    kind = rng.choice(("application/rss+xml", "application/json", "text/plain", "application/pdf"))
    if kind == "application/rss+xml":
        items = "".join(f"<item><title>{html.escape(t[:80])}</title><description>{html.escape(t)}</description></item>"
                        for t in text)
        return kind, f'<?xml version="1.0"?><rss version="2.0"><channel>{items}</channel></rss>'.encode()
    if kind == "application/json":
        return kind, json.dumps({"items": [{"title": t[:80], "body": t} for t in text]}).encode()
    if kind == "text/plain":
        return kind, "\n\n".join(text).encode()
    stream = zlib.compress(" ".join(text).encode("latin-1", "replace"))  # a PDF's compressed content stream
    return kind, (b"%PDF-1.7\n1 0 obj<</Length " + str(len(stream)).encode() + b"/Filter/FlateDecode>>stream\n"
                  + stream + b"\nendstream endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")


def _near_copy(rng: random.Random, nodes: list[str], template: Template) -> bytes:
    """An article again at another URL of its site (a print view, a tracking parameter, an update): one of its
    text nodes with a few words changed."""
    nodes = list(nodes)
    i = rng.randrange(len(nodes))
    words = nodes[i].split(" ")
    for _ in range(max(1, len(words) // 20)):
        words[rng.randrange(len(words))] = rng.choice(("Update:", "(AP)", "2024", "Reuters", "—"))
    nodes[i] = " ".join(words)
    if len(nodes) > template.slots:  # the article's extra nodes join the template's last text node
        nodes = nodes[:template.slots - 1] + [" ".join(nodes[template.slots - 1:])]
    return template.render(nodes + [""] * (template.slots - len(nodes)))


def generate(out_path: str, responses: int, seed: int, pages: list[str], level: int = 6,
             shares: dict[str, float] = SHARES) -> dict:
    """Writes the file; returns what it holds (counts by record type and by kind of response, bytes)."""
    pools = load_pools(pages)
    rng = random.Random(seed)
    kinds, weights = list(shares) + ["article"], list(shares.values()) + [1 - sum(shares.values())]
    sites: list[tuple[str, Template]] = []   # (host, template)
    articles: list[tuple[int, list[str]]] = []  # (site, text nodes) of every article written
    written: list[tuple[str, str, str, bytes]] = []  # (record id, url, digest, payload) of recent HTML responses
    by_kind: dict[str, int] = {}
    with open(out_path, "wb") as out:
        w = CrawlWriter(out, rng, level)
        while w.counts.get("response", 0) + w.counts.get("revisit", 0) < responses:
            kind = rng.choices(kinds, weights)[0]
            if kind in ("exact", "near", "revisit") and not written:
                kind = "article"
            if not sites or rng.random() < 1 / PAGES_PER_SITE:  # a new site, on a template not yet used
                template = rng.choice(pools.templates)
                base = template.url.split("/")[2].removeprefix("www.")
                sites.append((f"www.s{len(sites)}.{base}", template))
            site = rng.randrange(max(0, len(sites) - 8), len(sites))  # captures of a site come close together
            host, template = sites[site]
            url = f"https://{host}/{kind}/{w.n}-{rng.getrandbits(32):08x}.html"
            html_headers = [("Content-Type", "text/html; charset=utf-8"), ("Server", "nginx")]
            by_kind[kind] = by_kind.get(kind, 0) + 1
            if kind == "revisit":
                rid, old_url, digest, _ = rng.choice(written)
                w.revisit(old_url, rid, old_url, digest)
                continue
            if kind == "exact":
                body = rng.choice(written)[3]
            elif kind == "near":
                src_site, nodes = rng.choice(articles)
                body = _near_copy(rng, nodes, sites[src_site][1])
            elif kind == "non_html":
                ctype, body = _non_html(rng, pools.nodes[template.lang])
                w.capture(url, "200 OK", [("Content-Type", ctype)], body, ctype, kind)
                continue
            elif kind == "not_found":
                body = b"<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>"
                w.capture(url, "404 Not Found", html_headers, body, "text/html", kind)
                continue
            elif kind == "redirect":
                target = f"https://{host}/article/{rng.getrandbits(32):08x}.html"
                w.capture(url, "301 Moved Permanently", [("Location", target), *html_headers], b"", "text/html", kind)
                continue
            else:  # an article (or a page past the crawler's cap: its article repeated until > 1 MiB)
                lang_nodes = pools.nodes[template.lang]
                nodes = (rng.sample(lang_nodes, template.slots) if len(lang_nodes) >= 4 * template.slots
                         else [rng.choice(lang_nodes) for _ in range(template.slots)])
                if kind == "truncated":  # pieces joined once: appending to the last node was quadratic
                    size, extra = sum(map(len, nodes)), [nodes[-1]]
                    while size < TRUNCATE_AT * 1.2:
                        extra.append(rng.choice(lang_nodes))
                        size += 1 + len(extra[-1])
                    nodes[-1] = " ".join(extra)
                else:
                    articles.append((site, nodes))
                body = template.render(nodes)
            rid, digest = w.capture(url, "200 OK", html_headers, body, "text/html", kind)
            written.append((rid, url, digest, body))
            if len(written) > 2000:  # copies come from the recent past (memory stays bounded)
                written = written[-1000:]
            if len(articles) > 20000:
                articles = articles[-10000:]
    return {"path": out_path, "bytes": os.path.getsize(out_path), "records": w.counts, "responses_by_kind": by_kind,
            "templates": len(pools.templates), "languages": len(pools.nodes), "sites": len(sites), "seed": seed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--responses", type=int, default=40_000, help="response and revisit records (CC: ~35-45 k a file)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pages", action="append", help="source WARC glob (repeatable); default: the bench and demo WARCs")
    ap.add_argument("--level", type=int, default=6, help="gzip level of each record (Common Crawl: zlib's default)")
    args = ap.parse_args()
    started = time.perf_counter()
    found = generate(args.out, args.responses, args.seed, args.pages or DEFAULT_PAGES, args.level)
    found["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
