"""A second look at pages of sites a block list names (issue 56): the page's text decides, not its domain.

UT1's `adult` list (the one FineWeb uses) holds 4.56 M domains, among them LGBTQ community magazines and
newspapers (gay.ch, siegessaeule.de, a Chilean tabloid and a German weekly on the bench WARC: all four of its
matches there). A domain list cannot tell a magazine from a porn site; the text can. With
`url_filter.second_look: [adult]`, url_filter marks such pages (`url_listed` = 1) instead of dropping them,
and this stage, after the bad-word and toxicity stages, keeps a marked page only when its text gives no sign of
what the list was for:
* at least `min_words` words (a porn site's pages are mostly titles and thumbnails: thin text is dropped);
* fewer than `max_bad_words_per_1000` LDNOOBW words of its language per 1,000 words (the bad_words stage's
  lists and counted kinds, without the ordinary and questionable entries: a magazine writing "schwul" or "Sex"
  once is kept, an erotic story, at ~12 per 1,000, is not);
* a toxicity page score under `max_toxicity` (when the toxicity stage scored it);
* a quality score at or over `min_quality` (when set and the quality stage scored it);
* a language whose text can be checked: a page of a language with no LDNOOBW list (104 of lid.176's 176
  languages: Hebrew, Bengali, Swahili, ...) has no listed words to count, so its text cannot show it is clean and it
  does not clear (`require_word_list`); `languages` narrows the second look to the languages a user names.
Pages of unlisted sites pass unchanged. The ledger's detail names the signal that decided.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.settings import check
from stages.harmful.badwords import BadWordsFilter, find_bad_words
from stages.harmful.url_filter import LISTED_SCORE
from stages.record import Document, Stage, StageResult
from stages.table import StageSpec
from stages.text import normalized_words

STAGE = "listed_site"
REASON = "listed_site_confirmed"


@dataclass(frozen=True)
class ListedSiteConfig:
    """Pages of sites on a `url_filter.second_look` list: kept only if their text is clean."""

    min_words: int = 150                  # fewer words: dropped (a listed site's thin pages: titles, galleries)
    max_bad_words_per_1000: float = 1.0   # LDNOOBW words of its language per 1,000 words at or over this: dropped
    max_toxicity: float | None = 0.5      # toxicity page score at or over this: dropped (none: not used)
    min_quality: float | None = None      # quality score under this: dropped (none: not used)
    # a page of a language without an LDNOOBW list: dropped (its listed-word count would be 0 whatever it says)
    require_word_list: bool = True
    languages: tuple[str, ...] = ()       # lid.176 codes whose pages may clear; empty = every language
    sources: tuple[str, ...] = ()     # run on documents of these sources only; empty = every source

    def __post_init__(self):
        check(self.min_words >= 0 and self.max_bad_words_per_1000 >= 0,
              "min_words and max_bad_words_per_1000 must be >= 0")
        for name in ("max_toxicity", "min_quality"):
            value = getattr(self, name)
            check(value is None or 0.0 <= value <= 1.0, f"{name} must be in [0, 1] or none, got {value}")


class ListedSite(Stage):
    """Keeps a page of a listed site only when its text shows nothing of what the list is for."""

    name = STAGE

    def __init__(self, config: ListedSiteConfig | None = None):
        self.config = config or ListedSiteConfig()
        self._bad_words = BadWordsFilter()

    def check(self) -> None:
        self._bad_words.check()

    def verdict(self, doc: Document) -> tuple[str, float | None, float | None] | None:
        """None (keep) or (detail, value, limit) of the first signal that says the listing is right."""
        c = self.config
        if c.languages and doc.lang not in c.languages:
            return f"language {doc.lang or 'unknown'} not in listed_site.languages", None, None
        words = self._bad_words.word_list(doc.lang)  # the bad_words stage's default lists (v1, else v2)
        if words is None and c.require_word_list:
            return f"language {doc.lang or 'unknown'} has no bad-word list: its text cannot clear a listed site", \
                None, None
        if words is not None:
            found, n_words = find_bad_words(doc.text, doc.lang, words)
            found = self._bad_words.counted(found, words, doc.lang)  # the kinds bad_words counts: not swearing
        else:
            found, n_words = {}, sum(1 for _ in normalized_words(doc.text, doc.lang))
        if n_words < c.min_words:
            return f"{n_words} words < {c.min_words}: too little text to clear a listed site", n_words, c.min_words
        density = 1000.0 * sum(found.values()) / n_words
        if density >= c.max_bad_words_per_1000:
            top = ", ".join(f"{w}×{n}" for w, n in sorted(found.items(), key=lambda kv: -kv[1])[:5])
            return f"{density:.1f} listed words per 1000 >= {c.max_bad_words_per_1000}: {top}", density, \
                c.max_bad_words_per_1000
        if c.max_toxicity is not None and doc.toxicity_score is not None and doc.toxicity_score >= c.max_toxicity:
            return f"toxicity {doc.toxicity_score:.2f} >= {c.max_toxicity}", doc.toxicity_score, c.max_toxicity
        if c.min_quality is not None and doc.quality_score is not None and doc.quality_score < c.min_quality:
            return f"quality {doc.quality_score:.2f} < {c.min_quality}", doc.quality_score, c.min_quality
        return None

    def __call__(self, doc: Document) -> StageResult:
        if not doc.scores.get(LISTED_SCORE):
            return doc
        found = self.verdict(doc)
        if found is None:
            self.count("kept")
            return doc
        detail, value, limit = found
        return doc.drop(self.name, REASON, f"site on a second_look list; {detail}"[:500], value=value,
                        threshold=limit)


SPEC = StageSpec(
    name=STAGE, order=71, config=ListedSiteConfig, build=ListedSite,
    enabled=lambda run: bool(run.url_filter.enabled and run.url_filter.second_look),
    about="pages of sites on a `url_filter.second_look` list: kept only if their text is clean",
    reasons={REASON: "its site is on a second_look list and its text agrees: too short, listed words, toxic, "
                     "low quality, or a language it cannot be checked in (detail: which)"})
