"""The quality judgment on real pages unlike the model's training: a hotel site's menu rendered as pipe tables
and a page of Chinese spam with mojibake (both scored >= 0.84 by the model alone) fall to the bottom, while the
signals leave real articles where the model put them."""
import pytest

from stages.extraction.extract import ExtractConfig, extract_text
from stages.quality import QualityScorer
from stages.quality_signals import RAMPS, cap, combine, is_chrome_line, signals
from stages.record import Document
from stages.text_repair import TextRepair
from tests.conftest import CC_EXCERPT, HTML_DIR, WAYBACK
from tests.stages.test_text_repair import page_text


def judged(text):
    doc = TextRepair()(Document(id="d", url="u", source="web", text=text))
    return QualityScorer().judge([doc])[0]


@pytest.mark.parametrize("warc, url_part", [
    (WAYBACK, "historichotels.org/press_release/hi_res"),   # menu, then a list of states and cities
    (WAYBACK, "historichotels.org:80/our_destinations"),     # menu, two paragraphs, all in table cells
    (WAYBACK, "casinocity.com/us/mi/brimley/baymills"),      # a casino directory entry
    (CC_EXCERPT, "003338.cn"),                               # 【x】 spam with GBK mojibake
])
def test_junk_the_model_rates_high_is_judged_junk(warc, url_part):
    doc = judged(page_text(warc, url_part))
    assert doc.quality_score < 0.05, (doc.scores, doc.quality_score)
    assert set(doc.scores) >= {"model_quality", "chrome_share", "symbol_share", "digit_share",
                               "repeated_line_share", "encoding_damage", "text_fixed"}


def test_articles_keep_the_models_score():
    pages = sorted(HTML_DIR.glob("*.html"))
    untouched = []
    for path in pages:
        text = extract_text(path.read_text(encoding="utf-8", errors="replace"), None,
                            ExtractConfig().trafilatura_options())
        doc = judged(text)
        untouched.append(doc.quality_score == pytest.approx(doc.scores["model_quality"]))
        assert doc.quality_score <= doc.scores["model_quality"]  # a signal never raises a page
    assert sum(untouched) >= 0.8 * len(pages), untouched  # 22 real pages: tables of figures and lists may cap


def test_signals_and_caps():
    assert is_chrome_line("| Home | Our Destinations |") and is_chrome_line("Contact us")
    assert not is_chrome_line("A sentence that ends.") and not is_chrome_line("x" * 60)
    menu = "\n".join(["Home", "About", "Products", "Contact", "Imprint", "Careers"])
    assert signals(menu)["chrome_share"] == 1.0
    assert signals("Home\nAbout")["chrome_share"] == 0.0  # too few lines to have a structure
    spam = "【随】【着】【经】【济】【社】【会】【的】【发】【展】"
    assert signals(spam)["symbol_share"] > 0.6
    tibetan = "བོད་ཀྱི་སྐད་ཡིག་ནི་བོད་ཀྱི་ཡུལ་དུ་བཀོལ་སྤྱོད་བྱེད།"  # the tsheg between syllables is prose
    assert signals(tibetan)["symbol_share"] == 0.0
    for name, (fine, junk) in RAMPS.items():
        assert cap(name, fine) == 1.0 and cap(name, junk) == 0.0 and 0 < cap(name, (fine + junk) / 2) < 1
    assert combine(0.9, {"chrome_share": 0.0, "encoding_damage": None}) == 0.9
