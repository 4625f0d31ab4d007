"""The URL filter on the real lists it ships (UT1 adult: 4.56 M domains; FineWeb's URL words)."""
import numpy as np
import pytest

from common.settings import ConfigError
from stages.harmful.hashset import HashedSet, key_hash, load_hashed_set
from stages.harmful.url_filter import UrlFilter, UrlFilterConfig
from stages.record import Document, Drop


@pytest.fixture(scope="module")
def url_filter():
    stage = UrlFilter()
    stage.setup()
    return stage


def verdict(stage, url):
    found = stage.verdict(url)
    return found[0] if found else None


def test_a_listed_domain_blocks_itself_and_every_subdomain_but_not_lookalikes(url_filter):
    # sex.com and 0-1sex.com are on UT1's adult list; essex.com, sussex.ac.uk and middlesex.edu are not
    for url in ("https://sex.com/", "http://www.sex.com/videos", "https://a.b.sex.com/x", "https://0-1sex.com"):
        assert verdict(url_filter, url) == "blocked_domain", url
    for url in ("https://www.essex.com/news", "https://www.sussex.ac.uk/", "https://www.middlesex.edu/about"):
        assert url_filter.verdict(url) is None, url
    assert url_filter.verdict("https://videos.0-1sex.com/a")[1] == "0-1sex.com (ut1:adult)"


def test_parents_stop_at_the_registered_domain(url_filter):
    parts = url_filter.parts("https://www.a.news.bbc.co.uk:8080/world/europe/?q=1")
    assert parts.host == "a.news.bbc.co.uk"
    assert parts.hosts == ("a.news.bbc.co.uk", "news.bbc.co.uk", "bbc.co.uk")  # never the suffix co.uk
    assert parts.paths == ("a.news.bbc.co.uk/world", "a.news.bbc.co.uk/world/europe")
    assert url_filter.parts("http://[::1/broken").hosts == ()  # unparseable: word rules only, no error


def test_listed_urls_block_their_path_and_below(url_filter):
    # from UT1's adult `urls` list (host/path, no scheme)
    listed = "0149614511.strimbat.fr/porno-anal-escort-granville-faire-sa-salope-baise-une-vache-video-gratuite-x-escort-girl-auxerre"
    assert url_filter.verdict(f"https://{listed}")[0] in ("blocked_url", "banned_word")
    stage = UrlFilter(UrlFilterConfig(word_rules=False))
    stage.setup()
    assert stage.verdict(f"https://{listed}/page2?x=1") == ("blocked_url", f"{listed} (ut1:adult)")
    assert stage.verdict("https://0149614511.strimbat.fr/other-page") is None


def test_fineweb_word_rules_on_hand_picked_urls(url_filter):
    cases = {
        "https://example.org/tags/porn/": "banned_word",              # a banned word as a URL token
        "https://example.org/Tags/PORN/": "banned_word",              # in any case
        "https://example.org/pornography-and-the-law": None,          # one soft word ('pornography')
        "https://example.org/gallery/sexy-nude-photos": "soft_banned_words",  # two soft words
        "https://example.org/gallery/sexy-dresses": None,             # one soft word is not enough
        "https://example.org/2-girls-1-cup-reaction": "banned_subword",   # '2girls1cup' once squeezed
        "https://example.org/essex-county/news": None,
        "https://www.scunthorpe-united.co.uk/": None,                 # the Scunthorpe problem: tokens, not substrings
    }
    for url, expected in cases.items():
        assert verdict(url_filter, url) == expected, url


def test_the_allowlist_wins_over_every_block_rule(tmp_path, url_filter):
    # doctissimo.fr is in UT1's sexual_education list; its sexuality pages have soft-banned words
    assert url_filter.verdict("https://www.doctissimo.fr/sexualite/orgasm-and-nude-bodies") is None
    blocked = UrlFilter(UrlFilterConfig(allow_categories=()))
    blocked.setup()
    assert blocked.verdict("https://www.doctissimo.fr/sexualite/orgasm-and-nude-bodies")[0] == "soft_banned_words"
    allow = tmp_path / "allow.txt"
    allow.write_text("# our partners\nsex.com/help\nwww.gay.ch\n")
    stage = UrlFilter(UrlFilterConfig(allow_lists=(str(allow),)))
    stage.setup()
    assert stage.verdict("https://sex.com/help/contact") is None       # a listed URL prefix
    assert stage.verdict("https://sex.com/other")[0] == "blocked_domain"
    assert stage.verdict("https://news.gay.ch/queer-kids") is None      # a listed domain and below


