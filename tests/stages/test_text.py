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
