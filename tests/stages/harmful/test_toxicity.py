"""The bundled toxicity classifier: judged on text of other sources than its training data (the card's
cross-data-set figures recomputed), its sanity split, and page-length text in several languages."""
import collections
import itertools
import json
import os
import pickle
import random
import re

import pytest

from common.settings import ConfigError
from stages.extraction.extract import ExtractConfig, Extractor
from stages.extraction.warc import read_warc
from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer, windows
from stages.harmful.toxicity_eval import language_table, measure
from stages.harmful.toxicity_train import (
    insert_passage,
    page_held_out,
    read_civil_comments,
    read_davidson,
    read_mlma,
    read_multilingual,
    read_parallel,
    split,
)
from stages.langid import LanguageIdentifier
from stages.models import bundled
from stages.quality_train import metrics
from stages.record import Document, Drop
from stages.runner import StageRunner
from tests.conftest import CC_EXCERPT, DAVIDSON_SAMPLE, SHARED_DATA, TEST_DATA, needs_shared

SHARED = str(SHARED_DATA)
TOXICITY = os.path.join(SHARED, "harmful", "toxicity")
CARD = json.loads(open(bundled("toxicity.ftz.card.json"), encoding="utf-8").read())
CLEAN_SOURCES = ("ntrex", "flores", "tatoeba", "web_pages", "frames", "frames_ordinary")
RECIPE_SETS = [d for d in CARD["training_datasets"] if d not in CLEAN_SOURCES]


@pytest.fixture(scope="module")
def scorer():
    stage = ToxicityScorer()
    stage.setup()
    return stage


@pytest.fixture(scope="module")
def labeled():
    """Every labeled set of shared/data/harmful, by name (its users carry needs_shared; a mark on a fixture does
    nothing, so the fixture says it too)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the full data sets in {SHARED_DATA}")
    sets = collections.defaultdict(list)
    for e in itertools.chain(read_davidson(os.path.join(TOXICITY, "davidson_hate_offensive", "labeled_data.csv")),
                             read_civil_comments(os.path.join(TOXICITY, "toxic_spans_civil_comments")),
                             read_mlma(os.path.join(TOXICITY, "mlma_hate_speech_en_fr_ar")),
                             read_multilingual(os.path.join(SHARED, "harmful", "toxicity_multilingual"))):
        sets[e.dataset].append(e)
    return sets


@pytest.fixture(scope="module")
def held_out(labeled):
    """The labeled items of the model's sanity split (the recipe's split by text hash)."""
    settings = CARD["settings"]
    return split([e for d in RECIPE_SETS for e in labeled[d]], settings["test_fraction"], settings["seed"])[1]


@needs_shared
def test_independent_sets_are_measured_as_the_card_says(scorer, labeled):
    """The card's cross-data-set figures are of sets the model never saw, and they are true."""
    crossed = CARD["cross_data_set"]["labeled"]
    assert set(crossed) == set(labeled) - set(RECIPE_SETS) and "civil_comments" in crossed
    assert {"es_hateval2019", "hi_macd", "id_ibrohim", "pl_hatespeech_ipipan", "pt_hatebr"} <= set(crossed)
    for name in ("pt_hatebr", "civil_comments"):
        measured = measure(lambda text, lang: scorer.score(text, lang)[0], {name: labeled[name]})["labeled"][name]
        assert measured == crossed[name], name


@needs_shared
def test_sentences_naming_a_group_are_not_flagged_in_any_language(scorer):
    """Held-out NTREX-128 news and FLORES-200 sentences whose English original names a group, religion, nation
    or party (the same documents in every language): at most 2 of 95 score >= 0.5 in 17 of 18 languages (Turkish
    2: a pig attacking people, an assault's victim: the model now keys on violence, not on groups); Chinese 9 of
    95 (news on HIV, on China's LGBT community, a "killer pig" story, a terror trial, arrests by immigration
    officers: character n-grams of violence, crime and disease words; 6 before the counter-speech frames, which
    moved sentences near 0.5 both ways; measured, not hidden)."""
    from stages.langid import model_codes

    reference = [e for e in read_parallel(os.path.join(SHARED, "multilingual"), model_codes()) if e.held_out]
    measured = measure(lambda text, lang: scorer.score(text, lang)[0], {}, reference)
    assert measured["identity"] == CARD["cross_data_set"]["identity"]
    assert len(measured["identity"]) == 18 and all(m["n"] >= 90 for m in measured["identity"].values())
    over = {lang: m["0.5"] for lang, m in measured["identity"].items() if m["0.5"] > 0.022}
    assert set(over) <= {"zh"} and over.get("zh", 0) <= 0.1, over


