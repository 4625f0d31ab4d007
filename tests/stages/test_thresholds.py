"""Per-language thresholds: the calibration rule, the file, and stages judging by the page's language."""
import pytest
import yaml

from stages.calibration import BY_KEY, calibrate, english_thresholds, measure, moved_threshold
from stages.gopher import GopherQuality, GopherQualityConfig
from stages.langid import LangIdConfig, LanguageIdentifier
from stages.record import Document, Drop
from stages.settings import ConfigError
from stages.thresholds import LanguageSettings, Thresholds, attach, load_thresholds, script_family


def test_script_families():
    assert [script_family(c) for c in ("en", "de", "ru", "zh", "ja", "ko", "hi", "ml", "th", "my", "ar", "am")] == [
        "Latin", "Latin", "Cyrillic", "CJK", "CJK", "Hangul", "Indic", "Indic", "SoutheastAsian", "SoutheastAsian",
        "Arabic", "Ethiopic"]


def test_the_rule_moves_a_threshold_only_where_english_thresholds_are_unfair():
    metric = BY_KEY["gopher_quality.max_mean_word_length"]
    english = sorted([4.5 + i / 100 for i in range(100)])          # all under 10: none removed
    similar = sorted([5.0 + i / 50 for i in range(100)])           # max 6.98: none removed either
    long_words = sorted([8.0 + i / 30 for i in range(100)])        # 8.0 .. 11.3: 40 % over 10
    assert moved_threshold(metric, 10.0, english, similar) == 10.0
    assert moved_threshold(metric, 10.0, english, long_words) == round(long_words[-1], 4)
    lid = BY_KEY["langid.threshold"]
    confident, unsure = sorted([0.9 + i / 1000 for i in range(100)]), sorted([0.2 + i / 200 for i in range(100)])
    assert moved_threshold(lid, 0.65, confident, unsure) == 0.2 and moved_threshold(lid, 0.65, confident, confident) == 0.65


def test_calibrate_keeps_english_and_gives_families_an_entry():
    en = {"gopher_quality.max_mean_word_length": [4.8] * 40, "langid.threshold": [0.95] * 40}
    ml = {"gopher_quality.max_mean_word_length": [9.0 + i / 10 for i in range(40)], "langid.threshold": [0.9] * 40}
    result = calibrate({"en": en, "ml": ml, "ta": {"langid.threshold": [0.9] * 3}},
                       {"en": "Latin", "ml": "Indic", "ta": "Indic"}, min_docs=30)
    assert result["languages"]["en"] == {}  # the reference keeps its thresholds
    assert result["languages"]["ml"] == {"gopher_quality": {"max_mean_word_length": 12.9}}
    assert "ta" not in result["languages"] and result["scripts"]["Indic"] == {"gopher_quality": {"max_mean_word_length": 12.9}}
    assert result["calibration"]["documents"] == {"en": 40, "ml": 40, "ta": 3}
    assert result["calibration"]["reference_thresholds"] == english_thresholds()
    with pytest.raises(ValueError, match="reference language"):
        calibrate({"de": en}, {"de": "Latin"}, min_docs=30)


def test_measure_matches_what_the_rule_decides():
    text = "\n".join(["The committee published its report on the state of the river basin in the spring."] * 3 +
                     ["Local farmers and fishermen were consulted over several months before it was written."] * 6)
    measured = measure(text, "en", 0.9)
    for key, setting in (("gopher_quality.min_words", "min_words"),
                         ("gopher_quality.max_mean_word_length", "max_mean_word_length"),
                         ("gopher_quality.min_stop_words", "min_stop_words")):
        value = measured[key]
        direction = BY_KEY[key].direction
        at = GopherQuality(GopherQualityConfig(**{setting: value}))
        beyond = GopherQuality(GopherQualityConfig(**{setting: value - 1 if direction == "max" else value + 1}))
        assert at.evaluate(text, "en") is None or at.evaluate(text, "en")[0] != beyond.evaluate(text, "en")[0]
        assert beyond.evaluate(text, "en") is not None, key


def test_a_stage_judges_by_the_pages_language_and_says_so(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"languages": {"de": {"gopher_quality": {"min_words": 5}}, "en": {}},
                                    "scripts": {"Latin": {"gopher_quality": {"min_words": 500}}}}))
    stage = GopherQuality()
    attach(stage, stage.config, "gopher_quality", str(path))
    words = " ".join(["Haus"] * 20)
    de = stage(Document(id="1", url="", source="web", text=words + " und der die das ist", lang="de"))
    fr = stage(Document(id="2", url="", source="web", text=words, lang="fr"))     # no entry: Latin's
    en = stage(Document(id="3", url="", source="web", text=words, lang="en"))     # calibrated: own (none)
    assert isinstance(de, Document)
    assert isinstance(fr, Drop) and fr.detail.endswith("< 500 (Latin threshold)")
    assert isinstance(en, Drop) and en.detail == "20 < 50"


def test_langid_threshold_per_label_and_bad_files(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"languages": {"hr": {"langid": {"threshold": 0.2}}}}))
    lid = LanguageIdentifier()
    attach(lid, lid.config, "langid", str(path))
    assert lid.config_for("hr").threshold == 0.2 and lid.config_for("de").threshold == 0.65
    path.write_text(yaml.safe_dump({"languages": {"hr": {"langid": {"threshold": "high"}}}}))
    with pytest.raises(ConfigError, match=r"hr\.langid.*threshold: expected a number"):
        attach(LanguageIdentifier(), LangIdConfig(), "langid", str(path))
    path.write_text(yaml.safe_dump({"languages": {"hr": {"langid": {"treshold": 0.2}}}}))
    with pytest.raises(ConfigError, match="unknown setting"):
        attach(LanguageIdentifier(), LangIdConfig(), "langid", str(path))
    with pytest.raises(ConfigError, match="no such file"):
        load_thresholds(str(tmp_path / "missing.yaml"))
    assert LanguageSettings(LangIdConfig(), "langid", Thresholds()).get("de") == (LangIdConfig(), "")


def test_the_bundled_file_loads_and_covers_many_languages():
    bundled = load_thresholds("bundled")
    assert len(bundled.languages) >= 80 and {"Latin", "Cyrillic", "Indic", "Arabic"} <= set(bundled.scripts)
    assert bundled.languages["en"] == {} and bundled.entry("ml", "gopher_quality")[0]["max_mean_word_length"] > 10


def test_confusable_labels_are_counted_not_silently_accepted():
    from stages.thresholds import dominant_script_family

    assert [dominant_script_family(t) for t in ("Добрый день, Ivan", "東京は日本の首都です", "안녕하세요 여러분", "123 !!")] == [
        "Cyrillic", "CJK", "Hangul", ""]
    lid, notes = LanguageIdentifier(), []
    lid.count = lambda name, n=1: notes.append(name)
    cantonese = ("今日我哋去咗旅行，佢話好開心，但係我冇去過嗰度，唔知啲嘢係點樣。這是一個關於香港歷史的簡短介紹，"
                 "涵蓋了從古代到現代的重要事件，以及香港社會的發展和變化。")
    doc = lid(Document(id="1", url="", source="web", text=cantonese))
    assert doc.lang == "zh" and notes == ["confusable.zh.cantonese"]  # lid.176 says zh at 0.96
    notes.clear()
    lid(Document(id="2", url="", source="web", text="这是一个关于中国历史的简短介绍，涵盖了从古代到现代的重要事件。"))
    assert notes == []
