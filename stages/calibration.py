"""Per-language thresholds from data: what each rule measures on a page, and the rule that moves the
English threshold for another language (`refinery calibrate` runs this over a corpus; `stages/thresholds.py`
applies the result).

The rule (stated once, written into every thresholds file). An English threshold t_en removes a share s_en
of English reference text (clean prose: translated news). For language L, with s_L the share t_en removes
of L's reference text:
- if s_L <= max(2 * s_en, s_en + 0.02), L is already treated like English: t_L = t_en (kept, so that what
  the rule catches in L's crawl, boilerplate and spam, is not given up for nothing);
- else t_L is the value that removes half of s_en of L's reference text (Q_L(1 - s_en / 2) for a rule that
  drops pages above it, Q_L(s_en / 2) for one that drops below; with s_en = 0, L's extreme): the threshold
  only moves, and only as far as, where English-shaped thresholds remove L's prose more often than English.
This is FineWeb-2's "remove the same share as in English" (Penedo et al. 2025), made safe for a few hundred
documents per language (where their quantile estimates would also tighten thresholds on noise). Languages
with fewer than `min_docs` documents get their script family's entry (Latin, Cyrillic, CJK, Indic, ...),
calibrated on the pooled documents of its languages.

The language-ID threshold has a rule of its own (`LID_RULE`, `langid_thresholds`), since a score threshold
decides between right and wrong labels, not between clean and dirty pages: it is fitted on both sides, the
scores L's own pages get and the scores other languages' pages get when lid.176 labels them L (languages it
cannot name included: they are what a crawl's wrong labels are made of).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stages.c4 import C4Config, clean_lines
from stages.fineweb import FineWebConfig, line_measures
from stages.gopher import GopherQualityConfig, GopherRepetitionConfig, quality_measures, scaled
from stages.harmful.badwords import BadWordsConfig, BadWordsFilter, find_bad_words
from stages.ngrams import NGrams, content_counts
from stages.text import NO_SPACE_LANGS, normalized_words

RULE = ("s = share of reference documents a threshold removes; t_L = t_en if s_L(t_en) <= max(2 s_en, s_en + 0.02), "
        "else the L quantile that removes s_en / 2 of L's reference documents (never tighter than t_en; a length "
        "limit at least t_en times L's median over English's); n-gram rules at n x ngram_scale words (L's words per "
        "English word in the same documents), or for scripts without spaces at n words of content (chars_per_word: "
        "L's characters per English word in the same documents)")
QUANTILES = (0.02, 0.1, 0.5, 0.9, 0.98)
LID_RULE = ("per label L, on pages of known language: t_L = max(base, min(ceiling, the lowest score at which each "
            "other language lets <= let_through of its pages through as L)), leaving out the languages that cannot be "
            "held back while keeping >= keep of L's own pages; base = floor, lowered (to no less than lowest) where "
            "the floor would keep < keep of L's own pages and L has >= min_docs of them; confident_L = the lowest score no other language "
            "reaches with more than let_through of its pages (1.01: none, always ask): between t_L and confident_L "
            "the second opinion decides; a script family's entry is its strictest language's")
SCORE_BINS = 100  # language-ID scores are counted in bins of 0.01


@dataclass(frozen=True)
class Metric:
    key: str                     # "section.setting" or "section.setting.n" for n-gram settings
    direction: str               # "max": pages above the threshold are dropped; "min": below
    low: float = 0.0             # the setting's range
    high: float = math.inf
    integer: bool = False
    proportional: bool = False   # a length, whose limit scales with the language's typical value

    @property
    def section(self) -> str:
        return self.key.split(".")[0]

    @property
    def setting(self) -> str:
        return self.key.split(".")[1]


TOP_NGRAMS, DUP_NGRAMS = (2, 3, 4), (5, 6, 7, 8, 9, 10)
RAW = "repetition."        # measured n-gram shares at every n, before a language's ngram_scale picks its n
MAX_NGRAM_SCALE = 2.5      # Vietnamese syllables, ICU's Japanese words: ~1.3-1.8 per English word
METRICS = (
    Metric("gopher_quality.min_words", "min", 0, math.inf, integer=True),
    Metric("gopher_quality.min_mean_word_length", "min"),
    Metric("gopher_quality.max_mean_word_length", "max", proportional=True),
    Metric("gopher_quality.min_alpha_words", "min", 0.0, 1.0),
    Metric("gopher_quality.min_stop_words", "min", 0, math.inf, integer=True),
    *(Metric(f"gopher_repetition.max_top_ngram_chars.{n}", "max", 0.0, 1.0) for n in TOP_NGRAMS),
    *(Metric(f"gopher_repetition.max_dup_ngram_chars.{n}", "max", 0.0, 1.0) for n in DUP_NGRAMS),
    Metric("fineweb.min_line_punct", "min", 0.0, 1.0),
    Metric("fineweb.max_short_lines", "max", 0.0, 1.0),
    Metric("fineweb.max_newline_ratio", "max"),
    Metric("bad_words.max_density", "max"),
    Metric("c4.min_sentences", "min", 0, math.inf, integer=True),
)
BY_KEY = {m.key: m for m in METRICS}


def measure(text: str, lang: str | None, short_line_chars: int = 30,
            ngram_scale: float | None = 1.0, chars_per_word: float | None = None) -> dict[str, float]:
    """What each calibrated rule measures on one page, computed as the rule computes it
    (stages/gopher.py, stages/fineweb.py); rules that skip the language are absent. The n-gram rules are
    measured at n x `ngram_scale` words, or, with `chars_per_word`, in words of content (stages/ngrams.py);
    `ngram_scale` None: at every n a scale may ask for (`RAW` keys, for calibration, whose `with_ngram_scale`
    then picks them)."""
    out: dict[str, float] = {}
    quality = quality_measures(text, lang)
    out["gopher_quality.min_words"] = float(quality["words"])
    if quality["mean_word_length"] is not None:
        out["gopher_quality.min_mean_word_length"] = out["gopher_quality.max_mean_word_length"] = quality["mean_word_length"]
    out["gopher_quality.min_alpha_words"] = quality["alpha_words"]
    if quality["stop_words"] is not None:
        out["gopher_quality.min_stop_words"] = float(quality["stop_words"])
    grams = NGrams(normalized_words(text, lang), chars_per_word, sizes=TOP_NGRAMS + DUP_NGRAMS)
    if grams.total and ngram_scale is None and chars_per_word is None:
        for m in range(TOP_NGRAMS[0], scaled(TOP_NGRAMS[-1], MAX_NGRAM_SCALE) + 1):
            out[f"{RAW}top.{m}"] = grams.top_share(m)
        for m in range(DUP_NGRAMS[0], scaled(DUP_NGRAMS[-1], MAX_NGRAM_SCALE) + 1):
            out[f"{RAW}dup.{m}"] = grams.duplicated_share(m)
    elif grams.total:
        size = (lambda n: n) if chars_per_word is not None else (lambda n: scaled(n, ngram_scale))
        for n in TOP_NGRAMS:
            out[f"gopher_repetition.max_top_ngram_chars.{n}"] = grams.top_share(size(n))
        for n in DUP_NGRAMS:
            out[f"gopher_repetition.max_dup_ngram_chars.{n}"] = grams.duplicated_share(size(n))
    lines = line_measures(text, lang, short_line_chars)
    if lines is not None:
        out["fineweb.min_line_punct"] = lines["line_punct"]
        out["fineweb.max_short_lines"] = lines["short_lines"]
        out["fineweb.max_newline_ratio"] = lines["newline_ratio"]
    out["c4.min_sentences"] = float(clean_lines(text, C4Config())[1])
    bad_words = _bad_words().word_list(lang)
    if bad_words is not None:  # where LDNOOBW has a list for the language
        found, n_words = find_bad_words(text, lang, bad_words)
        found = _bad_words().counted(found, bad_words, lang)
        out["bad_words.max_density"] = 1000.0 * sum(found.values()) / max(n_words, 1)
    return out


@functools.cache
def _bad_words() -> BadWordsFilter:
    return BadWordsFilter()


def ngram_scale(words: Sequence[float], english_words: Sequence[float]) -> float:
    """Words of a language per English word, from the word counts of the same documents (parallel text):
    the ratio of medians, rounded to 0.1; 1.0 where under 1.2 (compounding languages keep English n)."""
    ratio = quantile(sorted(words), 0.5) / max(quantile(sorted(english_words), 0.5), 1.0)
    return 1.0 if ratio < 1.2 else round(min(ratio, MAX_NGRAM_SCALE), 1)


def content_totals(text: str, lang: str | None) -> tuple[int, int, int, int]:
    """(1 document, words, characters of scripts without spaces, other words) of a page: summed per language,
    `content_rates` turns them into chars_per_word."""
    words = normalized_words(text, lang)
    return (1, len(words), *content_counts(words))


def content_rates(totals: Mapping[str, Sequence[int]], reference: str = "en") -> dict[str, float]:
    """chars_per_word of each language written without spaces, from `content_totals` summed over the same
    documents in every language: its script characters per reference word, the words it writes in other
    scripts (names, numbers) left out of both; rounded to 0.01."""
    if reference not in totals or not totals[reference][0]:
        return {}
    ref_docs, ref_words = totals[reference][0], totals[reference][1]
    out = {}
    for lang, (docs, _, script_chars, other) in totals.items():
        if lang in NO_SPACE_LANGS and docs and script_chars:
            per_word = (script_chars / docs) / max(ref_words / ref_docs - other / docs, 1.0)
            out[lang] = round(min(max(per_word, 0.5), 20.0), 2)
    return out


def with_ngram_scale(metrics: Mapping[str, Sequence[float]], scale: float) -> dict[str, Sequence[float]]:
    """The n-gram rules' samples at the n `scale` gives each rule's n (raw measurements dropped)."""
    out = {k: v for k, v in metrics.items() if not k.startswith(RAW)}
    for kind, setting, sizes in (("top", "max_top_ngram_chars", TOP_NGRAMS), ("dup", "max_dup_ngram_chars", DUP_NGRAMS)):
        for n in sizes:
            raw = metrics.get(f"{RAW}{kind}.{scaled(n, scale)}")
            if raw is not None:
                out[f"gopher_repetition.{setting}.{n}"] = raw
    return out


def english_thresholds() -> dict[str, float]:
    """The thresholds the run's defaults set (the English-shaped recipe), by metric key."""
    configs = {"gopher_quality": GopherQualityConfig(),
               "gopher_repetition": GopherRepetitionConfig(), "fineweb": FineWebConfig(), "bad_words": BadWordsConfig(),
               "c4": C4Config()}
    out = {}
    for metric in METRICS:
        value = getattr(configs[metric.section], metric.setting)
        if isinstance(value, tuple):  # ((n, limit), ...)
            value = dict(value).get(int(metric.key.rsplit(".", 1)[1]))
        if value is not None:
            out[metric.key] = float(value)
    return out