@needs_shared
def test_sanity_split_of_the_training_sets_as_the_card_says(scorer, held_out):
    """A split of the training sets: the card's figures (a check that the model learnt its data, not evidence)."""
    for dataset in RECIPE_SETS:
        part = [e for e in held_out if e.dataset == dataset]
        measured = metrics([scorer.score(e.text, e.lang)[0] for e in part], [e.toxic for e in part])
        assert measured == CARD["held_out_metrics_by_dataset"][dataset], dataset


@needs_shared
def test_page_length_text_toxic_passages_are_caught_and_ordinary_pages_are_not(scorer, held_out):
    """Real pages of the bench WARC the model did not train on (its held-out half), first 120: as they
    are, and with one held-out toxic text of any of the recipe's languages put in as a paragraph (the page's most
    toxic window, `toxicity_worst`), and with three (a toxic page)."""
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    pages = []
    with open(os.path.join(SHARED, "warc", "bench_trafilatura_pages.warc.gz"), "rb") as fh, chain:
        for doc in chain.kept(read_warc(fh, source="bench")):
            if page_held_out(doc.url or doc.id):
                pages.append((doc.lang, doc.text))
            if len(pages) == 120:
                break
    toxic = [e.text for e in held_out if e.toxic and len(e.text) >= 40]
    assert len({e.lang for e in held_out if e.toxic and len(e.text) >= 40}) >= 8
    rng = random.Random(1)
    plain = [scorer.score(text, lang)[0] for lang, text in pages]
    seeded = [scorer.judge(insert_passage(text, rng.choice(toxic), rng), lang) for lang, text in pages]
    assert sum(s >= 0.7 for s in plain) <= 2  # the card: 0.4 % of the 496 held-out pages (English 1 of 88)
    assert sum(page.worst >= 0.5 for page in seeded) >= 0.6 * len(pages)
    assert all(len(page.window) < 700 for page in seeded)  # the window, not the page
    threads = []
    for lang, text in pages:
        for _ in range(3):
            text = insert_passage(text, rng.choice(toxic), rng)
        threads.append(scorer.score(text, lang)[0])
    assert sum(s >= 0.5 for s in threads) >= 0.9 * len(pages)  # the card: 96 % of the 496


def test_windows_keep_paragraphs_join_fragments_and_cut_long_lines():
    text = "Menu\nHome\n" + "A first paragraph that is long enough to stand alone.\n" + "word " * 300 + "\nEnd"
    pieces = list(windows(text, size=300, min_chars=40))
    assert pieces[0] == "Menu Home A first paragraph that is long enough to stand alone."
    assert all(len(p) <= 600 for p in pieces) and len(pieces) >= 5 and pieces[-1] == "End"
    assert "".join(p.replace(" ", "") for p in pieces) == text.replace("\n", "").replace(" ", "")


def test_threshold_drops_with_the_window_and_no_threshold_only_scores(scorer):
    text = ("The council met on Tuesday to discuss the new budget for the city's parks and libraries.\n"
            "you are a stupid fucking idiot and everyone hates you, go kill yourself\n"
            "shut up you worthless piece of shit, nobody here wants you around\n"
            "The meeting ended at nine, and the vote was postponed until next month.")
    doc = Document(id="1", url="https://example.org/a", source="web", text=text, lang="en")
    scored = scorer(doc)
    assert isinstance(scored, Document) and scored.toxicity_score >= 0.9
    dropped = ToxicityScorer(ToxicityConfig(threshold=0.8))(doc)
    assert isinstance(dropped, Drop) and dropped.reason == "toxic" and "2 of 4 windows toxic" in dropped.detail
    lines = text.splitlines()
    calm = scorer(doc.replace(text=lines[0] + "\n" + lines[3]))
    assert calm.toxicity_score < 0.5
    # one abusive line among clean ones: not a toxic page (`min_toxic_windows`), its line kept as `toxicity_worst`
    one_line = doc.replace(text="\n".join(lines[:2] + lines[3:]))
    kept = ToxicityScorer(ToxicityConfig(threshold=0.8))(one_line)
    assert isinstance(kept, Document) and kept.toxicity_score < 0.8 and kept.scores["toxicity_worst"] >= 0.9
    alone = ToxicityScorer(ToxicityConfig(threshold=0.8, min_toxic_windows=1))(one_line)
    assert isinstance(alone, Drop) and "stupid fucking idiot" in alone.detail


