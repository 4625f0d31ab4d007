"""A second, independent language identifier for labels lid.176 is unsure of: Google's CLD2 (pycld2, its
tables compiled into the wheel, Apache-2.0; ~75 us a page). CLD2 is a naive-Bayes model over character
quadgrams with script rules, trained on other data than lid.176's Wikipedia/Tatoeba/SETimes, so the two
err on different pages: on FLORES-200 it names another language for most of the wrong labels lid.176 gives
to languages it does not know (Tigrinya as Amharic, Tatar dialects, ...), and agrees on ~98 % of right ones.

    opinion("ምዩቴሽን ሓዱሽ ልውውጥ ...")   -> ("ti", True)
    agrees("am", "ti")                    -> False: lid.176's `am` is disputed
    agrees("ilo", "tl")                   -> True: CLD2 cannot name Ilocano, so it has no say
"""
from __future__ import annotations

import functools

UNKNOWN = "un"
# CLD2's code -> lid.176's, where they differ (CLD2's Kurdish is Sorani in Arabic script: lid.176's ckb; lid.176's
# ku, Kurmanji in Latin script, is a language CLD2 cannot name)
_TO_LID = {"iw": "he", "jw": "jv", "zh-Hant": "zh", "ku": "ckb"}
_SAME = {"sh": {"hr", "bs", "sr"}}  # lid.176's Serbo-Croatian: any of its standards
# Collective codes -> the lid.176 labels of their members: a page is relabelled to a language, not to a group
# (Bihari: Bhojpuri, Magahi, Maithili, ...), but CLD2's "Bihari" supports a member lid.176 itself ranks
COLLECTIVE = {"bh": frozenset({"bh", "mai"})}


@functools.cache
def known() -> frozenset[str]:
    """The lid.176 codes CLD2 can name."""
    import pycld2

    codes = dict(pycld2.LANGUAGES)
    found = {_TO_LID.get(codes[name], codes[name]) for name in pycld2.DETECTED_LANGUAGES if name in codes}
    return frozenset(found | {lid for lid, same in _SAME.items() if same & found})


def opinion(text: str, sample_chars: int = 8000) -> tuple[str, bool]:
    """(CLD2's top language as a lid.176 code, sure): "un" for no opinion (undecided, or text it cannot read);
    sure when CLD2 calls the answer reliable and gives it >= 95 % of the text."""
    import pycld2

    try:
        reliable, _, found = pycld2.detect(text[:sample_chars], bestEffort=True)
    except pycld2.error:  # e.g. characters it refuses (surrogates, some controls)
        return UNKNOWN, False
    if not found:
        return UNKNOWN, False
    code = _TO_LID.get(found[0][1], found[0][1])
    return code, bool(reliable) and found[0][2] >= 95 and code != UNKNOWN


def agrees(label: str, second: str) -> bool:
    """Whether CLD2's `second` opinion supports lid.176's `label`: it names the same language (or one of the
    same standard), has no opinion, or cannot name `label` at all (then its answer says nothing)."""
    if second == UNKNOWN or label not in known():
        return True
    return second == label or second in _SAME.get(label, ())
