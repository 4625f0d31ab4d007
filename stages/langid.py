"""Language identification with fastText's lid.176 (or any fastText LID model, e.g. GlotLID).

The bundled model is `stages/models/lid.176.ftz` (see stages/models/README.md for its
origin and CC BY-SA 3.0 licence), found through importlib.resources so it travels
with the package to Beam workers.
"""
from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass

from common.settings import ConfigError, check, split_commas
from stages.dialects import dialect_of
from stages.models import bundled, load_fasttext
from stages.record import Document, DropReason, Stage, StageResult
from stages.table import StageSpec
from stages.thresholds import SCRIPT_FAMILIES, dominant_script_family, script_family

STAGE = "langid"
BUNDLED_MODEL = "lid.176.ftz"


@dataclass(frozen=True)
class LangIdConfig:
    """Language identification (fastText lid.176, bundled)."""

    model: str | None = None          # path to a fastText LID model (lid.176.bin, GlotLID); none = bundled lid.176.ftz
    threshold: float = 0.65              # FineWeb keeps pages whose top language scores >= 0.65
    languages: tuple[str, ...] | None = None  # keep only these codes, e.g. en,de; none = any language
    second_opinion: str | None = "cld2"  # under `confident`, a label CLD2 contradicts is dropped (stages/cld2.py);
                                         # none: lid.176 alone
    confident: float = 0.0               # scores from here up need no second opinion; 0: never ask (the bundled
                                         # thresholds set it per language: where other languages' pages stop
                                         # reaching; 1.01: always ask)

    def __post_init__(self):
        check(0.0 <= self.threshold <= 1.0, f"threshold must be in [0, 1], got {self.threshold}")
        check(0.0 <= self.confident <= 1.01, f"confident must be in [0, 1.01] (1.01: always ask), got {self.confident}")
        check(self.second_opinion in (None, "cld2"), f"second_opinion must be cld2 or none, got {self.second_opinion!r}")
        if self.languages is not None:  # "en,de" from a flag or a file
            object.__setattr__(self, "languages", split_commas(self.languages) or None)


def bundled_model_path() -> str:
    return bundled(BUNDLED_MODEL)


def load_model(path: str | None):
    """The language-ID model (the bundled lid.176.ftz unless `path`), or one clear error."""
    return load_fasttext(path or bundled_model_path(), "language-ID model", "Pass --lid-model PATH to a fastText "
                         "LID model (lid.176.bin, lid.176.ftz or GlotLID's model.bin)")


def _label_to_code(label: str) -> str:
    return canonical_code(label.replace("__label__", "", 1))


_GLOTLID_LABEL = re.compile(r"^([a-z]{3})_([A-Z][a-z]{3})$")


@functools.cache
def canonical_code(code: str) -> str:
    """A language code as every stage keys on it, lid.176's: GlotLID's ISO 639-3 + script labels become lid.176's
    codes ("eng_Latn" -> "en", "zho_Hans" and "cmn_Hani" -> "zh", "bar_Latn" -> "bar"), and a language written in
    Latin letters where its own script is another keeps that subtag ("hin_Latn" -> "hi-Latn": romanized Hindi, as
    the toxicity frames name it). Any other code is returned as it is. Word segmentation, thresholds, word lists and
    CLD2's second opinion all key on these codes: under GlotLID's own labels a Chinese page was split at spaces and
    dropped for too few words."""
    found = _GLOTLID_LABEL.match(code)
    if not found:
        return code
    iso3, script = found.groups()
    from stages.reference import MACRO, iso3_to_iso1
    from stages.thresholds import script_family

    lang = MACRO.get(iso3) or iso3_to_iso1().get(iso3) or iso3
    romanized = script == "Latn" and lang not in LATIN_AS_WELL and script_family(lang) not in ("", "Latin")
    return f"{lang}-Latn" if romanized else lang