def test_a_language_can_have_its_own_threshold(scorer):
    """Ordinary web text scores higher in some languages (Chinese, French: docs/harmful.md), so a language can be
    dropped at its own value: a listed language at its value, the others at `threshold`, also when that is none."""
    text = "The council met on Tuesday.\nyou are a stupid fucking idiot and everyone hates you, go kill yourself"
    doc = Document(id="1", url="https://example.org/a", source="web", text=text, lang="en")
    score = scorer(doc).toxicity_score
    assert 0.9 <= score < 1.0
    strict_english = ToxicityScorer(ToxicityConfig(threshold=None, threshold_by_language=("en=0.5",)))
    assert isinstance(strict_english(doc), Drop) and isinstance(strict_english(doc.replace(lang="de")), Document)
    lenient_english = ToxicityScorer(ToxicityConfig(threshold=0.5, threshold_by_language=("en=1.0", "zh=0.99")))
    lenient_english = pickle.loads(pickle.dumps(lenient_english))  # as Beam ships a stage to its workers
    assert isinstance(lenient_english(doc), Document) and isinstance(lenient_english(doc.replace(lang="fr")), Drop)
    assert ">= 0.5 (" in lenient_english(doc.replace(lang="fr")).detail
    for bad in (("zh",), ("zh=high",), ("=0.9",), ("zh=1.5",)):
        with pytest.raises(ConfigError, match="threshold_by_language"):
            ToxicityConfig(threshold_by_language=bad)


def test_languages_whose_ordinary_text_scores_high_are_brought_to_englishs_level(scorer, tmp_path):
    """The card's per-language offsets (fitted when the model is built, on held-out NTREX/FLORES windows it never
    trained on): a language whose ordinary windows score above English's at the 95th percentile has its windows'
    log-odds lowered by the difference, by the page's language; English and languages under it are unchanged."""
    import shutil

    from stages.harmful.toxicity import page_toxicity, shifted
    from stages.harmful.toxicity_train import Example, fit_language_offsets

    fitted = CARD["language_offsets"]
    offsets = fitted["offsets"]
    assert fitted["anchor"] == "en" and fitted["quantile"] == 0.95 and "en" not in offsets
    assert offsets["zh"] > 1.5 and min(offsets.values()) > 0 and all(n >= 200 for n in fitted["windows"].values())
    assert scorer.offsets() == offsets
    text = "Le bruit de la rue était horrible toute la nuit.\nOn a mal dormi."
    windows_raw = scorer.window_scores(text, "fr")
    assert scorer.judge(text, "fr") == page_toxicity([(shifted(p, offsets["fr"]), w) for p, w in windows_raw],
                                                     scorer.config)
    assert scorer.judge(text, "en") == scorer.judge(text) == page_toxicity(windows_raw, scorer.config)
    assert shifted(0.0, 2.0) == 0.0 and shifted(0.5, 0.0) == 0.5 and shifted(0.5, 1.0) == pytest.approx(0.2689, abs=1e-4)
    # the stage judges by the document's language, also after pickling (Beam), and can be told not to
    doc = Document(id="1", url="https://example.org/a", source="web", text=text, lang="fr")
    shipped = pickle.loads(pickle.dumps(ToxicityScorer()))
    assert shipped(doc).toxicity_score == scorer.judge(text, "fr").score < scorer.judge(text).score
    assert ToxicityScorer(ToxicityConfig(language_offsets=False))(doc).toxicity_score == scorer.judge(text).score
    # a model of one's own: offsets only from its card; a card that is not JSON is one clear error
    own = tmp_path / "own.ftz"
    shutil.copy(bundled("toxicity.ftz"), own)
    assert ToxicityScorer(ToxicityConfig(model=str(own))).offsets() == {}
    (tmp_path / "own.ftz.card.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a toxicity model card"):
        ToxicityScorer(ToxicityConfig(model=str(own))).check()
    # the fit: the 95th-percentile window's log-odds against the anchor's, only where higher
    calm = ["The river flows north past the old mill.", "We planted tomatoes in the garden."] * 10
    hot = [Example(t, False, "ntrex", "xx") for t in calm[:-1] + ["you are a stupid fucking idiot"]]
    fit = fit_language_offsets(scorer._model, hot + [Example(t, False, "ntrex", "en") for t in calm])
    assert set(fit["offsets"]) == {"xx"} and fit["offsets"]["xx"] > 5 and fit["windows"] == {"en": 20, "xx": 20}


