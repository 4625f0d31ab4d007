"""Opt-outs a page states and the licence it names, read from real WARC records as the job reads them."""
from __future__ import annotations

import html

import pytest

from common.settings import ConfigError
from stages.extraction.warc import OPTOUT_KEY, read_warc
from stages.optout.agents import TRAINING_AGENTS, training_agents
from stages.optout.signals import VERDICT, OptOutConfig, OptOutDecision, PageOptOut, is_open, license_of
from stages.record import Document, Drop
from tests.conftest import SENTENCES_DIR, WarcBuilder

EN_SENTENCES = (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()

PROSE = "".join(f"<p>{html.escape(s)}</p>" for s in EN_SENTENCES[:12])


def page(head: str = "", body: str = PROSE) -> bytes:
    return f"<html><head><title>t</title>{head}</head><body><article>{body}</article></body></html>".encode()


def judged(tmp_path, records, config: OptOutConfig | None = None) -> dict[str, Document | Drop]:
    """Each record written to a real WARC, read back, and judged by the stage."""
    warc = WarcBuilder(tmp_path / "optout.warc.gz")
    for url, body, headers in records:
        warc.response(url, body, extra_http=headers)
    warc.close()
    signals, decision = PageOptOut(config), OptOutDecision(config)
    with open(warc.path, "rb") as fh:
        read = [doc for doc in read_warc(fh, source="web") if isinstance(doc, Document)]
    noted = [signals(doc) for doc in read]
    assert all(isinstance(doc, Document) for doc in noted)  # the signals stage drops nothing: it notes
    return {doc.url: decision(doc) for doc in noted}


def reason(result) -> str | None:
    return result.reason if isinstance(result, Drop) else None


def test_meta_tags_headers_and_tdm_reservations(tmp_path):
    out = judged(tmp_path, [
        ("https://a.example/noai", page('<meta name="robots" content="noindex, noai">'), ()),
        ("https://a.example/noimageai", page('<meta name="robots" content="noimageai">'), ()),
        ("https://a.example/gptbot", page('<meta name="GPTBot" content="noindex">'), ()),
        ("https://a.example/googlebot", page('<meta name="googlebot" content="noindex">'), ()),
        ("https://a.example/header", page(), (("X-Robots-Tag", "noai, noimageai"),)),
        ("https://a.example/agent-header", page(), (("X-Robots-Tag", "CCBot: noindex"),)),
        ("https://a.example/other-header", page(), (("X-Robots-Tag", "unavailable_after: 25 Jun 2026 15:00:00 PST"),)),
        ("https://a.example/search-header", page(), (("X-Robots-Tag", "googlebot: noindex, noai"),)),
        ("https://a.example/repeated", page(), (("X-Robots-Tag", "googlebot: noindex"), ("X-Robots-Tag", "noai"))),
        ("https://a.example/repeated-agent", page(), (("X-Robots-Tag", "noarchive"), ("X-Robots-Tag", "GPTBot: none"))),
        ("https://a.example/equiv", page('<meta http-equiv="X-Robots-Tag" content="noai">'), ()),
        ("https://a.example/tdm-header", page(), (("tdm-reservation", "1"), ("tdm-policy", "https://a.example/p.json"))),
        ("https://a.example/tdm-meta", page('<meta name="tdm-reservation" content="1">'
                                            '<meta name="tdm-policy" content="https://a.example/policy.json">'), ()),
        ("https://a.example/tdm-zero", page('<meta name="tdm-reservation" content="0">'), ()),
        ("https://a.example/plain", page(), ()),
    ])
    assert {url.rsplit("/", 1)[1]: reason(r) for url, r in out.items()} == {
        "noai": "noai_meta", "noimageai": None, "gptbot": "agent_meta", "googlebot": None, "header": "noai_header",
        "agent-header": "noai_header", "other-header": None, "search-header": None, "repeated": "noai_header",
        "repeated-agent": "noai_header", "equiv": "noai_header",
        "tdm-header": "tdm_reserved", "tdm-meta": "tdm_reserved", "tdm-zero": None, "plain": None}
    assert out["https://a.example/tdm-meta"].detail == ("tdm-reservation: 1 (meta); "
                                                        "tdm-policy: https://a.example/policy.json")
    assert "X-Robots-Tag: noai" in out["https://a.example/header"].detail
    # the headers were carried from the WARC to this stage, and go no further
    assert all(OPTOUT_KEY not in r.metadata and VERDICT not in r.metadata for r in out.values() if isinstance(r, Document))


def test_each_signal_can_be_switched_off(tmp_path):
    records = [("https://b.example/noai", page('<meta name="robots" content="noai">'), ()),
               ("https://b.example/tdm", page(), (("tdm-reservation", "1"),)),
               ("https://b.example/header", page(), (("X-Robots-Tag", "noai"),))]
    out = judged(tmp_path, records, OptOutConfig(meta=False, tdm=False, headers=False))
    assert all(isinstance(r, Document) for r in out.values())
    out = judged(tmp_path, records, OptOutConfig(agents=()))
    assert [reason(r) for r in out.values()] == ["noai_meta", "tdm_reserved", "noai_header"]


def test_licences_are_recorded_and_can_be_required(tmp_path):
    records = [
        ("https://c.example/by-sa", page('<link rel="license" href="https://creativecommons.org/licenses/by-sa/4.0/">'), ()),
        ("https://c.example/dc", page('<meta name="DC.rights" content="http://creativecommons.org/publicdomain/zero/1.0/">'), ()),
        ("https://c.example/badge", page(body=PROSE + '<footer><a href="//creativecommons.org/licenses/by-nc/3.0/de/">'
                                         '<img src="by-nc.png"></a></footer>'), ()),
        ("https://c.example/none", page(), ()),
    ]
    out = judged(tmp_path, records)
    facts = {url.rsplit("/", 1)[1]: (r.metadata.get("license"), r.metadata.get("license_source")) for url, r in out.items()}
    assert facts == {"by-sa": ("cc-by-sa-4.0", "rel=license"), "dc": ("cc0-1.0", "meta dc.rights"),
                     "badge": (None, None), "none": (None, None)}  # a bare CC link: a photo's credit as often
    out = judged(tmp_path, records, OptOutConfig(require_license="open"))
    assert {url.rsplit("/", 1)[1]: reason(r) for url, r in out.items()} == {
        "by-sa": None, "dc": None, "badge": "no_open_license", "none": "no_open_license"}
    out = judged(tmp_path, records, OptOutConfig(require_license="any"))
    assert [reason(r) for r in out.values()] == [None, None, "no_license", "no_license"]


def test_a_licence_in_the_footer_of_a_long_page_is_read_at_bounded_cost(tmp_path):
    """A WordPress page of 180 KB states its CC licence in the footer, past the first 100,000 characters; read there
    too, and `require_license: open` keeps the page. A 90 MB page of the mark's words costs two passes of rfind."""
    import time

    sidebar = "".join(f'<li><a href="/tag/t{i}" title="Rights and licenses {i}">tag {i}</a></li>' for i in range(2500))
    footer = ('<footer><a rel="license" href="https://creativecommons.org/licenses/by-sa/4.0/">'
              '<img alt="CC BY-SA" src="by-sa.png"></a><meta name="x" content="y"></footer>')
    records = [("https://blog.example/long", page(body=PROSE + f"<ul>{sidebar}</ul>" + footer), ()),
               ("https://blog.example/meta", page(body=PROSE + f"<ul>{sidebar}</ul>" + '<meta name="DC.Rights" '
                                                  'content="https://creativecommons.org/publicdomain/zero/1.0/">'), ()),
               ("https://blog.example/credit", page(body=PROSE + f"<ul>{sidebar}</ul><a href=\"https://creative"
                                                    "commons.org/licenses/by/2.0/\">photo licence</a>"), ())]
    assert all(len(body) > 180_000 for _, body, _ in records[:1])
    out = judged(tmp_path, records, OptOutConfig(require_license="open"))
    facts = {url.rsplit("/", 1)[1]: (r.metadata.get("license"), r.metadata.get("license_source")) if
             isinstance(r, Document) else r.reason for url, r in out.items()}
    assert facts == {"long": ("cc-by-sa-4.0", "rel=license"), "meta": ("cc0-1.0", "meta dc.rights"),
                     "credit": "no_open_license"}  # a bare CC link is still not read, wherever it is
    huge = "<html><body>" + "<p>rights and licenses</p>" * 3_500_000 + "</body></html>"
    started = time.perf_counter()
    assert "license" not in PageOptOut()(Document(id="h", url="u", source="web", html=huge)).metadata
    assert time.perf_counter() - started < 2


def test_licence_urls_and_what_is_open():
    assert license_of("https://creativecommons.org/licenses/by/4.0/deed.de") == "cc-by-4.0"
    assert license_of("http://creativecommons.org/publicdomain/mark/1.0/") == "pdm-1.0"
    assert license_of("https://creativecommons.org/licenses/by-nc-nd/2.5/") == "cc-by-nc-nd-2.5"
    assert license_of("https://example.org/licenses/by/4.0/") is None
    assert [is_open(x) for x in ("cc-by-4.0", "cc-by-sa-3.0", "cc0-1.0", "pdm-1.0", "cc-by-nc-4.0",
                                 "cc-by-nd-4.0", None)] == [True, True, True, True, False, False, False]
    with pytest.raises(ConfigError, match="require_license"):
        OptOutConfig(require_license="cc")


def test_the_default_agents_are_the_lists_training_crawlers():
    """ai-robots-txt's agents whose stated function is collecting training data, and CCBot; not search or
    assistant agents."""
    assert training_agents() == TRAINING_AGENTS
    assert {"GPTBot", "CCBot", "Google-Extended", "ClaudeBot", "Bytespider", "AI2Bot"} <= set(TRAINING_AGENTS)
    assert not {"ChatGPT-User", "OAI-SearchBot", "PerplexityBot", "Claude-User"} & set(TRAINING_AGENTS)
