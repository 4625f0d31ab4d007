"""Per-language thresholds: the calibration rule, the file, and stages judging by the page's language."""
import pytest
import yaml

from common.settings import ConfigError
from stages.calibration import BY_KEY, calibrate, english_thresholds, measure, moved_threshold, quantile
from stages.gopher import GopherQuality, GopherQualityConfig
from stages.langid import LangIdConfig, LanguageIdentifier
from stages.record import Document, Drop
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
    # a length limit moves at least in proportion to the language's typical length (10 x 9.65 / 4.995)
    assert moved_threshold(metric, 10.0, english, long_words) == round(10.0 * quantile(long_words, 0.5)
                                                                       / quantile(english, 0.5), 4)
    stop_words = BY_KEY["gopher_quality.min_stop_words"]  # a count is not a length: the quantile rule alone
    assert moved_threshold(stop_words, 2, [5.0] * 100, sorted([0.0] * 30 + [4.0] * 70)) == 0


def test_language_id_thresholds_bound_wrong_labels_and_keep_own_pages():
    from stages.calibration import langid_thresholds

    own = {100: 90, 95: 8, 40: 2}                   # 100 pages of L labelled L: 98 % at >= 0.95
    labelled = {"L": {"L": own,
                      "near": {50: 30, 20: 10},       # 40 of 100 pages of a neighbour labelled L, all under 0.51
                      "twin": {100: 60, 99: 30},      # a dialect labelled L at full confidence (cannot be held back)
                      "unknown": {9: 50}}}            # a language the model cannot name, labelled L at 0.09
    pages = {"L": 100, "near": 100, "twin": 100, "unknown": 100}
    fitted = langid_thresholds(labelled, pages, min_docs=30)["L"]
    assert fitted["threshold"] == 0.51               # every separable neighbour held back; still keeps 98 % of L
    assert fitted["kept_true"] == 0.98 and fitted["let_through_worst"] == 0.9 and fitted["worst_foreign"] == "twin"
    assert fitted["held_back_by_second"] == ["twin"] and fitted["confident"] == 1.01  # CLD2 asked for every page
    easy = langid_thresholds({"M": {"M": {100: 100}, "x": {10: 5}}}, {"M": 100, "x": 100}, min_docs=30)["M"]
    assert easy["threshold"] == 0.3 and easy["confident"] == 0.3   # the floor; nothing else reaches it
    weak = langid_thresholds({"K": {"K": {15: 80, 40: 20}}}, {"K": 100}, min_docs=30)["K"]
    assert weak["threshold"] == 0.15 and weak["kept_true"] == 1.0  # lid.176 scores K low: under the floor, to 95 %
    thin = langid_thresholds({"K": {"K": {15: 8, 40: 2}}}, {"K": 10}, min_docs=30)["K"]
    assert thin["threshold"] == 0.3                                  # too few pages to say so: the floor
    greedy = langid_thresholds({"N": {"N": {100: 100}, "y": {90: 50}}}, {"N": 100, "y": 100}, min_docs=30)["N"]
    assert greedy["threshold"] == 0.65 and greedy["confident"] == 0.91  # the ceiling; above it CLD2 decides


def test_ngram_scale_from_parallel_word_counts():
    from stages.calibration import ngram_scale, with_ngram_scale
    from stages.gopher import GopherRepetition, GopherRepetitionConfig

    assert ngram_scale([150.0] * 9, [100.0] * 9) == 1.5 and ngram_scale([90.0] * 9, [100.0] * 9) == 1.0
    metrics = {"repetition.dup.5": [0.3], "repetition.dup.8": [0.1], "repetition.top.3": [0.2]}
    assert with_ngram_scale(metrics, 1.5)["gopher_repetition.max_dup_ngram_chars.5"] == [0.1]   # 5 x 1.5 -> 8
    assert with_ngram_scale(metrics, 1.5)["gopher_repetition.max_top_ngram_chars.2"] == [0.2]   # 2 x 1.5 -> 3
    # a page of syllables: short phrases recur as in any prose; at English n they look like repetition
    text = ("Theo báo cáo của chính phủ, giá gạo đã tăng mạnh trong tháng qua.\n"
            "Nông dân miền Tây cho biết theo báo cáo của chính phủ họ sẽ được hỗ trợ vốn.\n"
            "Các chuyên gia kinh tế nhận định rằng lạm phát vẫn nằm trong tầm kiểm soát.\n"
            "Theo báo cáo của chính phủ, xuất khẩu thủy sản cũng tăng so với năm ngoái.")
    config = GopherRepetitionConfig(max_top_ngram_chars=(), max_dup_ngram_chars=((5, 0.15),))
    english_n, scaled_n = GopherRepetition(config), GopherRepetition(GopherRepetitionConfig(
        max_top_ngram_chars=(), max_dup_ngram_chars=((5, 0.15),), ngram_scale=2.5))
    # what report.html shows next to a drop is measured at the n the run applied: here 5 x 1.4 -> 7 words
    raw, applied = measure(text, "vi", ngram_scale=None), measure(text, "vi", ngram_scale=1.4)
    assert applied["gopher_repetition.max_dup_ngram_chars.5"] == raw["repetition.dup.7"]
    assert english_n.evaluate(text, "vi")[0] == "dup_ngram_chars"
    assert scaled_n.evaluate(text, "vi") is None