def test_a_window_without_letters_scores_nothing(scorer):
    """Lines of asterisks, rules and figures (a nutrition table) carry no words to judge."""
    table = "Energy 230 kcal | 12 g | 45 %\n" * 3
    assert scorer.score("*" * 80) == (0.0, "*" * 80)
    assert scorer.score("* * * * * * * * * * * * * * * * * * * * * *\n-----------------------------------")[0] == 0.0
    scored = scorer.window_scores("*" * 60 + "\n" + table + "1,234.56 | 7,890.12 | 3,456.78 | 9,012.34 | 5,678.90")
    assert [s for s, w in scored if not any(c.isalpha() for c in w)] == [0.0] and len(scored) == 3


def test_words_of_scripts_with_vowel_signs_stay_whole():
    """Python's `\\w` has no combining mark, so a Devanagari, Bengali or Tamil word was cut at each vowel sign and
    virama ("करते" -> "करत े"): the model learnt consonant stems and lone signs. Marks now stay in their word, for
    the toxicity model; punctuation (the danda too) is still split off, scripts without spaces are still one token a
    character, and the quality model's tokens (trained without) are unchanged."""
    from stages.harmful.toxicity import letters, normalize
    from stages.quality import normalize as quality_normalize

    assert normalize("वे काम करते हैं। तू चूतिया है") == "वे काम करते हैं । तू चूतिया है"
    assert normalize("ஒரு நல்ல நாள்!") == "ஒரு நல்ல நாள் !" and normalize("ভালো আছি।") == "ভালো আছি ।"
    assert normalize("Café, naïve!") == "café , naïve !" and normalize("ไทย ดี") == "ไ ท ย ด ี"
    assert quality_normalize("करते हैं") == "करत े ह ै ं"  # the bundled quality model's tokens
    assert letters("के") == 2 == letters("ke")  # a vowel sign is a letter's worth of evidence


def test_evasions_by_invisible_characters_and_digits_for_letters_read_as_the_words(scorer):
    """A zero-width space, soft hyphen or joiner inside a word cut it into pieces the model did not know, digits or
    signs written for letters ("n1gg3r") became 0s, and a Cyrillic "с" made "fuсk" another word: held-out toxic texts
    found at 0.5 fell 0.63 -> 0.13 with a zero-width space in each word, 0.63 -> 0.54 with 30 % of words in digits,
    0.65 -> 0.58 with 30 % in look-alike letters (bench/toxicity_evasion.py). All three are undone before the model
    reads a text; digits that are not inside a word stay digits."""
    from stages.harmful.toxicity import normalize

    assert normalize("f\u200buck y\u00adou, n1gg3r b!tch a$$hole\ufeff") == normalize("fuck you, nigger bitch asshole")
    assert normalize("mp3 4chan 2024 h2o $5 covid19 wow! @fan") == "mp0 0chan 0000 h0o $ 0 covid00 wow ! @ user"
    # a word of Latin and Cyrillic letters is read in the text's majority script; words of one script stay
    assert normalize("fu\u0441k you") == "fuck you" and normalize("вот cyки, пиzда") == normalize("вот суки, пизда")
    assert normalize("USA уезжает в Москву, Moscow") == "usa уезжает в москву , moscow"
    # Greek look-alikes inside a Latin word too; Greek text, and units written with "μ", stay as they are
    assert normalize("fυck yοu, ρussy") == "fuck you , pussy" and normalize("Η ΕΕ, 5 μg") == "η εε , 0 μg"
    assert normalize("می\u200cخواهم") == "میخواهم" and normalize("करते\u200d हैं") == "करते हैं"
    sample = list(read_davidson(str(DAVIDSON_SAMPLE)))
    settings = CARD["settings"]
    toxic = [e.text for e in split(sample, settings["test_fraction"], settings["seed"])[1] if e.toxic]
    hidden = ["".join(c + "\u200b" if c.isalpha() and i % 3 == 0 else c for i, c in enumerate(t)) for t in toxic]
    found = [sum(scorer.score(t)[0] >= 0.5 for t in texts) for texts in (toxic, hidden)]
    assert len(toxic) >= 150 and found[1] >= 0.95 * found[0] >= 0.5 * len(toxic), found


