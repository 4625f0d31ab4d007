"""Text repair: ftfy undoes mojibake made the way it happens on the web, leaves correct text of every script
alone, and measures the damage it cannot undo (the real Chinese spam page of the CC excerpt)."""
import ftfy.bad_codecs  # noqa: F401  (registers the sloppy-windows-125x codecs)
import pytest

from stages.extraction.extract import ExtractConfig, extract_text
from stages.extraction.warc import read_warc
from stages.record import Document, Drop
from stages.text_repair import TextRepair, TextRepairConfig, damage, repair
from tests.conftest import CC_EXCERPT, MULTILINGUAL_SAMPLE, SENTENCES_DIR


def real_sentences():
    return {path.stem: path.read_text(encoding="utf-8") for path in sorted(SENTENCES_DIR.glob("*.txt"))}


def ntrex_texts():
    return {path.name: path.read_text(encoding="utf-8")
            for path in sorted((MULTILINGUAL_SAMPLE / "ntrex128" / "NTREX-128").glob("*.txt"))}


def page_text(warc, url_part):
    with open(warc, "rb") as fh:
        for doc in read_warc(fh, source="web", filename=str(warc)):
            if isinstance(doc, Document) and url_part in doc.url:
                return extract_text(doc.html, doc.url, ExtractConfig().trafilatura_options())
    raise AssertionError(f"{url_part} not in {warc}")


# Decoded as browsers do (WHATWG): Windows-1252's five undefined bytes become C1 controls, not errors.
@pytest.mark.parametrize("wrong, scripts", [("sloppy-windows-1252", None), ("latin-1", None),
                                            ("sloppy-windows-1251", ("ru", "rus"))])
def test_mojibake_of_real_text_is_undone(wrong, scripts):
    """UTF-8 read as Windows-1252 or Latin-1 (any language), as Windows-1251 (Cyrillic pages: ftfy's
    sloppy-1251 is made for them; Arabic read as 1251 stays garbled and is measured as damage instead).
    Line by line, as pages are fixed: a short line can lack the evidence ftfy needs, and then its damage shows."""
    texts = {name: text for name, text in {**real_sentences(), **ntrex_texts()}.items()
             if scripts is None or any(name == code or f".{code}." in name for code in scripts)}
    lines = [line for text in texts.values() for line in text.splitlines()[:40] if not line.isascii()]
    fixed = unfixed = 0
    for line in lines:
        repaired, kinds = repair(line.encode("utf-8").decode(wrong))
        if repaired == repair(line)[0]:  # as the correct line comes out (NFC, its own C1 quotes fixed)
            assert kinds[0] == "mojibake"
            fixed += 1
        else:
            unfixed += 1
            assert damage(repaired) > 0, repaired  # what stays garbled is measured
    assert fixed >= 0.97 * len(lines) and len(lines) >= (50 if scripts else 300), (fixed, unfixed)


def test_correct_text_of_every_script_is_left_alone():
    changed = {}
    for name, text in {**real_sentences(), **ntrex_texts()}.items():
        fixed, kinds = repair(text)
        if fixed != text:
            changed[name] = (kinds, sorted({c for line, new in zip(text.splitlines(), fixed.splitlines())
                                            if line != new for c in line if c not in new}))
        assert damage(fixed) < 0.001, name
    # Arabic: NFC puts two combining marks in canonical order; French: Windows-1252 apostrophes stored as C1
    # control characters (U+0092) in the source file, the one real damage in these texts, become ’.
    assert changed == {"ar": (["NFC"], []), "fr": (["mojibake"], ["\x92"])}


def test_unfixable_chinese_mojibake_is_measured_and_dropped():
    text = page_text(CC_EXCERPT, "003338.cn")  # UTF-8 read as GBK, odd bytes lost as "?": ftfy cannot undo it
    assert "鏄?笉鏄" in text
    assert 0.002 < damage(text) < 0.05      # five damaged phrases in a page of spam
    garbled = "这是对澳门供水桥头堡珠海竹仙洞水库的报道".encode().decode("gbk", errors="replace")
    assert damage(garbled) > 0.9
    doc = Document(id="d", url="u", source="web", text=garbled)
    dropped = TextRepair()(doc)
    assert isinstance(dropped, Drop) and dropped.reason == "encoding_damage" and dropped.value > 0.9
    kept = TextRepair(TextRepairConfig(max_damage=None))(doc)
    assert kept.scores["encoding_damage"] > 0.9 and kept.scores["text_fixed"] == 0.0


