from stages.text import STOP_WORDS, normalized_words, split_paragraphs, split_words, stop_words


def test_icu_segments_languages_without_spaces():
    assert split_words("我们今天去北京大学参观，天气很好。", "zh") == ["我们", "今天", "去", "北京", "大学", "参观", "天气", "很好"]
    assert "東京" in split_words("今日は東京大学に行きました。", "ja")
    assert split_words("วันนี้อากาศดีมาก", "th")[:2] == ["วัน", "นี้"]
    # offsets are right even with characters outside the BMP (ICU counts UTF-16 units)
    assert split_words("😀我们今天去北京", "zh") == ["我们", "今天", "去", "北京"]


def test_space_languages_split_on_whitespace():
    assert split_words("Die Straße ist schön.", "de") == ["Die", "Straße", "ist", "schön."]
    assert normalized_words("Hello, World! -- The 3.5 km ...", "en") == ["hello", "world", "the", "3.5", "km"]


def test_the_sentence_marks_of_other_scripts_are_stripped_from_words():
    """Urdu's full stop and comma, Hindi's danda, Spanish's opening marks end or start a word as "." does: a word
    before them is still that word (the bad-word lists matched none of these)."""
    assert normalized_words("وہ حرامی ہے۔ کتے، اولاد؟", "ur") == ["وہ", "حرامی", "ہے", "کتے", "اولاد"]
    assert normalized_words("यह चूत। है॥", "hi") == ["यह", "चूत", "है"]
    assert normalized_words("¡Hijo de puta! ¿Qué?", "es") == ["hijo", "de", "puta", "qué"]
    assert normalized_words("Բարեւ։ Ինչպե՞ս", "hy") == ["բարեւ", "ինչպե՞ս"]  # a mark inside a word stays


def test_stop_word_lists():
    assert stop_words("en") == {"the", "be", "to", "of", "and", "that", "have", "with"}  # Gopher's list
    assert stop_words("xx") is None
    assert all(len(words) == 8 for words in STOP_WORDS.values())
    assert {"de", "fr", "es", "zh", "ja", "ru"} <= set(STOP_WORDS)


def test_paragraphs_split_on_blank_lines():
    assert split_paragraphs("a\nb\n\nc\n \n\nd") == ["a\nb", "c", "d"]


def test_is_word_fast_path_agrees_with_the_definition():
    import sys
    import unicodedata

    from stages.text import is_punctuation, is_word

    # every punctuation, symbol, mark, number and a spread of letters, alone and at either end of a word
    chars = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c))[0] in "PSNM"][::7]
    chars += list("aZéßж東ㄱ٣²½_ ")
    tokens = [""] + chars + [ch + "word" for ch in chars] + ["word" + ch for ch in chars] + [ch * 3 for ch in chars]
    assert [is_word(t) for t in tokens] == [not is_punctuation(t) for t in tokens]


def test_tokenized_texts_are_kept_for_a_chunk_and_bounded_by_characters():
    from stages.text import _RecentTexts

    calls = []

    def words(text, lang):
        calls.append(text)
        return tuple(text.split())

    cache = _RecentTexts(words, max_chars=5000)
    texts = [f"page {i} " + "word " * 7 for i in range(100)]  # ~42 characters each: the cache holds all 100
    assert [cache(t, "en") for t in texts] == [tuple(t.split()) for t in texts]
    assert [cache(t, "en") for t in texts] == [tuple(t.split()) for t in texts]  # the stage after: no re-tokenizing
    assert len(calls) == 100
    assert cache(texts[0], "de") and len(calls) == 101  # the language is part of the key (ICU segments by it)
    # past the budget the oldest texts go, and what is held never exceeds it
    more = [f"other {i} " + "x" * 40 for i in range(100)]
    for t in more:
        cache(t, "en")
        assert cache._chars <= 5000
    calls.clear()
    cache(more[-1], "en")
    cache(texts[1], "en")
    assert calls == [texts[1]]
    assert cache("y " * 4000, "en") and cache._chars <= 5000 and "y " * 4000 not in [k for k, _ in cache._results]  # longer than the budget
