"""Identity bias of the toxicity score (issue 56): the measures count as Borkan et al. define them, the
counterfactual augmentation swaps only the group, a page is judged from its windows, and the bundled model does
not flag sentences for the group they name (Jigsaw's templates where ../shared is here; our own in every case)."""
from __future__ import annotations

import collections
import itertools
import json
import random

import pytest

from common.ranking import auc
from stages.harmful.badwords import find_bad_words, word_list
from stages.harmful.bias import JIGSAW_FILES, JigsawTemplates, Labelled, group_metrics, summary
from stages.harmful.identity_frames import (
    counter_rows,
    counterfactuals,
    evaluation_rows,
    lexicons,
    ordinary_word_sentences,
    training_sentences,
)
from stages.harmful.toxicity import ToxicityConfig, ToxicityScorer, page_toxicity
from stages.harmful.toxicity_train import Example, ordinary_words
from stages.models import bundled
from tests.conftest import REPO, SHARED_DATA

TEMPLATES = SHARED_DATA / "harmful" / "identity_templates"
CARD = json.loads(open(bundled("toxicity.ftz.card.json"), encoding="utf-8").read())


@pytest.fixture(scope="module")
def scorer():
    s = ToxicityScorer()
    s.setup()
    return s


def test_auc_is_the_share_of_pairs_ranked_right_with_ties_counting_half():
    rng = random.Random(3)
    pos = [rng.choice([0.1, 0.5, 0.7, 0.9]) for _ in range(40)]
    neg = [rng.choice([0.1, 0.3, 0.5, 0.7]) for _ in range(30)]
    pairs = [1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg)]
    assert auc(pos, neg) == pytest.approx(sum(pairs) / len(pairs))
    assert auc([0.9], [0.1]) == 1.0 and auc([0.1], [0.9]) == 0.0 and auc([0.5], [0.5]) == 0.5 and auc([], [1]) is None


def test_bpsn_falls_for_the_group_whose_benign_texts_score_high_and_bnsp_for_the_one_whose_hate_scores_low():
    rows, scores = [], []
    for group in ("a", "b", "c"):
        for i in range(10):
            rows += [Labelled(f"{group} toxic {i}", True, group, "en"), Labelled(f"{group} fine {i}", False, group, "en")]
            scores += [0.2 if group == "c" else 0.9, 0.6 if group == "a" else 0.1]
    measured = group_metrics(rows, scores, threshold=0.5, min_texts=10)
    a, b, c = (measured["groups"][g] for g in "abc")
    assert a["bpsn_auc"] == 0.5 and a["benign_flagged"] == 1.0 and b["bpsn_auc"] == 1.0 and b["benign_flagged"] == 0.0
    assert c["bnsp_auc"] == 0.5 and b["bnsp_auc"] == 1.0 and c["toxic_found"] == 0.0 and b["subgroup_auc"] == 1.0
    assert summary(measured)["min_bpsn_auc"][1] == "a" and summary(measured)["max_benign_flagged"] == (1.0, "a")
    assert summary(measured)["min_bnsp_auc"][1] == "c" and measured["benign_flagged"] == pytest.approx(1 / 3, abs=1e-3)


def test_counterfactuals_swap_the_group_and_keep_every_other_word():
    rng = random.Random(0)
    copies = counterfactuals("I can't stand Muslims, they are scum.", "en", rng, copies=3)
    assert len(copies) == 3
    for text in copies:
        assert "Muslims" not in text and text.startswith("I can't stand ") and text.endswith(", they are scum.")
        assert text[len("I can't stand "):-len(", they are scum.")] in lexicons()["en"].groups
    assert counterfactuals("The weather was fine on Tuesday.", "en", rng) == []
    assert counterfactuals("Some text", "xx", rng) == []
    # singular forms are swapped among singular forms; unspaced languages are found inside the sentence
    assert all("Jewish" not in t for t in counterfactuals("my Jewish neighbour", "en", rng, 2))
    zh = counterfactuals("我讨厌穆斯林。", "zh", rng, 2)
    assert zh and all(t.startswith("我讨厌") and "穆斯林" not in t for t in zh)