def test_stage_records_each_kind_of_fix_and_the_flag():
    noted = []
    stage = TextRepair()
    stage.count = lambda name, n=1: noted.append(name)
    text = "Été à Paris".encode().decode("cp1252") + "\x00, café crème"
    out = stage(Document(id="d", url="u", source="web", text=text))
    assert out.text == "Été à Paris, café crème"
    assert out.scores["text_fixed"] == 1.0 and out.scores["encoding_damage"] == 0.0
    assert noted == ["fixed.mojibake", "fixed.remove_control_chars"]
    same = stage(Document(id="e", url="u", source="web", text="Plain “typographic” text — kept as it is."))
    assert same.text == "Plain “typographic” text — kept as it is." and same.scores["text_fixed"] == 0.0


def test_ftfy_badness_pattern_under_re2_finds_what_ftfy_finds():
    """BADNESS_RE is ftfy's pattern compiled by RE2 (100x faster): the same spans on correct text of every
    language, the same texts flagged on mojibake (where the alternation may choose another branch's span)."""
    from stages.text_repair import _FTFY_BADNESS, BADNESS_RE

    texts = list({**real_sentences(), **ntrex_texts()}.values())
    for text in texts:
        assert [m.span() for m in BADNESS_RE.finditer(text)] == [m.span() for m in _FTFY_BADNESS.finditer(text)]
    garbled = [t[:3000].encode().decode("cp1252", errors="replace") for t in texts]
    ours = [sum(m.end() - m.start() for m in BADNESS_RE.finditer(t)) for t in garbled]
    ftfys = [sum(m.end() - m.start() for m in _FTFY_BADNESS.finditer(t)) for t in garbled]
    assert [bool(n) for n in ours] == [bool(n) for n in ftfys] and abs(sum(ours) - sum(ftfys)) <= 0.05 * sum(ftfys)


def test_sequences_of_correct_text_that_ftfys_pattern_finds_are_not_damage():
    """ftfy's badness pattern also finds correct text: Slovenian quotes »Če«, Lombard œ, Ewe ƒã. Counted as
    damage they capped the quality of Slovenian news (one quote in 2,000 characters starts the cap); only
    sequences whose bytes in a single-byte charset are UTF-8 are mojibake."""
    from stages.text_repair import is_mojibake

    assert not any(is_mojibake(s) for s in ("»Č", "»Š", "œ ", "ƒã"))
    assert all(is_mojibake(s) for s in ("Ã¼", "â€", "Ă¤", "Ð¿Ñ€"))
    slovenian = "»Še pet tednov do volitev,« je dejal. »Čeprav ne moremo ničesar pridobiti, ostajamo.« " * 20
    assert damage(slovenian) == 0.0


def test_words_run_together_are_not_mojibake():
    """A lost space puts a letter before a capital: Polish "ę" + "Ż" is EA AF in Windows-1250, the start of a
    3-byte UTF-8 character that the next letter does not go on. Correct text with 5 % of its word pairs run
    together gains no damage in any language here (bench/run_together.py: the same on all of NTREX-128 and
    FLORES-200, 0 false drops)."""
    import random

    from bench.run_together import run_together

    joined = "Nienawidzę Żydów, mówi. NienawidzęŻydów #ŻyjęŚwiadomie www.ŁódźŚródmieście.pl"
    assert damage(joined) == 0.0
    assert isinstance(TextRepair()(Document(id="d", url="u", source="web", text="NienawidzęŻydów")), Document)
    rng = random.Random(0)
    for name, text in {**real_sentences(), **ntrex_texts()}.items():
        assert damage(repair(run_together(text, 0.05, rng))[0]) <= damage(repair(text)[0]), name
    assert damage("café â€") > 0  # misread UTF-8 whose last byte the end of the text cut off: still damage