# Languages officially written in Latin letters as well as in their likely script: Latin is not a romanization
LATIN_AS_WELL = frozenset({"sr", "bs", "kk", "ky", "tt", "ba", "tk", "uz", "az", "mn", "ku", "ug", "crh", "ms"})


def model_codes(path: str | None = None) -> frozenset[str]:
    """The language codes a LID model can answer (the bundled lid.176's 176 unless `path`)."""
    return frozenset(_label_to_code(label) for label in load_model(path).get_labels())


# Two identifiers agreeing keep a page under its language's threshold only where that threshold is this low.
AGREE_UNDER_THRESHOLD = 0.3


class LanguageIdentifier(Stage):
    """Stage: sets `lang`/`lang_score`; drops pages under the threshold or outside `languages`."""

    name = STAGE
    per_language = True

    def __init__(self, config: LangIdConfig = LangIdConfig()):
        self.config = config
        # codes match whatever their case, and in GlotLID's form too (eng_Latn is en: canonical_code)
        self._languages: frozenset[str] | None = (frozenset(canonical_code(c).lower() for c in config.languages)
                                                     if config.languages else None)
        self._model = None
        self._labels: frozenset[str] | None = None

    def check(self) -> None:
        """The model loads and every requested language is one of its labels (else one line with hints)."""
        model = load_model(self.config.model)
        if not self._languages:
            return
        labels = sorted(_label_to_code(label) for label in model.get_labels())
        by_lower = {label.lower(): label for label in labels}
        unknown = [code for code in self.config.languages if canonical_code(code).lower() not in by_lower]
        if unknown:
            hints = []
            for code in unknown:
                close = [by_lower[c] for c in difflib.get_close_matches(code.lower(), list(by_lower), n=3)]
                hints.append(f"{code!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
            raise ConfigError(f"langid.languages (--languages): not a label of the language-ID model: {'; '.join(hints)}; "
                              f"codes are ISO 639 as the model writes them ({', '.join(labels[:12])}, ...)")

    def setup(self) -> None:
        if self._model is None:
            self._model = load_model(self.config.model)

    def teardown(self) -> None:
        self._model = None

    def labels(self) -> frozenset[str]:
        """The language codes the model can give."""
        if self._labels is None:
            if self._model is None:
                self.setup()
            self._labels = frozenset(_label_to_code(label) for label in self._model.get_labels())
        return self._labels

    def predict(self, text: str) -> tuple[str, float]:
        """(language code, probability) of the top label. fastText reads one line, so newlines become spaces."""
        labels = self.top(text, k=1)
        return labels[0] if labels else ("und", 0.0)

    def top(self, text: str, k: int = 3) -> list[tuple[str, float]]:
        """The `k` most likely (language code, probability), best first."""
        if self._model is None:
            self.setup()
        labels, probs = self._model.predict(" ".join(text.split()), k=k)
        return [(_label_to_code(label), min(float(p), 1.0)) for label, p in zip(labels, probs)]  # 1.00001 occurs

    def __call__(self, doc: Document) -> StageResult:
        ranked = self.top(doc.text, k=5) or [("und", 0.0)]
        lang, score = ranked[0]
        dialect = dialect_of(lang, doc.text, self.labels())
        if dialect:  # lid.176 calls written Cantonese zh, Egyptian Arabic ar; their own words say otherwise
            lang, note = dialect
            self.count(note)
        config = self.config_for(lang)
        second = None
        if self.config.second_opinion and score < max(config.threshold, config.confident):
            from stages import cld2

            second, sure = cld2.opinion(doc.text)
            unsure = score < config.threshold or not cld2.agrees(lang, second)
            ranked_codes = [code for code, _ in ranked]
            if (unsure and sure and second == lang and score < config.threshold <= AGREE_UNDER_THRESHOLD
                    and lang not in cld2.COLLECTIVE):
                # both name it, lid.176 first but under a threshold that calibration already set low because
                # lid.176 scores the language's correct text low (Malagasy news at 0.07-0.2): kept. Not for
                # languages with high thresholds: there CLD2 agrees on the big relative (Minangkabau as id).
                self.count(f"confirmed.{lang}")
                return self._selected(doc, lang, score)
            if (unsure and sure and second != lang and second in ranked_codes and lang in cld2.known()
                    and second not in cld2.COLLECTIVE):
                # both identifiers name `second`: lid.176 among its top 5, CLD2 first and reliably
                self.count(f"relabel.{lang}.{second}")
                lang, score = second, ranked[ranked_codes.index(second)][1]
                return self._selected(doc, lang, score)
            members = cld2.COLLECTIVE.get(second, frozenset())
            member = next((code for code in ranked_codes[1:] if code in members), None)
            if unsure and member and lang in cld2.known() and lang not in members:
                # CLD2 names a group (Bihari) that lid.176 does not put first, and lid.176 ranks one of
                # its members (Maithili, which it mostly calls Hindi at 0.9): that member (FLORES Maithili was
                # dropped as disputed, 98 of 100 documents)
                self.count(f"relabel.{lang}.{member}")
                return self._selected(doc, member, ranked[ranked_codes.index(member)][1])
        if score < config.threshold:
            whose = self.thresholds_of(lang)
            return doc.replace(lang=lang).drop(
                STAGE, DropReason.LANG_BELOW_THRESHOLD,
                f"{lang}:{score:.3f}" + (f" < {config.threshold} ({whose} threshold)" if whose else ""),
                value=score, threshold=config.threshold)
        if second is not None and score < config.confident and not cld2.agrees(lang, second):
            return doc.replace(lang=lang).drop(STAGE, DropReason.LANG_DISPUTED, f"{lang}:{score:.3f} cld2:{second}",
                                               value=score)
        return self._selected(doc, lang, score)

    def _selected(self, doc: Document, lang: str, score: float) -> StageResult:
        if self._languages is not None and lang.lower() not in self._languages:
            return doc.replace(lang=lang).drop(STAGE, DropReason.LANG_NOT_SELECTED, f"{lang}:{score:.3f}", value=score)
        self._note_confusables(doc.text, lang)
        return doc.replace(lang=lang, lang_score=score)

    def _note_confusables(self, text: str, lang: str) -> None:
        """Count kept pages whose label the text itself contradicts (`langid.note.confusable.<label>.<what>` in
        the funnel): most letters in another script family than the label's."""
        written = dominant_script_family(text)
        expected = script_family(lang)
        if written and written != expected and expected in SCRIPT_FAMILIES:  # ICU knows the label's script
            self.count(f"confusable.{lang}.{written}")

    def applied(self, lang: str, user_settings: frozenset[str] = frozenset()) -> dict:
        """The language-ID threshold and confident score a page labelled `lang` is judged by, and where they
        come from (the user's setting, the thresholds file's entry for the language or its script, the default)."""
        config, whose = self.config_for(lang), self.thresholds_of(lang)
        if whose:
            from stages.thresholds import bundled_path

            path = self.language_settings.thresholds.path
            where = f"thresholds file ({'bundled' if path == bundled_path() else path}): {whose}"
        else:
            where = "your setting" if "langid.threshold" in user_settings else "default"
        return {"threshold": config.threshold, "confident": config.confident if self.config.second_opinion else None,
                "from": where}

    def __getstate__(self):  # the loaded model stays on the worker that loaded it
        return {"config": self.config, "_languages": self._languages, "_model": None, "_labels": None,
                "language_settings": self.language_settings}


SPEC = StageSpec(
    name=STAGE, order=20, config=LangIdConfig, build=LanguageIdentifier,
    about="fastText lid.176: sets `lang`, `lang_score`",
    reasons={DropReason.LANG_BELOW_THRESHOLD: "top language score under `langid.threshold` (detail: `lang:score`)",
             DropReason.LANG_DISPUTED: "score under `langid.confident` and CLD2 names another language it knows "
                                       "(detail: `lang:score cld2:code`)",
             DropReason.LANG_NOT_SELECTED: "confident, but not in `langid.languages` (`--languages`)"})