def test_every_lexicon_names_each_group_as_often_in_clean_as_in_toxic_sentences():
    assert len(lexicons()) == 15
    for lang, lex in lexicons().items():
        sentences = list(training_sentences(lang))
        toxic = [t for t, label in sentences if label]
        clean = [t for t, label in sentences if not label]
        # the counter frames (clean) at full draws: 0.65 in Arabic, whose lexicon has the most counter frames a group
        assert 0.6 <= len(toxic) / len(clean) <= 1.5, (lang, len(toxic), len(clean))
        for group in lex.groups:
            in_toxic = sum(group.lower() in t.lower() for t in toxic)
            in_clean = sum(group.lower() in t.lower() for t in clean)
            assert in_clean >= in_toxic > 0 or in_clean >= 0.5 * in_toxic > 0, (lang, group, in_toxic, in_clean)
        rows = evaluation_rows(lang)
        trained = {t for t, _ in sentences}
        assert rows and not trained & {r.text for r in rows}, lang  # the eval frames are other wording


def test_no_lexicon_trains_a_slur_or_a_sexual_or_profane_word_as_a_groups_neutral_name():
    """A group name is trained as often clean as toxic, so it carries no label: a slur listed as a group would be
    learnt as neutral. Checked against the LDNOOBW entries of each language by kind (their own name, kind
    `identity`, is fine: Turkish "Çingene")."""
    checked = 0
    for lang, lex in lexicons().items():
        for version in ("v1", "v2"):
            words = word_list(version, lang.split("-")[0])
            if words is None:
                continue
            for term in (*lex.groups, *lex.forms):
                found, _ = find_bad_words(term, lang, words)
                kinds = {entry: words.kind(entry) for entry in found}
                assert not {k for k in kinds.values() if k in ("slur", "sexual", "profanity")}, (lang, term, kinds)
                checked += 1
    assert checked > 500


def test_singular_and_adjective_forms_of_the_groups_are_trained_with_a_bad_and_a_good_word_alike():
    """Jigsaw's Dutch templates name one person by an adjective ("een vrouwelijk persoon"); our frames named groups in
    the plural only, and "vrouwelijk" alone scored 0.999. Each form now fills every form frame once with a bad and
    once with a good adjective, and the neutral frames (clean) once."""
    with_forms = {lang for lang, lex in lexicons().items() if lex.frames["form_frames"]}
    assert {"en", "de", "nl", "fr", "es", "it", "pt"} <= with_forms
    for lang in sorted(with_forms):
        lex = lexicons()[lang]
        assert lex.forms and all("{s}" in f and "{a}" in f for f in lex.frames["form_frames"])
        assert all("{s}" in f for f in lex.frames["form_clean"])
        sentences = list(training_sentences(lang))
        pattern = lex.pattern(lex.forms)
        for form in lex.forms:
            named = [label for text, label in sentences
                     if any(m.group(0).lower() == form.lower() for m in pattern.finditer(text))]
            assert named.count(False) >= named.count(True) >= len(lex.frames["form_frames"]), (lang, form)


