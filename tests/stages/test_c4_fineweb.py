from stages.c4 import C4Config, C4Filter
from stages.fineweb import FineWebConfig, FineWebFilter
from stages.record import Document, Drop, DropReason
from tests.conftest import SENTENCES_DIR

EN = (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()


def doc(text, lang="en"):
    return Document(id="t", url="u", source="web", text=text, lang=lang)


def c4(text, **cfg):
    return C4Filter(C4Config(enabled=True, **cfg))(doc(text))


def long_lines(n, start=0):
    return [line for line in EN[start:] if len(line.split()) >= 5 and line.endswith(".")][:n]


def test_c4_keeps_only_lines_that_pass_the_line_rules():
    good = long_lines(4)
    text = "\n".join(good + ["Menu", "Home | About | Contact", "Read more...", "This site uses cookies to improve things.",
                             "Please enable JavaScript to view the comments.", "Short line here."])
    out = c4(text)
    assert isinstance(out, Document) and out.text.split("\n") == good


def test_c4_page_rules():
    good = long_lines(4)
    assert c4("\n".join(good + ["Lorem ipsum dolor sit amet, consectetur adipiscing elit."])).reason is DropReason.C4_LOREM_IPSUM
    assert c4("\n".join(good + ["function f() { return the value of the thing; }."])).reason is DropReason.C4_CURLY_BRACKET
    assert c4("\n".join(long_lines(2))).reason is DropReason.C4_TOO_FEW_SENTENCES
    assert isinstance(c4("\n".join(long_lines(3))), Document)
    assert c4("\n".join(good), max_page_chars=100).reason is DropReason.C4_TOO_LONG
    # citations are removed before the end-mark check
    out = c4("\n".join(good + ["The river is long and wide and deep.[1]"]))
    assert out.text.endswith("The river is long and wide and deep.")


def fineweb(text, **cfg):
    return FineWebFilter(FineWebConfig(enabled=True, **cfg))(doc(text))


def test_fineweb_rules_at_both_sides():
    prose = "\n".join(EN[:20])
    assert isinstance(fineweb(prose), Document)
    no_punct = "\n".join(line.rstrip(".!?\"'") for line in EN[:20])
    assert fineweb(no_punct).reason is DropReason.FINEWEB_LINE_PUNCT
    short = "\n".join(EN[:3] + [f"Item {i}." for i in range(10)])
    assert fineweb(short).reason is DropReason.FINEWEB_SHORT_LINES
    dup = "\n".join(EN[:20] + EN[:1])
    assert fineweb(dup).reason is DropReason.FINEWEB_DUP_LINE_CHARS
    assert isinstance(fineweb(dup, max_dup_line_chars=None), Document)
    listy = "\n".join(f"Item {i} works." for i in range(30))  # 3 words a line
    assert fineweb(listy, max_short_lines=None, max_dup_line_chars=None).reason is DropReason.FINEWEB_NEWLINE_RATIO


def test_fineweb_terminal_punctuation_is_multilingual():
    zh = (SENTENCES_DIR / "zh.txt").read_text(encoding="utf-8").splitlines()[:20]
    assert sum(line.endswith("。") for line in zh) >= 10  # full-width stops, which an ASCII-only check misses
    result = fineweb("\n".join(zh), max_short_lines=None)
    assert not (isinstance(result, Drop) and result.reason is DropReason.FINEWEB_LINE_PUNCT)
    stripped = fineweb("\n".join(line.rstrip("。！？.?!”") for line in zh), max_short_lines=None)
    assert stripped.reason is DropReason.FINEWEB_LINE_PUNCT