def test_user_block_lists_and_extra_categories(tmp_path):
    block = tmp_path / "ours.txt"
    block.write_text("Spam-Farm.example\nnews.example/paid-posts\n")
    stage = UrlFilter(UrlFilterConfig(categories=("adult", "gambling"), block_lists=(str(block),)))
    stage.setup()
    assert stage.verdict("https://www.spam-farm.example/a") == ("blocked_domain", "spam-farm.example (list:ours.txt)")
    assert stage.verdict("https://news.example/paid-posts/2024/x")[0] == "blocked_url"
    assert stage.verdict("https://news.example/politics") is None
    assert stage.verdict("https://www.pokerstars.com/")[1] == "pokerstars.com (ut1:gambling)"  # UT1 gambling
    assert UrlFilter().verdict("https://www.pokerstars.com/") is None  # not blocked by default


def test_config_errors_are_one_line():
    with pytest.raises(ConfigError, match="unknown UT1 categories.*shipped: adult"):
        UrlFilterConfig(categories=("adult", "violence"))
    with pytest.raises(FileNotFoundError, match="list file"):
        UrlFilter(UrlFilterConfig(block_lists=("/nonexistent/list.txt",))).check()


def test_documents_without_url_pass_and_drops_name_the_rule(url_filter):
    assert isinstance(url_filter(Document(id="1", url="", source="code", text="x")), Document)
    drop = url_filter(Document(id="2", url="https://www.sex.com/", source="web"))
    assert isinstance(drop, Drop) and (drop.stage, drop.reason, drop.detail) == (
        "url_filter", "blocked_domain", "sex.com (ut1:adult)")


def test_hashed_set_is_exact_on_its_keys_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("REFINERY_CACHE", str(tmp_path / "cache"))
    keys = [f"host{i}.example" for i in range(50_000)]
    listed = tmp_path / "list.txt"
    listed.write_text("\n".join(keys) + "\n")
    built = load_hashed_set([str(listed)], str.lower, "t")
    assert all(k in built for k in keys[::97]) and len(built) == 50_000
    assert not any(f"other{i}.example" in built for i in range(20_000))
    assert built.nbytes < 50_000 * 8 + 70_000 * 4 and built.false_positive_rate < 1e-14
    (cached,) = (tmp_path / "cache" / "hashsets").glob("*.npy")
    again = load_hashed_set([str(listed)], str.lower, "t")
    assert isinstance(again.hashes, np.memmap) and np.array_equal(again.hashes, built.hashes)
    listed.write_text("\n".join(keys[:10]) + "\n")  # new content: a new cache entry, not the stale one
    assert len(load_hashed_set([str(listed)], str.lower, "t")) == 10
    assert HashedSet.from_keys([]).hashes.size == 0 and "x" not in HashedSet.from_keys([])
    assert key_hash("sex.com") == 0x52ee7ae4fea0711f  # stable across processes (blake2b, not hash())


def test_the_url_words_drop_no_benign_group_sentence_and_catch_a_third_of_ut1s_adult_urls():
    """Issue 56, item 3 (every harmful-content filter measured for identity bias), on the repo's own data as
    bench/url_words.py measures it: FineWeb's URL word rules alone drop none of our benign sentences naming a group
    (15 languages, friendly, neutral and counter-speech) made into the URL a site makes of a title, and catch about
    a third of UT1's adult URLs (32.4 % in bench/RESULTS.md). What they do cost is ordinary words of other languages:
    Swedish "till slut" (in the end) is a banned English word."""
    from bench.url_words import ADULT_URLS, WordRules, adult_urls, slug_url
    from stages.harmful.identity_frames import counter_rows, evaluation_rows, lexicons

    rules = WordRules()
    benign = [r.text for lang in lexicons() for r in evaluation_rows(lang) + counter_rows(lang) if not r.toxic]
    assert len(benign) > 5000
    assert [t for t in benign if rules(slug_url(t))] == []
    urls = adult_urls()[ADULT_URLS]
    assert 0.30 < sum(rules(u) is not None for u in urls) / len(urls) < 0.35
    swedish = "En läckande nålventil gör att flottörnivån stiger och till slut flödar över."
    assert slug_url(swedish).endswith("/en-lackande-nalventil-gor-att-flottornivan-stiger-och-till-slut-flodar-over")
    assert rules(slug_url(swedish)) == ("banned_word", "slut")