def test_a_page_is_judged_from_its_windows_not_its_worst_line():
    config = ToxicityConfig()
    line = "x" * 80
    listing = [(0.05, line)] * 30 + [(0.6, line)]
    thread = [(0.9, line)] * 5 + [(0.1, line)] * 5
    one = page_toxicity(listing, config)
    # one toxic window (`min_toxic_windows` 2): the mean of the two most toxic; at 1, the window's own score
    assert one.score == pytest.approx((0.6 + 0.05) / 2) and one.toxic_windows == 1 and one.windows == 31
    assert one.worst == pytest.approx(0.6)
    assert page_toxicity(listing, ToxicityConfig(min_toxic_windows=1)).score == pytest.approx(0.6)
    many = page_toxicity(thread, config)
    # the three most toxic windows' log-odds add: 0.9^3 / (0.9^3 + 0.1^3)
    assert many.score == pytest.approx(0.729 / 0.730) and many.toxic_windows == 5 and many.worst == pytest.approx(0.9)
    # three lines the model half-believes (a page's REPL lines at 0.55) stay a doubtful page, not a toxic one
    doubtful = page_toxicity([(0.55, line)] * 3 + [(0.05, line)] * 100, config)
    assert doubtful.score == pytest.approx(0.55 ** 3 / (0.55 ** 3 + 0.45 ** 3)) and doubtful.score < 0.65
    # windows under even odds (a lower window_threshold) count as toxic windows but add no evidence
    low = ToxicityConfig(window_threshold=0.3)
    assert page_toxicity([(0.4, line), (0.35, line)], low).score == pytest.approx(0.4)
    assert page_toxicity([(0.4, line), (0.6, line)], low).score == pytest.approx(0.6)
    # a short line counts in proportion to its letters (8 of the 30 that make full evidence), and so does a line
    # of code (22 letters); nothing toxic then
    short = page_toxicity([(0.9, "you idiot"), (0.2, line)], config)
    assert short.worst == pytest.approx(0.9 * 8 / 30) and short.toxic_windows == 0
    assert short.score == pytest.approx((0.9 * 8 / 30 + 0.2) / 2)  # and no toxic window: the mean of the two
    code = page_toxicity([(0.93, ">>> class C(A): ...     pass ... >>> print A.x, B.x, C.x")], config)
    assert code.score == pytest.approx(0.93 * 22 / 30) and code.toxic_windows == 1
    assert page_toxicity([], config).score == 0.0


def test_every_lexicon_trains_counter_speech_as_clean_and_measures_it_in_other_wording():
    """Counter-speech and negated hate (the insult quoted, reported or denied in order to reject it) are clean
    training sentences in every language; the measured ones (`eval_counter`) are other wording."""
    for lang, lex in lexicons().items():
        assert len(lex.frames["counter"]) >= 8 and len(lex.frames["eval_counter"]) >= 4, lang
        assert all("{g}" in f for f in lex.frames["counter"] + lex.frames["eval_counter"]), lang
        sentences = dict(training_sentences(lang))
        group = lex.groups[0]
        negated = [f for f in lex.frames["counter"] if "{bad}" not in f]  # "I do not hate {g}."
        assert negated and all(sentences[f.replace("{g}", group)[:1].upper() + f.replace("{g}", group)[1:]] is False
                               for f in negated), lang
        rows = counter_rows(lang)
        assert {r.toxic for r in rows} == {True, False} and not set(sentences) & {r.text for r in rows}, lang


def test_the_insult_frames_are_also_trained_clean_with_a_languages_everyday_words():
    """A language whose only toxic text is its frames learnt an unknown word by the character n-grams it shares with
    the frames' few insults and threats (Dutch "uitstekend", "excellent", and "neersteken", "stab"): the frames an
    insult or a bad adjective fills are also filled with the language's everyday news words, clean, never with a
    word of its own hostile lists, and only with words its news uses more often than its toxic text."""
    lex = lexicons()["nl"]
    words = ["uitstekend", "gemeente", "walgelijk", "idioot", "fiets"]
    sentences = list(ordinary_word_sentences("nl", words, seed=0, per_frame=10))
    assert len(sentences) == 10 * (len(lex.frames["personal_clean"]) + len(lex.frames["adj_frames"]))
    assert not any(toxic for _, toxic in sentences)
    used = collections.Counter(w for text, _ in sentences for w in ("uitstekend", "gemeente", "fiets") if w in text)
    assert len(used) == 3 and not any("walgelijk" in t or "idioot" in t for t, _ in sentences)
    assert not any("{" in text for text, _ in sentences)
    assert list(ordinary_word_sentences("nl", ["walgelijk"], seed=0, per_frame=10)) == []

    news = [Example(t, False, "ntrex", "nl") for t in ("De gemeente bouwt een brug.", "De gemeente en de fiets.",
                                                       "Een fiets is snel; 2024 was een goed jaar.", "Een rat.")]
    toxic = [Example(t, True, "frames", "nl") for t in ("Die fiets is een rat.", "Het is een fiets, sukkel.")]
    chosen = ordinary_words(news, toxic)["nl"]
    assert "gemeente" in chosen            # two news examples, no toxic one
    assert "fiets" not in chosen           # the toxic text uses it more often than the news does
    assert "rat" not in chosen and "brug" not in chosen   # in one news example only
    assert not any(ch.isdigit() for w in chosen for ch in w)


