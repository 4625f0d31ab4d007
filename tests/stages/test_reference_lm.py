"""The reference language models behind `lm_surprise`: the hashed, quantized tables give the Witten-Bell
probabilities they were fitted to, and the bundled models rate web prose of another source than their
training text (Leipzig's sentences) near 1 in every language, and a menu, the wrong language or broken text
well above the level where the quality cap starts."""
import math
from collections import Counter

import pytest

from stages.quality_signals import RAMPS
from stages.reference_lm import LanguageModel, ReferenceModels, code_points, fit, normalize
from tests.conftest import TEST_DATA, WAYBACK
from tests.stages.test_text_repair import page_text

SENTENCES = TEST_DATA / "multilingual" / "sentences"


def witten_bell_bits(train: list[str], text: str) -> float:
    """Mean bits per character of `text` under an interpolated Witten-Bell trigram model of `train`, written
    out with dictionaries, for comparison with the hashed tables."""
    grams = {1: Counter(), 2: Counter(), 3: Counter()}
    for t in train:
        cp = [chr(c) for c in code_points(normalize(t)).tolist()]
        for i in range(2, len(cp)):
            grams[1][cp[i]] += 1
            grams[2][(cp[i - 1], cp[i])] += 1
            grams[3][(cp[i - 2], cp[i - 1], cp[i])] += 1
    total, vocab = sum(grams[1].values()), len(grams[1])

    def p(order, context, c):
        if order == 1:
            return (grams[1][c] + 1) / (total + vocab + 1) if c in grams[1] else 2.0 ** -16
        key = (*context, c)
        followers = [g for g in grams[order] if g[:-1] == tuple(context)]
        count_context, types = sum(grams[order][g] for g in followers), len(followers)
        lower = p(order - 1, context[1:], c)
        if key in grams[order]:
            return (grams[order][key] + types * lower) / (count_context + types)
        return (types / (count_context + types) if types else 1.0) * lower

    cp = [chr(c) for c in code_points(normalize(text)).tolist()]
    return sum(-math.log2(p(3, cp[i - 2:i], cp[i])) for i in range(2, len(cp))) / (len(cp) - 2)


def test_tables_give_the_witten_bell_model():
    train = ["The cat sat on the mat.", "A cat and a hat sat at the gate.", "That man has 12 mats and 3 hats."]
    model = LanguageModel(3, fit(train, orders=3), level=1.0)
    for text in ("The hat sat on a cat at the gate.", "Mats, hats and cats: 45 of them.", "qxz unseen wzk letters"):
        assert model.bits(text) == pytest.approx(witten_bell_bits(train, text), abs=1 / 32)  # 1/16-bit steps


def documents(lang: str, per_doc: int = 8) -> list[str]:
    lines = [line.strip() for line in (SENTENCES / f"{lang}.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    return ["\n".join(lines[i:i + per_doc]) for i in range(0, len(lines) - per_doc + 1, per_doc)]


@pytest.mark.parametrize("lang", ["ar", "de", "en", "es", "fr", "ja", "nl", "pl", "ru", "zh"])
def test_web_prose_of_another_source_is_near_the_level(lang):
    values = sorted(ReferenceModels().surprise(d, lang) for d in documents(lang))
    assert 0.85 <= values[len(values) // 2] <= 1.2, values
    assert values[-1] < RAMPS["lm_surprise"][0], values  # no prose document is capped


def test_junk_is_surprising():
    models = ReferenceModels()
    german = " ".join(documents("de")[:2])
    english_prose = documents("en")[0]
    assert models.surprise(german, "en") > 1.4 > models.surprise(german, "de")  # the wrong language
    garbled = english_prose.encode("utf-8").decode("cp1252", errors="replace")
    assert models.surprise("".join(c + "\u00e2\u20ac" for c in english_prose), "en") > 2.0
    assert models.surprise(garbled, "en") >= models.surprise(english_prose, "en")
    # a real hotel site's menu and list of states and cities (the quality model alone rated its pages 1.00)
    menu = page_text(WAYBACK, "historichotels.org/press_release/hi_res")
    assert models.surprise(menu, "en") > RAMPS["lm_surprise"][0]


def test_no_model_no_value_and_short_text():
    models = ReferenceModels()
    assert models.surprise(documents("en")[0], "xx") is None
    assert models.surprise(documents("en")[0], None) is None
    assert models.surprise("Too short.", "en") is None


def test_a_missing_or_foreign_file_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="make reference-lm"):
        ReferenceModels(str(tmp_path / "none.npz"))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz file")
    with pytest.raises(ValueError, match="not a reference language model file"):
        ReferenceModels(str(bad))