def test_calibrate_keeps_english_and_gives_families_an_entry():
    en = {"gopher_quality.max_mean_word_length": [4.8] * 40}
    ml = {"gopher_quality.max_mean_word_length": [9.0 + i / 10 for i in range(40)]}
    result = calibrate({"en": en, "ml": ml, "ta": {"gopher_quality.max_mean_word_length": [9.0] * 3}},
                       {"en": "Latin", "ml": "Indic", "ta": "Indic"}, min_docs=30)
    assert result["languages"]["en"] == {}  # the reference keeps its thresholds
    ml_limit = round(10 * quantile(ml["gopher_quality.max_mean_word_length"], 0.5) / 4.8, 4)  # 10 x median / 4.8
    assert result["languages"]["ml"] == {"gopher_quality": {"max_mean_word_length": ml_limit}}
    assert "ta" not in result["languages"] and result["scripts"]["Indic"]["gopher_quality"]["max_mean_word_length"] > 12
    assert result["calibration"]["documents"] == {"en": 40, "ml": 40, "ta": 3}
    assert result["calibration"]["reference_thresholds"] == english_thresholds()
    with pytest.raises(ValueError, match="reference language"):
        calibrate({"de": en}, {"de": "Latin"}, min_docs=30)


def test_measure_matches_what_the_rule_decides():
    text = "\n".join(["The committee published its report on the state of the river basin in the spring."] * 3 +
                     ["Local farmers and fishermen were consulted over several months before it was written."] * 6)
    measured = measure(text, "en")
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
    assert set(bundled.languages["en"]) == {"langid"} and bundled.entry("ml", "gopher_quality")[0]["max_mean_word_length"] > 10
    # no script default below what its strictest language needs (the old file gave Latin 0.072)
    for family, entry in bundled.scripts.items():
        members = [lang["langid"]["threshold"] for code, lang in bundled.languages.items()
                   if script_family(code) == family and "langid" in lang]
        assert not members or entry["langid"]["threshold"] == max(members), family
    assert bundled.entry("vi", "gopher_repetition")[0]["ngram_scale"] > 1.2


def test_confusable_labels_are_counted_not_silently_accepted():
    from stages.thresholds import dominant_script_family

    assert [dominant_script_family(t) for t in ("Добрый день, Ivan", "東京は日本の首都です", "안녕하세요 여러분", "123 !!")] == [
        "Cyrillic", "CJK", "Hangul", ""]
    assert [dominant_script_family(t) for t in ("ab яб", "яб ab", "aab яяб")] == ["Latin", "Cyrillic", "Latin"]  # ties: seen first
    lid, notes = LanguageIdentifier(), []
    lid.count = lambda name, n=1: notes.append(name)
    cantonese = ("今日我哋去咗旅行，佢話好開心，但係我冇去過嗰度，唔知啲嘢係點樣。這是一個關於香港歷史的簡短介紹，"
                 "涵蓋了從古代到現代的重要事件，以及香港社會的發展和變化。")
    doc = lid(Document(id="1", url="", source="web", text=cantonese))
    assert doc.lang == "yue" and notes == ["relabel.yue.cantonese"]  # lid.176 says zh at 0.96; the particles: yue
    notes.clear()
    lid(Document(id="2", url="", source="web", text="这是一个关于中国历史的简短介绍，涵盖了从古代到现代的重要事件。"))
    assert notes == []
    egyptian = ("أنا مش عارف ليه الناس دي بتعمل كده، عشان إحنا دلوقتي محتاجين نفهم الموضوع ده كويس أوي قبل ما نقرر "
                "أي حاجة، والحكومة لازم تسمع كلام الناس اللي في الشارع.")
    doc = lid(Document(id="3", url="", source="web", text=egyptian))
    assert doc.lang == "arz" and notes == ["relabel.arz.egyptian"]   # lid.176: ar; the colloquial words: arz
    notes.clear()
    standard = ("أعلنت الحكومة اليوم عن خطة جديدة لتحسين التعليم في المدارس الحكومية، وقال الوزير إن الخطة "
                "ستبدأ في العام المقبل وتشمل تدريب المعلمين وتطوير المناهج الدراسية.")
    assert lid(Document(id="4", url="", source="web", text=standard)).lang == "ar" and notes == []


def test_a_setting_no_stage_applies_per_language_is_refused_in_one_line(tmp_path):
    """A toxicity entry was accepted, checked, written into the part markers and never applied (only the rule
    stages and language ID judge a page by its language's config); a misspelt section was ignored. Both are
    refused before any work, naming the entry; the bundled file passes."""
    from pipeline.job.config import load_config
    from pipeline.job.steps import preflight
    from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer

    for section, expected in (("toxicity", r"de\.toxicity: the toxicity stage does not read per-language settings"),
                              ("gopher_repetion", r"de\.gopher_repetion: no stage has a section 'gopher_repetion'")):
        path = tmp_path / f"{section}.yaml"
        path.write_text(yaml.safe_dump({"languages": {"de": {section: {"max_dup_line_fraction": 0.5}}}}))
        config = load_config(None, {"inputs": ["data/warc/*.warc.gz"], "output": str(tmp_path / "out"),
                                    "thresholds": str(path)})
        with pytest.raises(ConfigError, match=expected):
            preflight(config)
    path = tmp_path / "toxicity.yaml"
    with pytest.raises(ConfigError, match="does not read per-language settings"):
        attach(ToxicityScorer(ToxicityConfig()), ToxicityConfig(), "toxicity", str(path))
    preflight(load_config(None, {"inputs": ["data/warc/*.warc.gz"], "output": str(tmp_path / "out")}))