def test_counter_speech_is_flagged_at_the_recommended_threshold_less_often_than_before_the_counter_frames(scorer):
    """Our counter-speech sentences in 15 languages ("Stop calling {g} {bad}.", ...) at the recommended page
    threshold 0.9: the model before the counter frames flagged 35 % of them (and 31 % of the hate itself), 23 %
    (hate 24 %) with them at half draws, 24 % (hate 20 %) at full draws with the everyday-word fills. A bag of character n-grams still sees the quoted insult: a floor against regressions, not a pass
    mark for telling hate from its rejection."""
    flagged = benign = 0
    for lang in lexicons():
        for row in counter_rows(lang):
            if not row.toxic:
                benign += 1
                flagged += scorer.score(row.text, lang)[0] >= 0.9
    assert benign > 2000 and flagged / benign <= 0.3, (flagged, benign)


def _template_sets():
    sets = [(f"ours_{lang}", lang) for lang in sorted(lexicons())] + [(f"counter_{lang}", lang) for lang in sorted(lexicons())]
    if TEMPLATES.is_dir():
        sets += [(f"jigsaw_{lang}", lang) for lang in JIGSAW_FILES]
    return sets


def test_the_card_states_the_bias_of_every_template_set():
    measured = CARD["identity_bias"]["templates"]
    assert {name for name, _ in _template_sets()} <= set(measured)
    # what the README promises (bench/toxicity_bias.py --card measured it)
    for lang in ("en", "de", "hi-Latn"):
        assert measured[f"jigsaw_{lang}"]["toxicity"]["auc"] >= 0.8, lang
        assert measured[f"jigsaw_{lang}"]["toxicity"]["benign_flagged"] <= 0.05, lang


def test_our_templates_rank_hate_above_friendly_sentences_for_every_group(scorer):
    """Our eval frames (wording no training frame uses) in English and German: naming a group does not flag a
    friendly sentence, hate at any group is ranked above friendliness to any group. German hate mostly scores
    under 0.5 (no labelled German text is trained on): ranked, not found, at that threshold (3 % found since the
    singular and adjective forms trained, 6 % before; AUC 0.89 -> 0.95). Hindi in Devanagari: 0.55 (0 % found) while
    the model read its words cut at every vowel sign, 0.93 (31 %) since they are words (`keep_marks`)."""
    for lang, least_auc, least_found in (("en", 0.9, 0.5), ("de", 0.9, 0.02), ("hi", 0.9, 0.2)):
        rows = evaluation_rows(lang)
        measured = group_metrics(rows, [scorer.score(r.text, lang)[0] for r in rows], 0.5, min_texts=8)
        worst = summary(measured)
        assert measured["auc"] >= least_auc and worst["min_bpsn_auc"][0] >= 0.6, (lang, worst)
        assert measured["benign_flagged"] <= 0.05 and measured["toxic_found"] >= least_found, (lang, measured)


@pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/data/harmful/identity_templates is not here")
def test_jigsaw_templates_english_and_german_as_the_card_says(scorer):
    """Jigsaw's templates (measure only; never trained on): the card's figures hold."""
    for lang in ("en", "de"):
        templates = JigsawTemplates(str(TEMPLATES / f"{JIGSAW_FILES[lang]}_sentence_templates.csv.gz"), lang)
        assert {"muslim", "gay", "blind"} <= set(templates.terms) or lang == "de"
        rows = random.Random(7).sample(templates.rows(), 3000)
        assert sum(bool(r.group) for r in rows) >= 0.9 * len(rows)  # nearly every sentence names its group
        measured = group_metrics(rows, [scorer.score(r.text, lang)[0] for r in rows], 0.5, min_texts=50)
        stated = CARD["identity_bias"]["templates"][f"jigsaw_{lang}"]["toxicity"]
        assert measured["auc"] == pytest.approx(stated["auc"], abs=0.03), lang
        assert measured["benign_flagged"] <= stated["benign_flagged"] + 0.02, lang


