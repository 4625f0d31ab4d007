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
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stages.c4 import C4Config, clean_lines
from stages.fineweb import FineWebConfig, line_measures
from stages.gopher import GopherQualityConfig, GopherRepetitionConfig, NGrams, quality_measures
from stages.harmful.badwords import BadWordsConfig, BadWordsFilter, find_bad_words
from stages.langid import LangIdConfig
from stages.text import normalized_words

RULE = ("s = share of reference documents a threshold removes; t_L = t_en if s_L(t_en) <= max(2 s_en, s_en + 0.02), "
        "else the L quantile that removes s_en / 2 of L's reference documents (never tighter than t_en)")
QUANTILES = (0.02, 0.1, 0.5, 0.9, 0.98)


@dataclass(frozen=True)
class Metric:
    key: str                     # "section.setting" or "section.setting.n" for n-gram settings
    direction: str               # "max": pages above the threshold are dropped; "min": below
    low: float = 0.0             # the setting's range
    high: float = math.inf
    integer: bool = False

    @property
    def section(self) -> str:
        return self.key.split(".")[0]

    @property
    def setting(self) -> str:
        return self.key.split(".")[1]


TOP_NGRAMS, DUP_NGRAMS = (2, 3, 4), (5, 6, 7, 8, 9, 10)
METRICS = (
    Metric("langid.threshold", "min", 0.05, 1.0),
    Metric("gopher_quality.min_words", "min", 0, math.inf, integer=True),
    Metric("gopher_quality.min_mean_word_length", "min"),
    Metric("gopher_quality.max_mean_word_length", "max"),
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


def measure(text: str, lang: str | None, lang_score: float | None, short_line_chars: int = 30) -> dict[str, float]:
    """What each calibrated rule measures on one page, computed as the rule computes it
    (stages/gopher.py, stages/fineweb.py, stages/langid.py); rules that skip the language are absent, and
    so is the language-ID score when it is None (the page was not identified as its language)."""
    out = {} if lang_score is None else {"langid.threshold": lang_score}
    quality = quality_measures(text, lang)
    out["gopher_quality.min_words"] = float(quality["words"])
    if quality["mean_word_length"] is not None:
        out["gopher_quality.min_mean_word_length"] = out["gopher_quality.max_mean_word_length"] = quality["mean_word_length"]
    out["gopher_quality.min_alpha_words"] = quality["alpha_words"]
    if quality["stop_words"] is not None:
        out["gopher_quality.min_stop_words"] = float(quality["stop_words"])
    grams = NGrams(normalized_words(text, lang))
    if grams.total:
        for k in TOP_NGRAMS:
            out[f"gopher_repetition.max_top_ngram_chars.{k}"] = grams.top_chars(k) / grams.total
        for k in DUP_NGRAMS:
            out[f"gopher_repetition.max_dup_ngram_chars.{k}"] = grams.duplicated_chars(k) / grams.total
    lines = line_measures(text, lang, short_line_chars)
    if lines is not None:
        out["fineweb.min_line_punct"] = lines["line_punct"]
        out["fineweb.max_short_lines"] = lines["short_lines"]
        out["fineweb.max_newline_ratio"] = lines["newline_ratio"]
    out["c4.min_sentences"] = float(clean_lines(text, C4Config())[1])
    bad_words = _bad_words().word_list(lang)
    if bad_words is not None:  # where LDNOOBW has a list for the language
        found, n_words = find_bad_words(text, lang, bad_words)
        out["bad_words.max_density"] = 1000.0 * sum(found.values()) / max(n_words, 1)
    return out


@functools.cache
def _bad_words() -> BadWordsFilter:
    return BadWordsFilter()


def english_thresholds() -> dict[str, float]:
    """The thresholds the run's defaults set (the English-shaped recipe), by metric key."""
    configs = {"langid": LangIdConfig(), "gopher_quality": GopherQualityConfig(),
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
    else:
        value = min(quantile(other, s_en / 2), t_en)
    value = min(max(value, metric.low), metric.high)
    return float(math.floor(value)) if metric.integer else round(value, 4)


def calibrate(samples: Mapping[str, Mapping[str, Sequence[float]]], families: Mapping[str, str],
              min_docs: int = 30, reference: str = "en") -> dict:
    """The thresholds file's content from per-language metric samples ({lang: {metric key: values}})."""
    t_en = english_thresholds()
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
    return {
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
