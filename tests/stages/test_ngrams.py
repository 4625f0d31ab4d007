"""N-grams counted in words of content (scripts without spaces): the definition, checked against a plain
implementation, what it decides that ICU's pieces got wrong, and real parallel text judged like English."""
import collections
import random

import pytest

from stages.gopher import GopherRepetition, GopherRepetitionConfig
from stages.ngrams import NGrams, content_words
from tests.conftest import SHARED_DATA, needs_shared


def _reference(words, weights, n):
    """The definition spelled out: from each start, the shortest run holding n words of content."""
    runs = []
    for start in range(len(words)):
        total, end = 0.0, start
        while end < len(words) and total < n - 1e-9:
            total += weights[end]
            end += 1
        if total >= n - 1e-9:
            runs.append((start, end, tuple(words[start:end])))
    counts = collections.Counter(gram for _, _, gram in runs)
    covered = [False] * len(words)
    for start, end, gram in runs:
        if counts[gram] > 1:
            covered[start:end] = [True] * (end - start)
    duplicated = sum(w for w, c in zip(weights, covered) if c)
    top = 0.0
    if counts and max(counts.values()) > 1:
        best = max(counts.values())
        top = min(max(sum(weights[s:e]) for s, e, g in runs if counts[g] == best) * best, sum(weights))
    return top, duplicated


def test_content_ngrams_equal_the_definition():
    rng = random.Random(5)
    pieces = ["の", "は", "権利", "を", "有", "する", "すべて", "人", "willoughby", "1918年", "ทุกคน", "มี", "自由"]
    for _ in range(300):
        vocab = rng.sample(pieces, rng.randint(1, 6))
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 50))]
        rate = rng.choice([1.6, 2.4, 5.5])
        grams, weights = NGrams(words, rate), list(content_words(words, rate))
        for n in range(1, 11):
            top, duplicated = _reference(words, weights, n)
            assert grams.top_chars(n) == pytest.approx(top) and grams.duplicated_chars(n) == pytest.approx(duplicated)


def test_a_piece_counts_its_script_characters_and_any_other_piece_one_word():
    assert list(content_words(["権利", "を", "willoughby", "1918年", "ทุกคน"], 2.0)) == [1.0, 0.5, 1.0, 1.5, 2.5]


def test_a_latin_name_in_chinese_text_is_one_word_not_ten_characters():
    """zh-TW news keeps English names in Latin letters: a repeated name was one ICU piece of 10 "characters",
    a repeated 5-gram all by itself. Counted as content it is one word of the five."""
    words = ["willoughby", "在", "節目", "中", "說", "他", "很", "高興", "willoughby", "也", "表示", "同意", "這", "件", "事"]
    assert NGrams(words, 1.7).duplicated_share(5) == 0.0
    assert NGrams(words).duplicated_share(2) == 0.0 and NGrams(words).duplicated_share(1) > 0.3  # the name repeats


def test_japanese_cut_finer_by_icu_spans_the_same_content():
    """ICU cuts a kana ending into one-character pieces in one sentence and not in another: pieces differ,
    content does not, so a rule counted in content judges both alike."""
    coarse = ["権利", "を", "有する", "ことが", "できる"]
    fine = ["権利", "を", "有", "する", "こと", "が", "でき", "る"]
    assert content_words(coarse, 2.4).sum() == pytest.approx(content_words(fine, 2.4).sum())


def test_a_page_repeating_a_phrase_still_fails_when_counted_in_content():
    spam = "\n".join(f"激安の商品はこちらからご購入いただけます。送料無料でお届けします。{i}" for i in range(12))
    verdict = GopherRepetition(GopherRepetitionConfig(chars_per_word=2.4, max_dup_line_fraction=None,
                                                      max_dup_line_chars=None, max_dup_para_fraction=None,
                                                      max_dup_para_chars=None)).evaluate(spam, "ja")
    assert verdict is not None and verdict[0] in ("dup_ngram_chars", "top_ngram_chars")
    assert "words of content" in verdict[1]


def test_both_ngram_sizes_at_once_are_refused():
    from common.settings import ConfigError

    with pytest.raises(ConfigError, match="not both"):
        GopherRepetitionConfig(ngram_scale=1.3, chars_per_word=2.4)


# NTREX-128 (the bundled thresholds' calibration text) and FLORES-200 (Wikipedia prose the thresholds never saw)
LANGUAGES = {"jpn": ("ja", "jpn_Jpan"), "zho-CN": ("zh", "zho_Hans"), "zho-TW": ("zh", "zho_Hant"),
             "tha": ("th", "tha_Thai")}


def _over(stage, texts, lang):
    return sum(any(reason in ("dup_ngram_chars", "top_ngram_chars") for reason, *_ in stage.verdicts(t, lang))
               for t in texts)


@needs_shared
@pytest.mark.parametrize("code", sorted(LANGUAGES))
def test_parallel_news_and_long_documents_are_judged_at_englishs_rate(code):
    """The same 123 NTREX articles: documents over an n-gram limit no more often than English's (5 of 123),
    FLORES's 10-sentence chunks likewise (English: 1 of 100); and each corpus as one long document (1,997 and
    2,000 sentences) under every n-gram limit, as English's is."""
    from stages.reference import flores_documents, ntrex_documents
    from stages.thresholds import attach, bundled_path

    lang, folder = LANGUAGES[code]
    data = str(SHARED_DATA / "multilingual")
    news = {c: [t for cc, _, t in ntrex_documents(data) if cc == c] for c in ("eng", code)}
    wiki = {f: [t for ff, _, t in flores_documents(data) if ff == f] for f in ("eng_Latn", folder)}
    stage = GopherRepetition(GopherRepetitionConfig(max_dup_line_fraction=None, max_dup_line_chars=None,
                                                    max_dup_para_fraction=None, max_dup_para_chars=None))
    attach(stage, stage.config, "gopher_repetition", bundled_path())
    assert stage.config_for(lang).chars_per_word is not None
    english_news, english_wiki = _over(stage, news["eng"], "en"), _over(stage, wiki["eng_Latn"], "en")
    assert _over(stage, news[code], lang) <= english_news + 1, (english_news, code)
    assert _over(stage, wiki[folder], lang) <= english_wiki + 1
    for texts, english in ((news[code], news["eng"]), (wiki[folder], wiki["eng_Latn"])):
        assert stage.evaluate("\n".join(english), "en") is None
        assert stage.evaluate("\n".join(texts), lang) is None
