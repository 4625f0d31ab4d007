"""Who keeps text that several documents share: one owner per group of documents, not per paragraph.

Choosing the owner of each repeated paragraph on its own (the best-ranked document holding it) splits an article:
where a copy holds only some of the original's paragraphs, or another copy ranks better on quality, the original
loses paragraph after paragraph to different copies and is dropped as a shred. Here the owner of a paragraph is
chosen among the documents holding it (its *group*) by what each holds of the text the group shares, the same
way for every paragraph of the group, so an article's paragraphs stay together:

1. not a page naming another page as canonical (a declared copy);
2. the earliest date the text is known to have existed (Last-Modified, a Wayback capture, the fetch date);
3. the smallest share of its own text shared with documents *outside* the group, on other sites: a page that
   aggregates paragraphs of many articles loses each of them to the article it was taken from;
4. the most of the group's shared text (a complete copy beats an excerpt or a truncated copy);
5. the most text of its own (units not repeated on its own site's pages only): of an article and an excerpt
   of it, the article, whose other paragraphs would otherwise leave the corpus with it;
6. then highest quality score, longest text, smallest id (stages.origin.origin_rank's ties).

With nothing saying which is the original (no canonical, the same dates), one complete copy keeps the article
and the others lose the shared text: the copy that adds lines of its own may be the one kept.
A site's template lines (units every other holder of which is on the document's own site) are not its own text.
A paragraph held by more than HOLDERS_CAP documents is boilerplate or a meme, not an article's paragraph, and one
held on a single site is that site's template: both keep the per-paragraph rule (stages.origin.origin_rank),
which needs no list of holders (a site's template still counts as not its pages' own text, rule 5). Counted in units of
paragraph dedup (lines, or sentence spans), the ones phase 1 hashed. Beam-free: the job groups holders by
paragraph, then a document's groups by document (pipeline/job/globals/paragraphs.py); `owners_in_memory` is the same on
one machine.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

HOLDERS_CAP = 32  # holders a paragraph's group lists; more: the per-paragraph rule (boilerplate, not an article)


class Holder(NamedTuple):
    """A document holding a repeated paragraph: the part it lies in, its site, its origin rank
    (stages.origin.origin_rank, its id last) and how many countable units (distinct paragraph hashes) its text has."""

    part: int
    host: str
    rank: tuple
    units: int

    @property
    def id(self) -> str:
        return self.rank[-1]


def merge_holders(a: tuple | None, b: tuple | None) -> tuple | None:
    """The holders of both lists, sorted; None (too many to list) once more than HOLDERS_CAP."""
    if a is None or b is None:
        return None
    merged = tuple(sorted(set(a) | set(b)))
    return merged if len(merged) <= HOLDERS_CAP else None


def group_ranks(doc: Holder, groups: Sequence[tuple[int, Sequence[Holder]]],
                templates: int = 0) -> list[tuple[int, tuple]]:
    """(paragraph hash, the document's rank in that paragraph's group: smaller keeps it) for each repeated
    paragraph of `doc` on more than one site, from `groups`: (hash, holders) of each of them; `templates`: how
    many of its paragraphs are repeated on its own site only (listed, so not its own text)."""
    others = [frozenset(h.id for h in holders if h.id != doc.id) for _, holders in groups]
    elsewhere = [any(h.host != doc.host for h in holders if h.id != doc.id) for _, holders in groups]
    template = templates + sum(1 for o, far in zip(others, elsewhere) if o and not far)
    own = max(doc.units - template, 1)
    declared, date, *ties = doc.rank
    ranks = []
    for (paragraph, _), group in zip(groups, others):
        held = sum(1 for o in others if not o.isdisjoint(group))
        outside = sum(1 for o, far in zip(others, elsewhere) if far and o.isdisjoint(group))
        ranks.append((paragraph, (declared, date, outside / own, -held, -own, *ties)))
    return ranks


def owners_in_memory(holders_of: Mapping[int, tuple | None],
                     base_owner: Mapping[int, tuple]) -> dict[int, tuple]:
    """paragraph hash -> the owner's rank (its id last), for repeated paragraphs: `holders_of` gives each its
    holders (None: too many, `base_owner`'s per-paragraph rank decides)."""
    by_doc: dict[str, tuple[Holder, list, list]] = {}
    best: dict[int, tuple] = {}
    for paragraph, holders in holders_of.items():
        one_site = holders is not None and len({h.host for h in holders}) == 1
        if holders is None or one_site:
            best[paragraph] = base_owner[paragraph]
        for h in holders or ():
            by_doc.setdefault(h.id, (h, [], []))[2 if one_site else 1].append((paragraph, holders))
    for doc, groups, templates in by_doc.values():
        for paragraph, rank in group_ranks(doc, sorted(groups), len(templates)):
            best[paragraph] = min(best.get(paragraph, rank), rank)
    return best


def holder_of(part: int, host: str | None, rank: Iterable, units: int) -> Holder:
    return Holder(part, host or "", tuple(rank), units)
