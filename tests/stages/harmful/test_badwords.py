"""Bad-word density on the LDNOOBW lists it ships, per script, and on real text."""
import csv
import gzip
import json
import os
import random

import pytest

from common.settings import ConfigError
from stages.harmful.badwords import (
    KIND_FILES,
    KINDS,
    LID_TO_LDNOOBW,
    LISTS,
    UNSORTED,
    BadWordsConfig,
    BadWordsFilter,
    find_bad_words,
    list_languages,
    match_name,
    read_entries,
    read_spellings,
    script_languages,
    spellings,
    split_entries,
    word_list,
)
from tests.conftest import DAVIDSON_SAMPLE, SENTENCES_DIR, SHARED_DATA, needs_shared

DAVIDSON = DAVIDSON_SAMPLE


def found(text, lang, version="v1", full_list=False):
    return dict(find_bad_words(text, lang, word_list(version, lang, full_list))[0])


def test_spaced_scripts_match_whole_words_and_phrases():
    assert found("You absolute cunt, get out.", "en") == {"cunt": 1}
    # the Scunthorpe problem: no match inside longer words
    assert found("Scunthorpe United beat the assassins of Sussex in a classic.", "en") == {}
    assert found("He sent a 2 girls 1 cup link. Shit!", "en") == {"2 girls 1 cup": 1, "shit": 1}
    assert found("Was für eine Scheiße, du Arschloch.", "de") == {"scheiße": 1, "arschloch": 1}
    assert found("Putang ina mo!", "tl") == {"putang ina": 1}   # lid.176 `tl` is LDNOOBW's `fil`


def test_scripts_without_spaces_match_substrings():
    # zh, ja, th: no word boundaries to respect, entries are found inside runs of text
    assert found("他看三级片看了一整夜。", "zh") == {"三级片": 1}
    assert found("彼はアスホールだと言った", "ja") == {"アスホール": 1}
    assert found("เขาพูดว่ากระหรี่ออกมาดังๆ", "th") == {"กระหรี่": 1}
    # single characters that are ordinary words in news text are not in the default list (牛乳 = milk) ...
    assert found("我每天早上喝牛乳。", "zh") == {}
    # ... and an entry matches only where a word may start and end (ICU's word breaks), even in the full list:
    # 牛乳 is one word, and "做爱尔兰人" is "being Irish", not 做爱 (Jigsaw's template flagged 16 % of them)
    assert found("我每天早上喝牛乳。", "zh", full_list=True) == {}
    assert found("做爱尔兰人很诚挚的。", "zh") == {} and found("你他妈的是个傻逼吧", "zh") == {"他妈的": 1, "傻逼": 1}
    assert found("이 씨발놈아 꺼져", "ko") == {"씨발놈": 1}  # Korean: a word carries its particle (-아): substrings
    assert found("仆街啦你个𨳒样", "zh") == {"仆街": 1, "𨳒": 1}  # 𨳒 is outside the BMP: two UTF-16 units to ICU


def test_ordinary_and_questionable_words_are_out_of_the_default_list():
    medical = "Sexual health clinics examine the vulva and the breasts; gay and lesbian patients are welcome."
    assert found(medical, "en") == {}
    # v1 lists "sexual" (an ordinary word of news text) and "vulva" (questionable in v2's own judgement)
    assert found(medical, "en", full_list=True) == {"sexual": 1, "vulva": 1}
    # v2's English list holds everyday words; without the reference-text exclusions a density is meaningless
    assert "a" in word_list("v2", "en", True).words and "a" not in word_list("v2", "en", False).words


