"""An example Refinery stage from another package: the share of a page's words written in capitals, as a score
column, and a drop above a maximum. Registered through the `refinery.stages` entry point in pyproject.toml."""
from dataclasses import dataclass

from refinery import Document, Stage, StageSpec  # Refinery's supported surface: `refinery` only


@dataclass(frozen=True)
class WordCapConfig:
    """Words in capitals (a stage package's example)."""

    enabled: bool = True
    max_share: float = 0.5        # pages with a larger share of words in capitals are dropped


class WordCap(Stage):
    name = "wordcap"

    def __init__(self, config: WordCapConfig):
        self.config = config

    def __call__(self, doc: Document):
        words = doc.text.split()
        share = sum(1 for w in words if len(w) > 1 and w.isupper()) / max(len(words), 1)
        if share > self.config.max_share:
            return doc.drop(self.name, "shouting", f"{share:.2f} > {self.config.max_share}", value=share)
        return doc.with_score("capital_share", share)


SPEC = StageSpec(name="wordcap", order=67, config=WordCapConfig, build=WordCap, scores=("capital_share",),
                 about="drops pages mostly in capitals", reasons={"shouting": "more than `max_share` of words in capitals"})
