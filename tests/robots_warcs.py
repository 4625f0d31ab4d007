"""robots.txt capture WARCs built like Common Crawl's `robotstxt/` files, and page WARCs with chosen fetch dates."""
from __future__ import annotations

import io
import pathlib

from warcio.statusandheaders import StatusAndHeaders

from tests.conftest import ReproducibleWARCWriter


def robots_warc(path: pathlib.Path, captures) -> pathlib.Path:
    """`captures`: (URL of a /robots.txt, WARC-Date, "200 OK" or another status line, body, extra HTTP headers);
    a request record precedes each response, as in Common Crawl's files."""
    with open(path, "wb") as fh:
        writer = ReproducibleWARCWriter(fh)
        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "refinery test", "format": "WARC"}))
        for url, date, status, body, headers in captures:
            request = StatusAndHeaders("GET /robots.txt HTTP/1.1", [("User-Agent", "CCBot/2.0")], is_http_request=True)
            writer.write_record(writer.create_warc_record(url, "request", http_headers=request,
                                                          warc_headers_dict={"WARC-Date": date}))
            http = StatusAndHeaders(status, [("Content-Type", "text/plain"), *headers], protocol="HTTP/1.1")
            payload = body.encode("utf-8") if isinstance(body, str) else body
            writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=http,
                                                          warc_headers_dict={"WARC-Date": date}))
    return path


def page_warc(path: pathlib.Path, pages) -> pathlib.Path:
    """`pages`: (URL, WARC-Date, HTML bytes)."""
    with open(path, "wb") as fh:
        writer = ReproducibleWARCWriter(fh)
        for url, date, body in pages:
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                                          warc_headers_dict={"WARC-Date": date}))
    return path