def test_density_rule_keeps_pages_with_a_stray_word_and_drops_dense_ones():
    prose = (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()[:60]
    stray = " ".join(prose[:30]) + " What a shit show. " + " ".join(prose[30:])
    stage = BadWordsFilter()
    assert stage.evaluate(stray, "en") is None
    every_kind = BadWordsConfig(kinds=KINDS)
    reason, detail, *_ = BadWordsFilter(BadWordsConfig(mode="any", kinds=KINDS)).evaluate(stray, "en")
    assert reason == "bad_words_profanity" and "shit×1" in detail
    assert BadWordsFilter(BadWordsConfig(mode="any")).evaluate(stray, "en") is None  # swearing is not counted
    with open(DAVIDSON, encoding="utf-8") as fh:
        offensive = [row["tweet"] for row in csv.DictReader(fh) if row["class"] == "1"]
    random.Random(0).shuffle(offensive)
    page = " ".join(prose[:10] + offensive[:20])
    reason, detail, density, limit = stage.evaluate(page, "en")
    assert reason == "bad_words_sexual" and "per 1000 words" in detail and "×" in detail
    assert "not counted: profanity 13" in detail  # the kinds left out are in the ledger's detail too
    assert round(density, 1) == float(detail.split()[0]) >= 8 and limit == 8  # typed twins of the detail (ledger columns)
    assert BadWordsFilter(every_kind).evaluate(page, "en")[0] == "bad_words_profanity"


def kind_files():
    """(version, language) of every kind file: all of v1, and the v2 lists sorted so far."""
    return [(version, name.rsplit(".", 1)[0]) for version in ("v1", "v2")
            for name in sorted(os.listdir(f"{KIND_FILES}/{version}")) if name.endswith(".txt")]


@pytest.mark.parametrize("version, lang", kind_files())
def test_kind_files_sort_every_entry_of_their_list_once_with_its_meaning(version, lang):
    entries = {e.strip() for e in read_entries(f"{LISTS}/{version}/{lang}.txt")}
    rows = [[part.strip() for part in line.split("|")] for line in read_entries(f"{KIND_FILES}/{version}/{lang}.txt")]
    assert all(len(row) == 3 and row[1] in KINDS for row in rows)
    assert {row[0] for row in rows} == entries          # every entry once, none the list lacks
    assert len(rows) == len({row[0] for row in rows})
    if lang != "en":
        assert all(row[2] for row in rows if row[1] != UNSORTED)   # the gloss the decision rests on
    words = word_list(version, lang, True)              # every kind reaches the compiled list
    single, phrases, substrings = split_entries(entries)
    assert set(words.kinds) == {match_name(e) for e in entries | set(spellings(version, lang))}  # spellings: below
    assert len(single) + len(phrases) + len(substrings) <= len(words.kinds)


def test_every_list_a_page_can_be_judged_by_is_sorted():
    """v1's lists, and v2's for every language lid.176 names that v1 lacks (v2's lists of v1 languages are used only
    with `versions: [v2]`; those of codes lid.176 never answers, such as yid or zu, are never used)."""
    from stages.langid import model_codes

    to_ldnoobw = {LID_TO_LDNOOBW.get(code, code) for code in model_codes()}
    used_v2 = (set(list_languages("v2")) - set(list_languages("v1"))) & to_ldnoobw
    assert {lang for version, lang in kind_files() if version == "v1"} == set(list_languages("v1"))
    assert {lang for version, lang in kind_files() if version == "v2"} == used_v2
    assert len(used_v2) == 38


def test_davidson_tweets_hate_is_dropped_for_its_slurs_profane_pages_only_for_sexual_terms():
    """Pages of 20 tweets: hate (class 0) is dropped as slurs; offensive but not hateful tweets (class 1) are all
    dropped when every kind counts, about half by default (those dense in sexual terms)."""
    with open(DAVIDSON, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    prose = (SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()[:10]
    default, every_kind = BadWordsFilter(), BadWordsFilter(BadWordsConfig(kinds=KINDS))
    for cls, want in (("0", "bad_words_slur"), ("1", None)):
        tweets = [row["tweet"] for row in rows if row["class"] == cls]
        random.Random(0).shuffle(tweets)
        pages = [" ".join(prose + tweets[i:i + 20]) for i in range(0, len(tweets) - 19, 20)]
        reasons = [(default.evaluate(p, "en") or ("kept",))[0] for p in pages]
        assert all(every_kind.evaluate(p, "en") for p in pages)
        if want:
            assert set(reasons) == {want}
        else:
            assert 0.3 < reasons.count("kept") / len(pages) < 0.7 and "bad_words_profanity" not in reasons


def labelled_pages(name: str) -> dict[str, list[str]]:
    """A labelled set of shared/data/harmful/toxicity_multilingual as pages of 20 texts per label (shuffled, seed 0)."""
    with gzip.open(SHARED_DATA / "harmful" / "toxicity_multilingual" / f"{name}.jsonl.gz", "rt") as fh:
        rows = [json.loads(line) for line in fh]
    pages = {}
    for label in ("clean", "toxic"):
        texts = [row["text"] for row in rows if row["label"] == label]
        random.Random(0).shuffle(texts)
        pages[label] = ["\n".join(texts[i:i + 20]) for i in range(0, len(texts) - 19, 20)]
    return pages


@needs_shared
def test_indonesian_tweets_labelled_clean_pass_and_abuse_is_dropped_only_for_sexual_terms_and_slurs():
    """Ibrohim & Budi's tweets (measure only: CC BY-NC-SA; never used to sort the list) as pages of 20. Before v2's
    Indonesian list was sorted every entry counted, and 69 % of the clean pages were dropped on ordinary words
    ("bikin" make, "buaya" crocodile, "taplak" tablecloth, "ateis" atheist)."""
    stage, every_kind = BadWordsFilter(), BadWordsFilter(BadWordsConfig(kinds=KINDS))
    for label, pages in labelled_pages("id_ibrohim").items():
        reasons = [(stage.evaluate(p, "id", 1.0) or ("kept",))[0] for p in pages]
        if label == "clean":
            assert reasons.count("kept") >= 0.99 * len(pages)
            assert sum(bool(every_kind.evaluate(p, "id", 1.0)) for p in pages) > 0.5 * len(pages)
        else:  # swearing and put-downs are the toxicity score's to judge
            assert set(reasons) == {"kept", "bad_words_sexual", "bad_words_slur"}
            assert 0.2 < reasons.count("bad_words_sexual") / len(pages) < 0.6


def test_real_sentences_in_many_languages_pass():
    """1,000 web sentences per language (Leipzig, via lingua) as 10 pages each: none is dropped."""
    stage = BadWordsFilter()
    for lang in ("ar", "de", "en", "es", "fr", "ja", "nl", "pl", "ru", "zh"):
        lines = (SENTENCES_DIR / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
        for start in range(0, len(lines), 100):
            assert stage.evaluate("\n".join(lines[start:start + 100]), lang) is None, (lang, start)


def test_languages_without_a_list_pass_and_are_counted():
    notes = []
    stage = BadWordsFilter()
    stage.count = lambda name, n=1: notes.append(name)
    assert stage.evaluate("Habari ya asubuhi, rafiki yangu.", "sw") is None and notes == ["no_list.sw"]
    assert BadWordsFilter(BadWordsConfig(versions=("v1",))).word_list("uk") is None
    assert BadWordsFilter().word_list("uk") is word_list("v2", "uk", False)  # v1 has no Ukrainian: v2's list
    # LDNOOBW v2's `kh` file is Kannada (its entries are in Kannada script), not Khmer
    assert BadWordsFilter().word_list("kn") is word_list("v2", "kn", False) and "ಯೋನಿ" in word_list("v2", "kn", False).words
    assert BadWordsFilter().word_list("km") is None
    assert BadWordsFilter().word_list("hi-Latn") == word_list("v1", "hi", False)  # GlotLID's hin_Latn; the list is romanized
    assert BadWordsFilter().word_list("sh") == BadWordsFilter().word_list("bs") == word_list("v2", "hr", False)
    # a page langid relabels as written Cantonese (stages/dialects.py) keeps the Chinese list, which holds its words
    assert BadWordsFilter().word_list("yue") == word_list("v1", "zh", False) and "閪" in found("你個閪", "yue")
    assert BadWordsFilter().word_list("jv") == BadWordsFilter().word_list("su") == word_list("v2", "id", False)


def test_config_errors():
    with pytest.raises(ConfigError, match="versions"):
        BadWordsConfig(versions=("v3",))
    with pytest.raises(ConfigError, match="mode"):
        BadWordsConfig(mode="some")
    with pytest.raises(ConfigError, match="kinds must be among"):
        BadWordsConfig(kinds=("slurs",))


def test_density_limits_per_language():
    text = "Das ist Scheiße. " + "Wir gehen heute in den Park und essen ein Eis zusammen. " * 50 + "Scheiße! Arschloch!"
    found_words, n_words = find_bad_words(text, "de", word_list("v1", "de", False))
    assert sum(found_words.values()) == 3 and 1000 * 3 / n_words < 8
    assert BadWordsFilter().evaluate(text, "de") is None
    stricter = BadWordsFilter(BadWordsConfig(max_density_by_language=("de=5", "en=30"), kinds=KINDS))
    assert stricter.evaluate(text, "de")[0] == "bad_words_profanity"
    assert stricter.evaluate(text.replace("Scheiße", "shit").replace("Arschloch", "asshole"), "en") is None
    with pytest.raises(ConfigError, match="LANG=DENSITY"):
        BadWordsConfig(max_density_by_language=("de:5",))


def test_a_phrase_and_the_word_inside_it_are_one_match():
    """`fils de pute` is one match, not also `pute`: three self-directed curses no longer reach min_matches."""
    words = word_list("v1", "fr")
    found, n_words = find_bad_words("Ah, fils de pute ! J'ai encore raté mon bus, fils de pute.", "fr", words)
    assert found == {"fils de pute": 2} and n_words == 12
    curses = {"fr": "Fils de pute, j'ai oublié mes clés. Je suis vraiment nul ce matin, quelle journée.",
              "es": "Hijo de puta, se me olvidaron las llaves otra vez. Qué mañana tan mala tengo hoy.",
              "pt": "Filho da puta, esqueci as chaves de novo. Que manhã horrível estou tendo hoje."}
    for lang, text in curses.items():
        assert sum(find_bad_words(text, lang, word_list("v1", lang))[0].values()) == 1, lang
        assert BadWordsFilter().evaluate(text, lang, 0.99) is None


def test_a_page_whose_language_id_is_unsure_is_checked_against_its_scripts_lists():
    """Romanized Hindi abuse, labelled Finnish at 0.17 by lid.176: the Hindi (Latin-script) list judges it;
    the same words with a confident label are judged by that language's list only."""
    text = "bhenchod tu kya kar raha hai madarchod, teri maa ki chut, saala kutta harami. chutiya log hai ye sab"
    swearing = BadWordsConfig(kinds=KINDS)
    reason, detail, *_ = BadWordsFilter(swearing).evaluate(text, "fi", 0.17)
    assert reason == "bad_words_profanity" and "(hi list: language ID unsure)" in detail and "madarchod×1" in detail
    assert BadWordsFilter(swearing).evaluate(text, "fi", 0.9) is None
    assert BadWordsFilter(BadWordsConfig(unsure_below=None, kinds=KINDS)).evaluate(text, "fi", 0.17) is None
    assert BadWordsFilter().evaluate(text, "fi", 0.17) is None  # all of it is swearing: not counted by default
    prose = " ".join((SENTENCES_DIR / "en.txt").read_text(encoding="utf-8").splitlines()[:40])
    assert BadWordsFilter().evaluate(prose, "en", 0.3) is None  # ordinary text stays clean under every list


def test_hindi_in_devanagari_is_judged_by_the_hindi_lists_devanagari_spellings():
    """LDNOOBW v1's Hindi list is romanized, and lid.176 labels Devanagari Hindi `hi`: its spellings file gives each
    entry's Devanagari forms, with the entry's kind; a nukta letter matches decomposed or precomposed."""
    spelled = read_spellings(f"{LISTS}/spellings/v1/hi.txt")
    entries = set(read_entries(f"{LISTS}/v1/hi.txt"))
    assert len(spelled) > 100 and set(spelled.values()) <= entries
    assert all(all("\u0900" <= ch <= "\u097f" or ch == " " for ch in s) for s in spelled)
    assert found("क्या लंड है! तेरी माँ का भोसड़ा", "hi") == {"लंड": 1, "तेरी माँ का भोसड़ा": 1}
    assert found("तेरी माँ का भोस\u095cा", "hi") == {"तेरी माँ का भोस\u095cा": 1}  # precomposed ड़
    words = word_list("v1", "hi")
    assert words.kind("लंड") == words.kind("lund") == "sexual"
    assert words.kind("मादरचोद") == words.kind("madarchod") == "profanity"
    sexual = "उसने अपना लंड निकाला और उसकी चूत में डाल दिया, फिर से लंड चूस कर"
    assert BadWordsFilter().evaluate(sexual, "hi")[0] == "bad_words_sexual"
    # a Hindi page lid.176 is unsure of (Marathi at 0.3) is also checked against the lists written in its script
    unsure = BadWordsFilter().evaluate(sexual, "mr", 0.3)
    assert unsure[0] == "bad_words_sexual" and "(hi list: language ID unsure)" in unsure[1]
    # everyday words a transliteration would have matched stay out: sixes in cricket, a patrol, goods
    assert found("उसने तीन छक्के लगाए, पुलिस की गश्ती टीम ने माल पकड़ा", "hi") == {}
    # news words of the list (found in NTREX/FLORES: rape, brother-in-law) are left out of the default list
    assert found("बलात्कार के मामले में साला गिरफ्तार", "hi") == {}


def test_urdu_is_judged_by_the_hindi_lists_urdu_spellings():
    """Urdu shares Hindi's swearing and slurs, and lid.176 labels Urdu pages `ur`, for which LDNOOBW has no list: they
    are judged by the Hindi list through its Urdu spellings (hi.ur.txt, each with its entry's kind), typed with Urdu
    letters or their Arabic look-alikes (ی ک ہ or ي ك ه, mixed as keyboards mix them)."""
    urdu = read_spellings(f"{LISTS}/spellings/v1/hi.ur.txt")
    assert len(urdu) > 60 and set(urdu.values()) <= set(read_entries(f"{LISTS}/v1/hi.txt"))
    assert all(all("\u0600" <= ch <= "\u06ff" or ch == " " for ch in s) for s in urdu)
    words = word_list("v1", "ur")
    assert words is word_list("v1", "hi") and words.kind("لنڈ چوس") == words.kind("lund choos")
    assert words.kind("بہنچود") == words.kind("behen chod") == "profanity"
    abuse = "تو حرامی ہے، کتے کی اولاد، تیری ماں کی چوت"
    assert found(abuse, "ur") == {"حرامی": 1, "کتے کی اولاد": 1, "تیری ماں کی چوت": 1}
    assert found(abuse.replace("ی", "\u064a").replace("ک", "\u0643"), "ur") == {  # Arabic yeh and kaf typed
        "حرام\u064a": 1, "\u0643ت\u06d2 \u0643\u064a اولاد": 1, "ت\u064aر\u064a ماں \u0643\u064a چوت": 1}
    assert found("وہ کمینی حرکت", "ur") == {}  # a word is matched whole
    sexual = "اس نے اس کی چوچی دبائی اور چوت میں ڈالا، پھر لنڈ چوس کر۔"
    assert BadWordsFilter().evaluate(sexual, "ur")[0] == "bad_words_sexual"
    # swearing alone is the toxicity score's to judge (the default kinds); every kind counted drops it
    assert BadWordsFilter().evaluate(abuse, "ur") is None
    assert BadWordsFilter(BadWordsConfig(kinds=KINDS)).evaluate(abuse, "ur")[0] == "bad_words_profanity"
    # everyday Urdu words a transliteration would have matched stay out: a wife's brother, purity, unlawful, greed
    assert found("میرا سالا پاکی اور ناجائز تجاوزات پر ہوس اقتدار کی بات کرتا ہے", "ur") == {}
    # found in Urdu news (NTREX): "mean" in a translated quote, the surname Lund: left out of the default list
    assert found("کمینہ اور شرارتی، ڈیونسیو اے لنڈ", "ur") == {}
    assert "hi" in script_languages("v1", "Arabic")  # an unsure Arabic-script page is also checked against it


@needs_shared
def test_hindi_abusive_comments_in_devanagari_are_found_and_clean_ones_pass():
    """MACD's ShareChat comments (measure only: research use; never used to write the spellings) as pages of 20:
    before the spellings no abusive page was dropped and 0.6 % of its comments had a listed word; Leipzig's and
    Tatoeba's Hindi sentences as pages pass."""
    stage, every_kind = BadWordsFilter(), BadWordsFilter(BadWordsConfig(kinds=KINDS))
    for label, pages in labelled_pages("hi_macd").items():
        dropped = sum(bool(stage.evaluate(p, "hi", 1.0)) for p in pages)
        if label == "clean":
            assert dropped == 0 and not any(every_kind.evaluate(p, "hi", 1.0) for p in pages)
        else:  # swearing is the toxicity score's to judge; sexual terms drop a page
            assert 0.05 < dropped / len(pages) < 0.3
            assert sum(bool(every_kind.evaluate(p, "hi", 1.0)) for p in pages) > 0.5 * len(pages)
    for path in (SHARED_DATA / "multilingual" / "lingua_testdata" / "sentences" / "hi.txt",
                 SHARED_DATA / "multilingual" / "tatoeba_laser" / "data" / "tatoeba" / "v1" / "tatoeba.hin-eng.hin"):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert not any(stage.evaluate("\n".join(lines[i:i + 20]), "hi") for i in range(0, len(lines), 20))
    # Urdu's web and everyday sentences (never read when writing the Urdu spellings) match no listed word of any kind
    for path in (SHARED_DATA / "multilingual" / "lingua_testdata" / "sentences" / "ur.txt",
                 SHARED_DATA / "multilingual" / "tatoeba_laser" / "data" / "tatoeba" / "v1" / "tatoeba.urd-eng.urd"):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert len(lines) >= 1000 and not any(found(line, "ur") for line in lines)
