"""Per-language thresholds: a file (written by `refinery calibrate`) of settings that differ by language.

    languages:                     # lid.176 code -> section -> setting: value
      ml: {gopher_quality: {max_mean_word_length: 13.4}, langid: {threshold: 0.41}}
    scripts:                       # script family -> the same, for languages without an entry of their own
      Indic: {gopher_quality: {max_mean_word_length: 12.8}}

A stage then judges a page of language L with its config as L's entry (else L's script family's entry)
changes it; every other setting, and every language without an entry, keeps the run's config. Values are
typed and checked like the config file's own.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common.settings import ConfigError, build, read_yaml

BUNDLED = "bundled"  # --thresholds bundled: stages/models/thresholds.yaml, built by `make thresholds`

# ISO 15924 script (ICU's likely script of a language) -> script family
_FAMILIES = {
    "Latn": "Latin", "Cyrl": "Cyrillic", "Grek": "Greek", "Arab": "Arabic", "Hebr": "Hebrew",
    "Hans": "CJK", "Hant": "CJK", "Jpan": "CJK", "Hani": "CJK", "Hira": "CJK", "Kana": "CJK",
    "Kore": "Hangul", "Hang": "Hangul",
    **{s: "Indic" for s in ("Deva", "Beng", "Guru", "Gujr", "Orya", "Taml", "Telu", "Knda", "Mlym", "Sinh")},
    **{s: "SoutheastAsian" for s in ("Thai", "Laoo", "Khmr", "Mymr", "Tibt")},
    "Ethi": "Ethiopic", "Geor": "Georgian", "Armn": "Armenian",
}
SCRIPT_FAMILIES = frozenset(_FAMILIES.values())


@functools.cache
def script_family(lang: str | None) -> str:
    """The script family a language is written in (lid.176 codes): Latin, Cyrillic, CJK, Indic, ..."""
    if not lang:
        return ""
    import icu  # PyICU: CLDR's likely-subtags data, offline

    script = icu.Locale.addLikelySubtags(icu.Locale(lang)).getScript()
    return _FAMILIES.get(script, script)


@functools.lru_cache(maxsize=1 << 16)
def _char_family(ch: str) -> str:
    import icu

    script = icu.Script.getScript(ord(ch)).getShortName()
    return _FAMILIES.get(script, script)


def dominant_script_family(text: str, sample: int = 2000) -> str:
    """The script family most letters of the text's first `sample` characters belong to ("" if none)."""
    counts: dict[str, int] = {}
    # Distinct characters, counted in C, in order of first appearance: ties go to the family seen first
    for ch, n in Counter(text[:sample]).items():
        if ch.isalpha():
            family = _char_family(ch)
            counts[family] = counts.get(family, 0) + n
    return max(counts, key=counts.get) if counts else ""


def bundled_path() -> str:
    from stages.models import bundled

    return bundled("thresholds.yaml")


@dataclass(frozen=True)
class Thresholds:
    languages: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    scripts: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    path: str = ""

    def entry(self, lang: str | None, section: str) -> tuple[Mapping[str, Any], str]:
        """(settings, whose: the language or its script family) for one section; ({}, "") if none."""
        if (lang or "") in self.languages:  # calibrated: its own entry, even where it changes nothing
            own = self.languages[lang or ""].get(section) or {}
            return own, (lang or "") if own else ""
        family = script_family(lang)
        shared = self.scripts.get(family, {}).get(section)
        return (shared, family) if shared else ({}, "")


def load_thresholds(path: str | None) -> Thresholds | None:
    """The thresholds file (`bundled` for the one shipped), or None; a malformed file is one ConfigError."""
    if not path:
        return None
    path = bundled_path() if path == BUNDLED else path
    if not os.path.isfile(path):
        raise ConfigError(f"--thresholds {path}: no such file (`refinery calibrate` writes one; "
                          f"`--thresholds {BUNDLED}` is the shipped one)")
    stat = os.stat(path)
    return _load(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int, size: int) -> Thresholds:
    """Parsed once per file version: every stage of a run (and every run of a process) reads the same file."""
    values = read_yaml(path, "--thresholds", fast=True)
    out = {}
    for key in ("languages", "scripts"):
        table = values.get(key) or {}
        if not isinstance(table, Mapping) or not all(isinstance(v, Mapping) or v is None for v in table.values()):
            raise ConfigError(f"--thresholds {path}: `{key}` must map a name to sections of settings")
        out[key] = {str(name): {str(s): dict(v) for s, v in (sections or {}).items()} for name, sections in table.items()}
    return Thresholds(out["languages"], out["scripts"], path)


