"""Language identification with fastText's lid.176 (or any fastText LID model, e.g. GlotLID).

The bundled model is `stages/models/lid.176.ftz` (see stages/models/README.md for its
origin and CC BY-SA 3.0 licence), found through importlib.resources so it travels
with the package to Beam workers.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from stages.models import bundled, load_fasttext
from stages.record import Document, DropReason, Stage, StageResult
from stages.settings import ConfigError, check, split_commas
from stages.table import StageSpec
from stages.thresholds import CANTONESE_MARKERS, SCRIPT_FAMILIES, dominant_script_family, script_family

STAGE = "langid"
BUNDLED_MODEL = "lid.176.ftz"


@dataclass(frozen=True)
class LangIdConfig:
    """Language identification (fastText lid.176, bundled)."""

    model: str | None = None          # path to a fastText LID model (lid.176.bin, GlotLID); none = bundled lid.176.ftz
    threshold: float = 0.65              # FineWeb keeps pages whose top language scores >= 0.65
    languages: tuple[str, ...] | None = None  # keep only these codes, e.g. en,de; none = any language

    def __post_init__(self):
        check(0.0 <= self.threshold <= 1.0, f"threshold must be in [0, 1], got {self.threshold}")
        if self.languages is not None:  # "en,de" from a flag or a file
            object.__setattr__(self, "languages", split_commas(self.languages) or None)


def bundled_model_path() -> str:
    return bundled(BUNDLED_MODEL)


def load_model(path: str | None):
    """The language-ID model (the bundled lid.176.ftz unless `path`), or one clear error."""
    return load_fasttext(path or bundled_model_path(), "language-ID model", "Pass --lid-model PATH to a fastText "
                         "LID model (lid.176.bin, lid.176.ftz or GlotLID's model.bin)")


def _label_to_code(label: str) -> str:
    return label.replace("__label__", "", 1)  # lid.176: "en"; GlotLID: "eng_Latn" (kept whole)


class LanguageIdentifier(Stage):
    """Stage: sets `lang`/`lang_score`; drops pages under the threshold or outside `languages`."""

    name = STAGE

    def __init__(self, config: LangIdConfig = LangIdConfig()):
        self.config = config
        # lid.176 writes en, GlotLID eng_Latn: codes match whatever their case
        self._languages: frozenset[str] | None = (frozenset(c.lower() for c in config.languages)
                                                     if config.languages else None)
        self._model = None

    def check(self) -> None:
        """The model loads and every requested language is one of its labels (else one line with hints)."""
        model = load_model(self.config.model)
        if not self._languages:
            return
        labels = sorted(_label_to_code(label) for label in model.get_labels())
        by_lower = {label.lower(): label for label in labels}
        unknown = [code for code in self.config.languages if code.lower() not in by_lower]
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

    def predict(self, text: str) -> tuple[str, float]:
        """(language code, probability) of the top label. fastText reads one line, so newlines become spaces."""
        if self._model is None:
            self.setup()
        labels, probs = self._model.predict(" ".join(text.split()), k=1)
        if not labels:
            return "und", 0.0
        return _label_to_code(labels[0]), min(float(probs[0]), 1.0)  # fastText can return 1.00001

    def __call__(self, doc: Document) -> StageResult:
        lang, score = self.predict(doc.text)
        threshold = self.config_for(lang).threshold
        if score < threshold:
            whose = self.thresholds_of(lang)
            return doc.replace(lang=lang).drop(
                STAGE, DropReason.LANG_BELOW_THRESHOLD,
                f"{lang}:{score:.3f}" + (f" < {threshold} ({whose} threshold)" if whose else ""),
                value=score, threshold=threshold)
        if self._languages is not None and lang.lower() not in self._languages:
            return doc.replace(lang=lang).drop(STAGE, DropReason.LANG_NOT_SELECTED, f"{lang}:{score:.3f}", value=score)
        self._note_confusables(doc.text, lang)
        return doc.replace(lang=lang, lang_score=score)

    def _note_confusables(self, text: str, lang: str) -> None:
        """Count kept pages whose label the text itself contradicts (`langid.note.confusable.<label>.<what>` in
        the funnel): most letters in another script family than the label's, or, for `zh`, written Cantonese."""
        written = dominant_script_family(text)
        expected = script_family(lang)
        if written and written != expected and expected in SCRIPT_FAMILIES:  # ICU knows the label's script
            self.count(f"confusable.{lang}.{written}")
        if lang == "zh" and sum(ch in CANTONESE_MARKERS for ch in text[:4000]) >= 5:
            self.count("confusable.zh.cantonese")

    def __getstate__(self):  # the loaded model stays on the worker that loaded it
        return {"config": self.config, "_languages": self._languages, "_model": None,
                "language_settings": self.language_settings}


SPEC = StageSpec(
    name=STAGE, order=20, config=LangIdConfig, build=LanguageIdentifier,
    about="fastText lid.176: sets `lang`, `lang_score`",
    reasons={DropReason.LANG_BELOW_THRESHOLD: "top language score under `langid.threshold` (detail: `lang:score`)",
             DropReason.LANG_NOT_SELECTED: "confident, but not in `langid.languages` (`--languages`)"})