def test_words_masked_by_asterisks_or_spelled_out_are_read_as_the_words_the_model_knows(scorer):
    """Self-censored ("f*ck", "b***h") and spelled-out ("f u c k") words were pieces the model did not know; the
    scorer reads a mask as the most frequent word of the model's vocabulary it fits, and spelled-out letters as their
    likeliest split into known words (bench/toxicity_evasion.py: the figures). What fits no known word, footnote
    stars, Markdown bold and arithmetic stay as written."""
    from stages.harmful.toxicity import Respeller

    respell = scorer._respell
    assert respell("what a f**king idiot, sh*t, b***h") == "what a fucking idiot, shit, bitch"
    assert respell("f u c k you, F.U.C.K off") == "fuck you, fuck off"
    assert respell("l o o k l i k e a t r a n n y") == "look like a tranny"  # the likeliest split, not "l ikea"
    for kept in ("**bold** text and a note*", "x y z q", "3*4 = 12", "n*"):
        assert respell(kept) == kept
    # fitted by the vocabulary's counts: the most frequent word, ASCII letters only from ASCII words
    own = Respeller(["shot", "shit", "xảy", "cat", "sat", "the"], [5, 9, 3, 2, 2, 50])
    assert own("sh*t x*y t h e c a t s a t") == "shit x*y the cat sat" and own("q*z") == "q*z"
    sample = list(read_davidson(str(DAVIDSON_SAMPLE)))
    settings = CARD["settings"]
    toxic = [e.text for e in split(sample, settings["test_fraction"], settings["seed"])[1] if e.toxic]
    starred = [re.sub(r"(?<=\w)[aeiou](?=\w)", "*", t) for t in toxic]
    spelled_out = [re.sub(r"\w{4,}", lambda m: " ".join(m.group(0)), t) for t in toxic]
    plain = ToxicityScorer(ToxicityConfig(respell=False))
    plain.setup()
    found = {name: (sum(scorer.score(t)[0] >= 0.5 for t in texts), sum(plain.score(t)[0] >= 0.5 for t in texts))
             for name, texts in (("as written", toxic), ("starred", starred), ("spelled", spelled_out))}
    written = found["as written"][0]
    assert found["as written"][1] == written >= 0.5 * len(toxic), found
    assert found["starred"][0] >= 0.8 * written > 2 * found["starred"][1], found
    assert found["spelled"][0] >= 0.8 * written > 2 * found["spelled"][1], found


def test_a_short_window_counts_by_its_text_in_letters_of_any_script():
    """A window under `evidence_letters` (30) counts in proportion to its text: a Han character stands for about a
    word (3 letters), a kana for a syllable (2), so a 10-character Chinese sentence is a whole sentence's evidence,
    as a 30-letter English one is, and a two-word fragment stays little evidence in either script."""
    from stages.harmful.toxicity import letters, page_toxicity

    config = ToxicityConfig()
    assert letters("你们都是废物。") == 18 and letters("ばかやろう") == 10 and letters("Ihr seid alle Abschaum!") == 19
    assert letters("바보 같은 놈") == 5 and letters("2024 年") == 3  # Hangul blocks count one; digits none
    assert page_toxicity([(0.9, "你们这些人都是没用的废物。")], config).score == pytest.approx(0.9)
    assert page_toxicity([(0.9, "You are all useless garbage, all of you.")], config).score == pytest.approx(0.9)
    assert page_toxicity([(0.9, "废物")], config).score == pytest.approx(0.9 * 6 / 30)
    assert page_toxicity([(0.9, "garbage")], config).score == pytest.approx(0.9 * 7 / 30)