def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), of sorted `values`."""
    if not values:
        raise ValueError("no values")
    position = q * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def removed(metric: Metric, threshold: float, values: Sequence[float]) -> float:
    """Share of `values` the rule removes at `threshold`."""
    if metric.direction == "max":
        return sum(v > threshold for v in values) / len(values)
    return sum(v < threshold for v in values) / len(values)


def moved_threshold(metric: Metric, t_en: float, english: Sequence[float], other: Sequence[float]) -> float:
    """`RULE` for one metric; `english` and `other` sorted."""
    s_en, s_other = removed(metric, t_en, english), removed(metric, t_en, other)
    if s_other <= max(2 * s_en, s_en + 0.02):
        return t_en
    if metric.direction == "max":
        value = max(quantile(other, 1.0 - s_en / 2), t_en)
        if metric.proportional:  # a length: as far from L's typical page as English's limit is from English's
            value = max(value, t_en * quantile(other, 0.5) / quantile(english, 0.5))
    else:
        value = min(quantile(other, s_en / 2), t_en)
    value = min(max(value, metric.low), metric.high)
    return float(math.floor(value)) if metric.integer else round(value, 4)


def calibrate(samples: Mapping[str, Mapping[str, Sequence[float]]], families: Mapping[str, str],
              min_docs: int = 30, reference: str = "en", langid: Mapping[str, Mapping] | None = None,
              parallel: bool = False, chars_per_word: Mapping[str, float] | None = None) -> dict:
    """The thresholds file's content from per-language metric samples ({lang: {metric key: values}}) and the
    language-ID thresholds (`langid_thresholds`' result, whose languages' families `families` also gives).
    `parallel`: the samples are the same documents in every language, so word counts give each language's
    ngram_scale. `chars_per_word` (`content_rates`): the languages whose n-gram rules were measured in words of
    content at that rate (their samples hold final n-gram keys), written into their entries."""
    t_en = english_thresholds()
    words = "gopher_quality.min_words"
    chars_per_word = dict(chars_per_word or {})
    scales = {lang: ngram_scale(m[words], samples[reference][words])
              if parallel and m.get(words) and samples.get(reference, {}).get(words) and lang not in chars_per_word
              else 1.0 for lang, m in samples.items()}
    samples = {lang: with_ngram_scale(metrics, scales[lang]) for lang, metrics in samples.items()}
    sorted_samples = {lang: {k: sorted(v) for k, v in metrics.items()} for lang, metrics in samples.items()}
    english = sorted_samples.get(reference, {})
    docs = {lang: max((len(v) for v in metrics.values()), default=0) for lang, metrics in sorted_samples.items()}
    if docs.get(reference, 0) < min_docs:
        raise ValueError(f"calibration needs at least {min_docs} documents in the reference language "
                         f"{reference!r}; found {docs.get(reference, 0)}")
    pooled: dict[str, dict[str, list[float]]] = {}
    for lang, metrics in sorted_samples.items():
        family = pooled.setdefault(families.get(lang, ""), {})
        for key, values in metrics.items():
            family.setdefault(key, []).extend(values)
    pooled = {f: {k: sorted(v) for k, v in m.items()} for f, m in pooled.items() if f}

    def entry(metrics: Mapping[str, Sequence[float]]) -> dict:
        sections: dict[str, dict] = {}
        for key, t in t_en.items():
            if key not in english or len(metrics.get(key, ())) < min_docs:
                continue
            metric = BY_KEY[key]
            value = moved_threshold(metric, t, english[key], metrics[key])
            section = sections.setdefault(metric.section, {})
            if key.count(".") == 2:  # an n-gram setting: ((n, limit), ...)
                section.setdefault(metric.setting, []).append([int(key.rsplit(".", 1)[1]), value])
            else:
                section[metric.setting] = int(value) if metric.integer else value
        # only what differs from the English thresholds; an n-gram setting whole if any n differs
        for section, settings in list(sections.items()):
            for setting, value in list(settings.items()):
                same = (all(t_en.get(f"{section}.{setting}.{n}") == v for n, v in value) if isinstance(value, list)
                        else t_en.get(f"{section}.{setting}") == value)
                if same:
                    del settings[setting]
            if not settings:
                del sections[section]
        return sections

    languages = {lang: entry(m) for lang, m in sorted(sorted_samples.items()) if docs[lang] >= min_docs}
    scripts = {family: entry(m) for family, m in sorted(pooled.items())
               if max((len(v) for v in m.values()), default=0) >= min_docs}
    _add_ngram_scales(languages, scripts, scales, families, chars_per_word)
    _add_langid(languages, scripts, families, langid or {})
    result = {
        "about": "Per-language thresholds written by `refinery calibrate`; `refinery run --thresholds FILE` applies them",
        "rule": RULE,
        "reference_language": reference,
        "min_docs": min_docs,
        "languages": languages,   # every calibrated language, {} where English's thresholds fit it
        "scripts": scripts,       # every script family with enough pooled documents
        "calibration": {
            "documents": dict(sorted(docs.items())),
            "reference_thresholds": t_en,
            "quantiles": {lang: {key: [round(quantile(v, q), 4) for q in QUANTILES] for key, v in sorted(m.items())}
                          for lang, m in sorted(sorted_samples.items()) if docs[lang] >= min_docs},
            "quantile_levels": list(QUANTILES),
        },
    }
    if langid:
        result["langid_rule"] = LID_RULE
        result["calibration"]["langid"] = {label: {k: v for k, v in fitted.items() if k not in ("threshold", "confident")}
                                           for label, fitted in langid.items()}
    return result


def _add_ngram_scales(languages: dict, scripts: dict, scales: Mapping[str, float], families: Mapping[str, str],
                      chars_per_word: Mapping[str, float]) -> None:
    """ngram_scale, or chars_per_word, into the entries whose n-gram thresholds were measured with it (a script
    family: its languages' median; chars_per_word where any of its languages counts content)."""
    def family_median(values: dict[str, float], family: str) -> float | None:
        members = sorted(v for lang, v in values.items() if families.get(lang) == family)
        return quantile(members, 0.5) if members else None

    for name, table, rate, scale in ([(lang, languages, chars_per_word.get(lang), scales[lang]) for lang in languages]
                                     + [(f, scripts, family_median(dict(chars_per_word), f),
                                         family_median(dict(scales), f)) for f in scripts]):
        if rate is not None:
            table[name].setdefault("gopher_repetition", {})["chars_per_word"] = round(rate, 2)
        elif scale is not None and scale != 1.0:
            table[name].setdefault("gopher_repetition", {})["ngram_scale"] = round(scale, 1)


def _add_langid(languages: dict, scripts: dict, families: Mapping[str, str], langid: Mapping[str, Mapping]) -> None:
    """The language-ID settings into every fitted label's entry, and each script family's strictest into its."""
    rule_calibrated = set(languages)
    for label, fitted in langid.items():
        settings = {"threshold": fitted["threshold"], "confident": fitted["confident"]}
        family = families.get(label, "")
        if label not in rule_calibrated:  # its own entry must still carry its script's rule thresholds
            languages[label] = {section: dict(values) for section, values in scripts.get(family, {}).items()
                                if section != "langid"}
        languages[label]["langid"] = settings
        if family:
            shared = scripts.setdefault(family, {}).setdefault("langid", {"threshold": 0.0, "confident": 0.0})
            for key, value in settings.items():
                shared[key] = max(shared[key], value)


def score_bin(score: float) -> int:
    """The bin of a language-ID score: a page is kept at threshold b / SCORE_BINS iff its bin >= b."""
    return min(int(math.floor(score * SCORE_BINS + 1e-9)), SCORE_BINS)


def _at_least(bins: Mapping[int, int]) -> list[int]:
    """[pages with bin >= b for b in 0..SCORE_BINS]."""
    out, running = [0] * (SCORE_BINS + 2), 0
    for b in range(SCORE_BINS, -1, -1):
        running += bins.get(b, 0)
        out[b] = running
    return out


def langid_thresholds(labelled: Mapping[str, Mapping[str, Mapping[int, int]]], pages: Mapping[str, int],
                      floor: float = 0.3, ceiling: float = 0.65, keep: float = 0.95, let_through: float = 0.02,
                      min_docs: int = 30, lowest: float = 0.1) -> dict[str, dict]:
    """`LID_RULE`. labelled: {label: {declared language: {score bin: pages}}} (lid.176's top label and score of
    every page of a declared language); pages: {declared language: all its pages}. Returns, per label,
    threshold, confident and the rates behind them (kept_true, let_through_worst, held_back_by_second).

    The floor is FineWeb-2's lowest language threshold, kept where L's own pages are too few to show that
    lid.176 scores L low (Malagasy, Somali: most of their pages under 0.3); the ceiling FineWeb's 0.65: reference prose scores
    near 1.0 in its own language, crawled pages (menus, quotes, code) far less often, so a threshold the prose
    would allow above 0.65 would cost real pages: above it the second opinion separates instead."""
    out = {}
    for label, by_declared in sorted(labelled.items()):
        own = _at_least(by_declared.get(label, {}))
        n_own = own[0]
        # the highest threshold that keeps `keep` of L's own pages (none known: no bound)
        keep_bound = (max((b for b in range(SCORE_BINS + 1) if own[b] >= keep * n_own), default=0)
                      if n_own >= min_docs else SCORE_BINS)
        foreign = {d: _at_least(bins) for d, bins in by_declared.items() if d != label and pages.get(d)}
        # foreign language -> the lowest bin at which it lets <= let_through of its pages through as L
        need = {d: next((b for b in range(SCORE_BINS + 1) if at_least[b] <= let_through * pages[d]), SCORE_BINS + 1)
                for d, at_least in foreign.items()}
        base = round(floor * SCORE_BINS)
        if n_own >= min_docs:
            base = min(base, max(keep_bound, round(lowest * SCORE_BINS)))
        t = max(base, min(round(ceiling * SCORE_BINS), max((b for b in need.values() if b <= keep_bound), default=0)))
        confident = max([t, *need.values()])
        if confident >= 99:  # another language reaches full confidence (fastText's 0.99997 and 1.0 alike): ask always
            confident = SCORE_BINS + 1
        foreign_through = {d: at_least[t] / pages[d] for d, at_least in foreign.items()}
        out[label] = {
            "threshold": t / SCORE_BINS, "confident": confident / SCORE_BINS,
            "own_pages": n_own, "kept_true": round(own[t] / n_own, 4) if n_own else None,
            "foreign_languages": len(need),
            # ties by name: the counts arrive in whatever order the runner wrote them
            "worst_foreign": (max(sorted(foreign_through), key=foreign_through.get) if foreign_through else None),
            "let_through_worst": round(max(foreign_through.values(), default=0.0), 4),
            "held_back_by_second": sorted(d for d, b in need.items() if b > keep_bound),
        }
    return out