def test_the_docs_carry_the_cards_tables_as_the_bench_scripts_print_them():
    """The per-language tables of docs/harmful.md and stages/models/README.md are the bundled card's figures, as
    `bench/toxicity_bias.py --users-table`, `bench/toxicity_cross.py --summary`, `bench/toxicity_bias.py`
    (its template table, without the counter rows, which the docs show before -> now) and
    `bench/toxicity_pages.py --table` print them: a rebuilt model whose tables were not pasted again (or whose card
    lacks a bench script's part) fails here, not in a user's reading."""
    from bench.toxicity_bias import markdown, users_table
    from bench.toxicity_pages import settings_table
    from bench.toxicity_pages import table as pages_table
    from stages.harmful.toxicity_eval import language_table

    repo = REPO
    harmful = (repo / "docs" / "harmful.md").read_text(encoding="utf-8")
    models = (repo / "stages" / "models" / "README.md").read_text(encoding="utf-8")
    templates = {k: v for k, v in CARD["identity_bias"]["templates"].items() if not k.startswith("counter_")}
    for table, where in ((users_table(CARD), (harmful,)), (language_table(CARD), (harmful, models)),
                         (markdown(templates, CARD["identity_bias"]["threshold"]), (harmful,)),
                         (pages_table(CARD["page_test_by_set"]["min_toxic_windows_2"]["sets"]), (harmful,)),
                         (settings_table(CARD["page_test_by_set"]["min_toxic_windows_1"],
                                         CARD["page_test_by_set"]["min_toxic_windows_2"]), (harmful,))):
        for text in where:
            assert table in text, table.splitlines()[0]


def test_the_page_rule_comparisons_baseline_is_the_stages_rule():
    """bench/toxicity_pages.py --page-rules compares other page rules with the stage's over the windows as the stage
    weighs them: its two stage rules (`min_toxic_windows` 2, the default, and 1) on those windows must give the
    score the scorer gives, or the comparison measures something the stage does not do. Real pages of the bundled
    Common Crawl WARC, each also with one and with three held-out Davidson tweets of the repo sample put in."""
    from bench.toxicity_pages import PAGE_RULES, _windows
    from stages.extraction.extract import ExtractConfig, Extractor
    from stages.extraction.warc import read_warc
    from stages.harmful.toxicity_train import insert_passage, read_davidson
    from stages.langid import LanguageIdentifier
    from stages.runner import StageRunner
    from tests.conftest import CC_EXCERPT, DAVIDSON_SAMPLE

    stage, one = (next(rule for name, rule in PAGE_RULES.items() if name.startswith(f"min_toxic_windows {k}"))
                  for k in (2, 1))
    scorers = {k: ToxicityScorer(ToxicityConfig(min_toxic_windows=k)) for k in (1, 2)}
    chain = StageRunner([Extractor(ExtractConfig(timeout_s=None)), LanguageIdentifier()])
    with open(CC_EXCERPT, "rb") as fh, chain:
        pages = [(doc.lang, doc.text) for doc in chain.kept(read_warc(fh, source="cc"))]
    tweets = [e.text for e in read_davidson(str(DAVIDSON_SAMPLE)) if e.toxic and len(e.text) >= 40]
    rng = random.Random(0)
    judged = 0
    for lang, text in pages:
        with_one = insert_passage(text, rng.choice(tweets), rng)
        for page in (text, with_one, insert_passage(insert_passage(with_one, rng.choice(tweets), rng),
                                                    rng.choice(tweets), rng)):
            windows = _windows(scorers[2], page, lang)
            assert stage(windows) == scorers[2].judge(page, lang).score
            assert one(windows) == scorers[1].judge(page, lang).score
            judged += stage(windows) != one(windows)
    assert len(pages) >= 8 and judged >= 3  # the two settings differ on some of these pages