def test_words_another_language_taught_as_toxic_are_left_out_of_its_windows(scorer, tmp_path):
    """The card's `language_masks` (fitted when the model is built, on the NTREX/FLORES news and Tatoeba sentences it
    trained on; judged on Leipzig pages and the labelled sets): a word that ordinary text of a language uses, whose
    toxic weight came from another language's data ("hoe" is "how" in Afrikaans and Dutch, "retard" is "late" in
    French), is left out of that language's windows; where its own language's toxic text uses it (English "hoe") or
    its lexicon lists it as hostile (English "stab", "attack", which Tatoeba and news use), it stays."""
    import shutil

    from stages.harmful.toxicity_train import Example, fit_language_masks

    masks = CARD["language_masks"]
    assert {"hoe", "maar"} <= set(masks["words"]["af"]) and "hoe" in masks["words"]["nl"]
    assert "hoe" not in masks["words"].get("en", ()) and masks["min_documents"] >= 5
    assert scorer.masks() == {lang: frozenset(words) for lang, words in masks["words"].items()}
    assert "retard" in masks["words"]["fr"] and not {"stab", "attack", "retard"} & set(masks["words"]["en"])
    late = "Désolé pour le retard de ma réponse, je vous écris demain."  # in 3 French news and 3 Tatoeba examples
    # unmasked 0.92 or 0.88 as the rebuilds go (2026-12-06): the word alone decides either way
    assert scorer.judge(late, "fr").score < 0.1 < 0.8 < ToxicityScorer(ToxicityConfig(language_masks=False)).judge(
        late, "fr").score
    afrikaans = "Hoe donkerder ’n plek is, hoe makliker word ’n lig, selfs ’n dowwe liggie, gesien."
    unmasked = ToxicityScorer(ToxicityConfig(language_masks=False))
    assert unmasked.judge(afrikaans, "af").score > 0.9 > 0.1 > scorer.judge(afrikaans, "af").score
    english = "that hoe is a lying bitch and everybody knows it"
    assert scorer.judge(english, "en").score == unmasked.judge(english, "en").score > 0.9
    # the stage leaves the words out by the document's language, also after pickling (Beam)
    doc = Document(id="1", url="https://example.org/a", source="web", text=afrikaans, lang="af")
    assert pickle.loads(pickle.dumps(ToxicityScorer()))(doc).toxicity_score == scorer.judge(afrikaans, "af").score
    # a model of one's own without a card has none
    own = tmp_path / "own.ftz"
    shutil.copy(bundled("toxicity.ftz"), own)
    assert ToxicityScorer(ToxicityConfig(model=str(own))).masks() == {}
    # the fit: a word the model scores toxic alone, used by >= 5 of a language's news examples, masked where that
    # language's toxic text uses it less than half as often (never, here), kept where its toxic text uses it more
    news = [f"Hoe {n} mense het gister die vergadering in die stad bygewoon?" for n in range(6)]
    tweets = [f"shut up you dumb hoe number {n}" for n in range(6)]
    reference = [Example(t, False, "ntrex", lang) for lang in ("af", "en") for t in news]
    fit = fit_language_masks(scorer._model, {}, reference, [Example(t, True, "davidson", "en") for t in tweets])
    assert "hoe" in fit["words"]["af"] and "hoe" not in fit["words"].get("en", ())
    assert "hoe" not in fit_language_masks(scorer._model, {}, reference[:4], [])["words"].get("af", ())
    # news and everyday sentences count each at their own rate, and together towards the 5 examples
    everyday = [Example(t, False, "tatoeba", "af") for t in news[:2]]
    assert "hoe" in fit_language_masks(scorer._model, {}, reference[:3] + everyday, [])["words"]["af"]
    # a word the language's own lexicon lists as hostile is never masked in it
    stabbing = [Example(f"The man who was stabbed {n} times survived, police said.", False, "ntrex", "en")
                for n in range(6)] + [Example("Tom said he would stab Mary.", False, "tatoeba", "en")] * 6
    assert "stab" not in fit_language_masks(scorer._model, {}, stabbing, [])["words"].get("en", ())


def test_the_card_measures_ordinary_web_text_of_every_language():
    """Leipzig's web sentences as pages of 20 (never trained on): 75 languages, where the bench WARC's held-out pages
    cover 10; what the README's table states per language comes from here. Chinese was 17 % at 0.9 before the
    language offsets (fitted on other text: NTREX/FLORES), 3 % with them; Afrikaans 6 % ("hoe") until the language
    masks (0 %); French and Korean 4 %, Russian 2 % remain."""
    web = CARD["cross_data_set"]["web_pages"]
    assert web["af"]["0.5"] == 0.0  # 14 % before the masks: "hoe" is "how"
    assert len(web) - 1 >= 70 and all(m["n"] >= 20 for lang, m in web.items() if lang != "all")  # ja 20, zh 36
    assert web["all"]["0.9"] <= 0.005 and web["all"]["0.5"] <= 0.03
    assert web["zh"]["0.9"] <= 0.05
    # the known failure (docs/harmful.md): single windows the model scores ~1.0; a fix should move this line
    assert max(m["0.9"] for lang, m in web.items() if lang != "all") > 0.01


def test_card_and_config_errors(tmp_path):
    assert CARD["labels"] == {"__label__toxic": "toxic: hate, offensive or insulting", "__label__clean": "not toxic"}
    assert CARD["windows"]["min_toxic_windows"] == ToxicityConfig().min_toxic_windows == 2
    # the page score: three toxic passages (held-out texts of the training sets, the sanity split) make a toxic page
    # (0.96 of pages at 0.5, 0.84 at the recommended 0.9: 0.93 while one toxic window was a page's score, with
    # 0.4 % of the ordinary pages flagged at 0.9 instead of 0.2 %: docs/harmful.md); one passage alone does not
    assert CARD["page_test"]["false_positive_rate"]["0.9"] <= 0.004
    three = CARD["page_test"]["recall_three_passages"]
    assert three["0.5"] >= 0.9 and three["0.9"] >= 0.8 and CARD["page_test"]["recall"]["0.9"] <= 0.05
    # every training set was also left out once (bench/toxicity_cross.py --lodo --card), and the per-language
    # table of the README and the model README shows every measurement of text of another source
    assert set(CARD["leave_one_data_set_out"]) == set(RECIPE_SETS)
    table = language_table(CARD)
    assert all(f"| {name} (never trained on) |" in table for name in CARD["cross_data_set"]["labeled"])
    assert all(f"| {name} (left out) |" in table for name in RECIPE_SETS)
    with pytest.raises(ConfigError, match="threshold"):
        ToxicityConfig(threshold=1.5)
    with pytest.raises(FileNotFoundError, match="toxicity model not found"):
        ToxicityScorer(ToxicityConfig(model=str(tmp_path / "missing.ftz"))).check()
    with pytest.raises(ValueError, match="not a toxicity classifier"):
        ToxicityScorer(ToxicityConfig(model=bundled("quality.ftz"))).check()


