"""A second look at pages of listed sites (issue 56): with `url_filter.second_look`, a site a block list names is
judged on its page's text: a magazine article is kept, an erotic story or a thin page of the same site is not."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from common.settings import ConfigError
from pipeline.job.run import run
from stages.extraction.extract import ExtractConfig, Extractor
from stages.extraction.warc import read_warc
from stages.harmful.listed_site import ListedSite, ListedSiteConfig
from stages.harmful.url_filter import LISTED_SCORE, UrlFilter, UrlFilterConfig
from stages.langid import LanguageIdentifier
from stages.record import Document, Drop
from stages.runner import StageRunner
from tests.conftest import CC_EXCERPT, HTML_DIR, MULTILINGUAL_SAMPLE, finished_rows

EROTIC_STORY = "http://0513mt.com/index.php/art/detail/id/8884.html"  # the CC excerpt's page: 12.4 listed words per 1,000
ARTICLE = HTML_DIR / "computerbase.de.htc.html"


def erotic_story_html() -> str:
    with open(CC_EXCERPT, "rb") as fh:
        return next(d.html for d in read_warc(fh, source="cc") if isinstance(d, Document) and d.url == EROTIC_STORY)


def extracted(url: str, html: str) -> Document:
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with chain:
        return chain(Document(id=url, url=url, source="web", html=html))


def test_a_listed_site_is_marked_not_dropped_only_for_the_lists_named(tmp_path):
    doc = Document(id="1", url="https://gay.ch/news/vatikan-eltern", source="web")
    assert isinstance(UrlFilter()(doc), Drop)  # by default UT1 adult blocks the domain
    marked = UrlFilter(UrlFilterConfig(second_look=("adult",)))(doc)
    assert isinstance(marked, Document) and marked.scores[LISTED_SCORE] == 1.0
    # FineWeb's URL words still drop a marked site's page; an unlisted site passes unmarked
    words = UrlFilter(UrlFilterConfig(second_look=("adult",)))(doc.replace(url="https://gay.ch/porn-videos"))
    assert isinstance(words, Drop) and words.reason == "banned_word"
    plain = UrlFilter(UrlFilterConfig(second_look=("adult",)))(doc.replace(url="https://example.org/news"))
    assert isinstance(plain, Document) and LISTED_SCORE not in plain.scores
    # a second look at one list does not shadow another list that blocks the site outright
    own = tmp_path / "blocked.txt"
    own.write_text("gay.ch\n", encoding="utf-8")
    both = UrlFilter(UrlFilterConfig(second_look=("adult",), block_lists=(str(own),)))(doc)
    assert isinstance(both, Drop) and both.detail == "gay.ch (list:blocked.txt)"
    with pytest.raises(ConfigError, match="second_look names lists that block nothing"):
        UrlFilterConfig(second_look=("gambling",))


def test_the_text_decides_article_kept_erotic_story_and_thin_page_dropped():
    stage = ListedSite()
    article = extracted("https://gay.ch/news/a", ARTICLE.read_text(encoding="utf-8")).with_score(LISTED_SCORE, 1.0)
    assert stage(article) is article
    story = extracted("https://gay.ch/story/1", erotic_story_html()).with_score(LISTED_SCORE, 1.0)
    dropped = stage(story)
    assert isinstance(dropped, Drop) and dropped.reason == "listed_site_confirmed"
    assert "listed words per 1000" in dropped.detail and dropped.value >= 10 and dropped.threshold == 1.0
    thin = stage(article.replace(text="Hot videos. Watch now. Free clips every day."))
    assert isinstance(thin, Drop) and "words < 150" in thin.detail
    toxic = stage(article.replace(toxicity_score=0.93))
    assert isinstance(toxic, Drop) and "toxicity 0.93" in toxic.detail
    assert stage(article.replace(quality_score=0.1)) is not None
    low = ListedSite(ListedSiteConfig(min_quality=0.5))(article.replace(quality_score=0.1))
    assert isinstance(low, Drop) and "quality 0.10 < 0.5" in low.detail
    # a page of an unlisted site is not this stage's business, whatever its text
    assert stage(story.replace(scores={})) is not None and isinstance(stage(story.replace(scores={})), Document)
    with pytest.raises(ConfigError):
        ListedSiteConfig(max_toxicity=2.0)


def test_a_page_in_a_language_without_a_bad_word_list_cannot_clear_a_listed_site():
    """Its listed words would count 0 whatever it says (104 of lid.176's languages have no LDNOOBW list), so the text
    check cannot show it is clean: real Malagasy news (NTREX-128) on a listed site is dropped unless
    `require_word_list` is off; `languages` narrows the second look to the languages a user names."""
    malagasy = "\n".join((MULTILINGUAL_SAMPLE / "ntrex128" / "NTREX-128" / "newstest2019-ref.mlg.txt")
                         .read_text(encoding="utf-8").splitlines()[:20])
    assert len(malagasy.split()) >= 150 and ListedSite()._bad_words.word_list("mg") is None
    page = Document(id="mg", url="https://gay.ch/mg", source="web", text=malagasy, lang="mg").with_score(LISTED_SCORE, 1.0)
    dropped = ListedSite()(page)
    assert isinstance(dropped, Drop) and dropped.detail.endswith(
        "language mg has no bad-word list: its text cannot clear a listed site")
    assert ListedSite(ListedSiteConfig(require_word_list=False))(page) is page
    article = extracted("https://gay.ch/news/a", ARTICLE.read_text(encoding="utf-8")).with_score(LISTED_SCORE, 1.0)
    assert article.lang == "de" and ListedSite(ListedSiteConfig(languages=("de", "en")))(article) is article
    other = ListedSite(ListedSiteConfig(languages=("en",)))(article)
    assert isinstance(other, Drop) and "language de not in listed_site.languages" in other.detail


def test_a_run_with_second_look_keeps_the_magazine_and_ledgers_the_story(warc_builder, tmp_path):
    warc = (warc_builder(tmp_path / "listed.warc.gz")
            .response("https://gay.ch/news/vatikan", ARTICLE.read_bytes())
            .response("https://gay.ch/story/1", erotic_story_html().encode("utf-8"))
            .close())
    out = tmp_path / "out"
    # bad_words off: the story (12.4 listed words per 1,000) would be its drop first; here the second look's
    report = run(["--input", str(warc), "--output", str(out), "--quiet", "--no-dedup", "--no-bad-words",
                  "--url-filter-second-look", "adult"])
    assert report["conservation"]["holds"]
    shards = finished_rows(out)
    assert [(r["url"], r["url_listed"]) for r in shards] == [("https://gay.ch/news/vatikan", 1.0)]
    ledger = pq.read_table(str(out / "ledger")).to_pylist()
    assert [(r["url"], r["stage"], r["reason"]) for r in ledger] == [
        ("https://gay.ch/story/1", "listed_site", "listed_site_confirmed")]
    # without the switch both are dropped by their domain, before extraction
    again = run(["--input", str(warc), "--output", str(tmp_path / "plain"), "--quiet", "--no-dedup"])
    assert again["conservation"]["holds"]
    rows = pq.read_table(str(tmp_path / "plain" / "ledger")).to_pylist()
    assert sorted((r["stage"], r["reason"]) for r in rows) == [("url_filter", "blocked_domain")] * 2