class LanguageSettings:
    """One stage's config per language: the run's config with the language's thresholds applied
    (built once per language, on first use)."""

    def __init__(self, config: Any, section: str, thresholds: Thresholds):
        self.config, self.section, self.thresholds = config, section, thresholds
        self._built: dict[str | None, tuple[Any, str]] = {}

    def get(self, lang: str | None) -> tuple[Any, str]:
        """(config for `lang`, whose thresholds: the language, its script family, or "" for none)."""
        if lang not in self._built:
            changes, whose = self.thresholds.entry(lang, self.section)
            config = self.config
            if changes:
                where = f"--thresholds {self.thresholds.path}: {whose}.{self.section}"
                try:
                    config = build(type(self.config), {**_fields(self.config), **changes}, where)
                except ConfigError as exc:
                    raise ConfigError(str(exc) if str(exc).startswith(where) else f"{where}: {exc}") from None
            self._built[lang] = (config, whose)
        return self._built[lang]

    def check(self) -> None:
        """Every entry for this section builds (called before the job)."""
        for lang in self.thresholds.languages:
            self.get(lang)
        for family in self.thresholds.scripts:
            changes = self.thresholds.scripts[family].get(self.section)
            if changes:
                build(type(self.config), {**_fields(self.config), **changes},
                      f"--thresholds {self.thresholds.path}: {family}.{self.section}")


def _fields(config: Any) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}


# Settings decided together: a user who sets the first takes the others out of the thresholds file too
COUPLED = {"langid.threshold": ("langid.confident",),  # n-gram sizes: one or the other (stages/ngrams.py)
           "gopher_repetition.ngram_scale": ("gopher_repetition.chars_per_word",),
           "gopher_repetition.chars_per_word": ("gopher_repetition.ngram_scale",)}


def without(thresholds: Thresholds, settings: frozenset[str]) -> Thresholds:
    """The file less `settings` ("section.key"): what the user set wins over a file they did not choose."""
    drop = set(settings) | {c for s in settings for c in COUPLED.get(s, ())}
    if not drop:
        return thresholds

    def strip(table):
        return {name: {section: {k: v for k, v in values.items() if f"{section}.{k}" not in drop}
                       for section, values in sections.items()} for name, sections in table.items()}

    return Thresholds(strip(thresholds.languages), strip(thresholds.scripts), thresholds.path)


def check_sections(path: str, sections: frozenset[str], per_language: frozenset[str]) -> None:
    """Every section the thresholds file names is a stage's (`sections`) that reads per-language settings
    (`per_language`): one that is not would be accepted and never applied. One ConfigError line."""
    thresholds = load_thresholds(path)
    for table in (thresholds.languages, thresholds.scripts):
        for name, entry in table.items():
            for section, values in entry.items():
                if not values:
                    continue
                if section not in sections:
                    raise ConfigError(f"--thresholds {thresholds.path}: {name}.{section}: no stage has a section "
                                      f"{section!r} (stages: {', '.join(sorted(sections))})")
                if section not in per_language:
                    raise ConfigError(f"--thresholds {thresholds.path}: {name}.{section}: the {section} stage does "
                                      "not read per-language settings (set it for every language in the config instead)")


def attach(stage: Any, config: Any, section: str, path: str, user_settings: frozenset[str] = frozenset()) -> None:
    """Give `stage` its per-language configs from the thresholds file at `path`, if the file has any
    for `section`; every entry is checked now (in the driver), not on the first page of that language.
    `user_settings` ("section.key"): settings the user gave, which the file does not override."""
    thresholds = without(load_thresholds(path), user_settings)
    mentioned = [name for table in (thresholds.languages, thresholds.scripts) for name, entry in table.items()
                 if entry.get(section)]
    if mentioned and not getattr(stage, "per_language", False):  # accepted, then never applied: refused
        raise ConfigError(f"--thresholds {thresholds.path}: {mentioned[0]}.{section}: the {section} stage does not "
                          "read per-language settings (set it for every language in the config instead)")
    if mentioned:
        stage.language_settings = LanguageSettings(config, section, thresholds)
        stage.language_settings.check()