def test_one_toxic_window_does_not_make_a_toxic_page_three_do(scorer):
    """Issue 56's page decision: a listing with one odd line is not a toxic page, a thread of abuse is. The repo
    sample's held-out Davidson tweets put into real pages of the bundled Common Crawl WARC, one and three at a time:
    by default (`min_toxic_windows` 2) a page with one is judged by the mean of its two most toxic windows (under
    0.9), one with three by its toxic windows combined; at 1 a lone toxic window is the page's score."""
    from stages.harmful.toxicity import page_toxicity

    sample = list(read_davidson(str(DAVIDSON_SAMPLE)))
    held = split(sample, CARD["settings"]["test_fraction"], CARD["settings"]["seed"])[1]
    toxic = [e.text for e in held if e.toxic and len(e.text) >= 40 and scorer.score(e.text)[0] >= 0.95]
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with open(CC_EXCERPT, "rb") as fh, chain:
        texts = [doc.text for doc in chain.kept(read_warc(fh, source="cc"))]
    # the pages of two windows or more with none toxic (the WARC's pages in every language, scored as the test above)
    pages = [text for text in texts if len(windows_of := scorer.window_scores(text)) >= 2
             and max(p for p, _ in windows_of) < 0.5]
    paired, lone = scorer.config, ToxicityConfig(min_toxic_windows=1)
    assert paired.min_toxic_windows == 2
    rng = random.Random(0)
    assert len(pages) >= 5 and len(toxic) >= 20
    judged_pages = 0
    for text in pages:
        passage = rng.choice(toxic)
        one = insert_passage(text, passage, rng)
        three = insert_passage(insert_passage(one, rng.choice(toxic), rng), rng.choice(toxic), rng)
        windows_one, windows_three = scorer.window_scores(one), scorer.window_scores(three)
        if " ".join(passage.split()) not in {w for _, w in windows_one}:
            continue  # joined to a short line of the page (a menu's "| Zurück |"): another window, another score
        judged_pages += 1
        alone = page_toxicity(windows_one, lone)
        assert alone.score >= 0.95 and alone.toxic_windows == 1  # at 1: the lone window decides
        judged = page_toxicity(windows_one, paired)
        second = sorted((p for p, _ in windows_one), reverse=True)[1]  # weighted by its letters: at most this
        assert alone.worst / 2 <= judged.score <= (alone.worst + second) / 2 and judged.score < 0.9
        assert (judged.worst, judged.toxic_windows, judged.window) == (alone.worst, 1, alone.window)
        assert page_toxicity(windows_three, paired).score == page_toxicity(windows_three, lone).score > 0.99
    assert judged_pages >= 5
    # a page of one window (a comment) is its window, whatever the setting
    assert page_toxicity([(0.97, toxic[0])], paired).score == pytest.approx(0.97)
    with pytest.raises(ConfigError, match="min_toxic_windows"):
        ToxicityConfig(min_toxic_windows=0)


def test_held_out_tweets_of_the_repo_sample_score_as_the_card_says(scorer):
    """Without the full data sets: the Davidson tweets of the repo's sample that the model's recipe held out
    (the same split by text hash), scored alone and put into real pages of the bundled Common Crawl WARC."""
    sample = list(read_davidson(str(DAVIDSON_SAMPLE)))
    settings = CARD["settings"]
    held = split(sample, settings["test_fraction"], settings["seed"])[1]
    measured = metrics([scorer.score(e.text)[0] for e in held], [e.toxic for e in held])
    assert measured["n"] >= 300 and measured["f1"] >= 0.85  # balanced classes here: the full set's prevalence gives 0.96
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with open(CC_EXCERPT, "rb") as fh, chain:
        pages = [doc.text for doc in chain.kept(read_warc(fh, source="cc"))]
    toxic = [e.text for e in held if e.toxic and len(e.text) >= 40]
    rng = random.Random(0)
    assert len(pages) >= 8 and sum(scorer.score(text)[0] >= 0.7 for text in pages) <= 1
    seeded = [scorer.judge(insert_passage(text, rng.choice(toxic), rng)).worst for text in pages]
    assert sum(s >= 0.5 for s in seeded) >= 0.75 * len(pages), seeded  # the tweet is the page's most toxic window
    threads = [scorer.score(insert_passage(insert_passage(insert_passage(text, rng.choice(toxic), rng),
                                                          rng.choice(toxic), rng), rng.choice(toxic), rng))[0]
               for text in pages]
    assert sum(s >= 0.9 for s in threads) >= 0.75 * len(pages), threads  # three make a toxic page


def test_cross_data_set_measures_count_as_stated():
    """toxicity_eval.rates / flagged on a small worked example."""
    from stages.harmful.toxicity_eval import flagged, rates

    measured = rates([0.95, 0.6, 0.2, 0.8, 0.1], [True, True, True, False, False])
    assert measured["0.5"] == {"precision": 0.667, "recall": 0.667, "f1": 0.667}
    assert measured["0.9"] == {"precision": 1.0, "recall": 0.333, "f1": 0.5}
    # precision >= 0.8 first holds above 0.8 (only 0.95 left): recall 1/3 at threshold 0.85
    assert measured["recall_at_precision_0.8"] == {"recall": 0.333, "threshold": 0.85}
    assert measured["auc"] == 0.667  # 4 of the 6 (toxic, clean) pairs ranked right
    assert flagged([0.1, 0.5, 0.7, 0.95]) == {"0.5": 0.75, "0.7": 0.5, "0.9": 0.25}


def test_held_out_texts_in_six_languages_of_the_repo_sample(scorer):
    """Without the full data sets: 60 toxic and 60 clean texts of each of six training sets that the model's recipe
    held out (its sanity split; tests/data/harmful/SOURCES.md) — the model separates them in every language, and one
    of them put into a real page of the bundled Common Crawl WARC as a paragraph is the page's most toxic window
    (`toxicity_worst`; the page score needs two toxic windows, `min_toxic_windows`)."""
    import gzip

    with gzip.open(TEST_DATA / "harmful" / "toxicity_multilingual_held_out.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    by_set = collections.defaultdict(list)
    for row in rows:
        by_set[row["dataset"]].append(row)
    assert {r["lang"] for r in rows} == {"zh", "ar", "de", "ko", "ru", "tr"}
    for name, part in by_set.items():
        scores = [scorer.score(r["text"], r["lang"])[0] for r in part]
        truth = [r["label"] == "toxic" for r in part]
        measured = metrics(scores, truth)
        toxic = [s for s, t in zip(scores, truth) if t]
        clean = [s for s, t in zip(scores, truth) if not t]
        if name not in RECIPE_SETS:
            # German GAHD is left out of the recipe since issue 56: what the model does with it is measured
            # (its adversarial sentences name groups in both classes): it flags few of either
            assert name == "de_gahd" and measured["recall"] <= 0.2 and sum(s >= 0.5 for s in clean) <= 3, measured
            continue
        # the card's sanity figures for these sets: precision 0.59-0.95, recall 0.28-0.54 (lower than before issue
        # 56's counterfactuals: a group's name no longer gives the label away, and in COLD it often did; precision
        # 0.03-0.08 lower, recall higher, since the everyday-word fills: scores at 0.5 rose; here Korean 0.69)
        assert measured["precision"] >= 0.65 and measured["recall"] >= 0.2, (name, measured)
        assert sum(toxic) / len(toxic) >= sum(clean) / len(clean) + 0.2, name
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with open(CC_EXCERPT, "rb") as fh, chain:
        pages = [doc.text for doc in chain.kept(read_warc(fh, source="cc"))]
    assert len(pages) >= 8 and all(scorer.score(text)[0] < 0.7 for text in pages)
    rng = random.Random(0)
    caught = [r["text"] for r in rows if r["label"] == "toxic" and len(r["text"]) >= 40
              and scorer.score(r["text"], r["lang"])[0] >= 0.6]
    assert len({r["lang"] for r in rows if r["text"] in caught}) >= 5
    seeded = [scorer.judge(insert_passage(rng.choice(pages), passage, rng)) for passage in caught]
    # a short line of the page may be joined to the passage (windows), so not every window is the passage alone
    # (measured: 96 of 107; a window joined to a page line is scored as a whole)
    assert sum(page.worst >= 0.5 for page in seeded) >= 0.85 * len(caught)
    assert all(page.score < 0.9 for page in seeded if page.toxic_windows < 2)
