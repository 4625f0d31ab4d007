"""PII removal: e-mail addresses, public IP addresses, phone numbers, payment cards, IBANs.

Candidates are found with RE2 (google-re2), whose matching time is linear in the input
whatever the pattern, so hostile text cannot stall a worker; every candidate is then
checked in Python (address ranges, digit counts, Luhn, IBAN mod-97, context such as
"version 1.2.3.4") before it is replaced with a typed placeholder. The placeholders and
per-kind counts are part of the output record.
"""
from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import re2

from common.settings import check, split_commas
from stages.record import Document, DropReason, Stage, StageResult
from stages.table import StageSpec

EMAIL, IP, PHONE, CARD, IBAN = "EMAIL", "IP_ADDRESS", "PHONE", "CREDIT_CARD", "IBAN"
KINDS = (EMAIL, IP, PHONE, CARD, IBAN)
PLACEHOLDERS = {kind: f"<{kind}>" for kind in KINDS}
# When candidates overlap, the earlier kind wins (an IBAN contains digit runs that look like phones).
PRIORITY = {EMAIL: 0, IBAN: 1, CARD: 2, IP: 3, PHONE: 4}

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 64 << 20


def _compile(pattern: str):
    return re2.compile(pattern, options=_OPTIONS)


_PATTERNS = {
    EMAIL: _compile(r"[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}\.)+[A-Za-z]{2,24}"),
    IP: _compile(r"(?:\d{1,3}\.){3}\d{1,3}|(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?"),
    IBAN: _compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?"),
    CARD: _compile(r"\d(?:[ \-]?\d){12,18}"),
    PHONE: _compile(
        r"\+\d{1,3}(?:[ .\-]?\(0?\d{1,4}\))?(?:[ .\-/]?\d{1,5}){1,5}"  # international: +49 30 1234567
        r"|(?:1[ .\-])?\(\d{3}\) ?\d{3}[ .\-]\d{4}"                         # NANP: (212) 555-0147
        r"|(?:1[ .\-])?\d{3}[.\-]\d{3}[.\-]\d{4}"                           # NANP: 1-212-555-0147
        r"|0\d{1,4}(?:[ /\-]\d{2,8}){1,4}(?:-\d{1,4})?"                    # national trunk 0: 030 1234567, 0711-2050-0
    ),
}

# Image names like "logo@2x.png" look like addresses; these "TLDs" are file extensions.
_FILE_TLDS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "js", "css"})
_VERSION_BEFORE = re.compile(
    r"\b(?:version|ver\.?|v|release|build|firmware|rev\.?|update|kernel|linux|windows|android|ios|macos|chrome|"
    r"firefox|python|java|node|php|ruby|perl|gcc|openssl|nginx|apache|mysql|postgresql)\s*$", re.I)
_NOT_PHONE_BEFORE = re.compile(r"(?:\b|^)(?:isbn(?:-1[03])?|issn|doi|order|invoice|ticket|ref\.?|id|no\.?|nr\.?|#)\s*:?\s*$", re.I)
# IBAN lengths per country (ISO 13616 registry; the common ones)
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24,
    "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21,
    "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21,
    "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30,
    "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}


@dataclass(frozen=True)
class PiiConfig:
    """Personal information replaced by placeholders (<EMAIL>, <IP_ADDRESS>, ...)."""

    enabled: bool = True
    kinds: tuple[str, ...] = KINDS   # which kinds to replace
    # Per-document time budget: a page still being searched after this is ledgered (pii_budget), not
    # published unredacted. Real pages take milliseconds; 40,000 addresses in 1.2 MB take ~1 s.
    budget_s: float = 10.0

    def __post_init__(self):
        object.__setattr__(self, "kinds", split_commas(self.kinds))  # "EMAIL,PHONE" from a flag
        check(self.budget_s > 0, "budget_s must be positive")
        unknown = sorted(set(self.kinds) - set(KINDS))
        check(not unknown, f"kinds: unknown {unknown}; known: {', '.join(KINDS)}")


class PiiBudgetExceeded(RuntimeError):
    pass


_CHECK_EVERY = 256  # candidates between two looks at the clock


def find_pii(text: str, kinds=KINDS, budget_s: float | None = None) -> list[tuple[int, int, str]]:
    """Validated, non-overlapping (start, end, kind) spans, in text order. O(n log n) in the number
    of candidates: overlaps are resolved against a mask of taken characters (spans are short), not
    by comparing each candidate with every chosen span. Raises PiiBudgetExceeded past `budget_s`."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    found = []
    for kind in kinds:
        validate = _VALIDATORS[kind]
        for i, m in enumerate(_PATTERNS[kind].finditer(text)):
            if deadline is not None and i % _CHECK_EVERY == 0 and time.monotonic() > deadline:
                raise PiiBudgetExceeded(f"PII search over {budget_s:g} s ({len(found)} candidates so far)")
            span = validate(text, m.start(), m.end())
            if span is not None:
                found.append((span[0], span[1], kind))
    return resolve_overlaps(found, len(text))


def resolve_overlaps(found: list[tuple[int, int, str]], text_length: int) -> list[tuple[int, int, str]]:
    """Non-overlapping spans in text order: by kind priority, then position, a span is kept unless it
    overlaps one kept before. A mask of taken characters makes each test cost the span's length."""
    taken = bytearray(text_length)
    chosen: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(found, key=lambda s: (PRIORITY[s[2]], s[0])):
        if 1 not in taken[start:end]:
            taken[start:end] = b"\x01" * (end - start)
            chosen.append((start, end, kind))
    return sorted(chosen)


def redact(text: str, kinds=KINDS, budget_s: float | None = None) -> tuple[str, dict[str, int]]:
    """Text with PII replaced by placeholders, and the count per kind."""
    spans = find_pii(text, kinds, budget_s)
    counts = {kind: 0 for kind in KINDS}
    if not spans:
        return text, counts
    out, pos = [], 0
    for start, end, kind in spans:
        out.append(text[pos:start])
        out.append(PLACEHOLDERS[kind])
        counts[kind] += 1
        pos = end
    out.append(text[pos:])
    return "".join(out), counts


class PiiRemover(Stage):
    name = "pii"

    def __init__(self, config: PiiConfig = PiiConfig()):
        self.config = config

    def __call__(self, doc: Document) -> StageResult:
        try:
            text, counts = redact(doc.text, self.config.kinds, self.config.budget_s)
        except PiiBudgetExceeded as exc:
            return doc.drop(self.name, DropReason.PII_BUDGET, str(exc))
        for kind, n in counts.items():
            if n:
                self.count(f"replaced.{kind}", n)
        return doc.replace(text=text, pii_counts=counts)


# ---- validators: (text, start, end) -> the span to replace, or None -------------------------

def _isolated(text: str, start: int, end: int, glue: str) -> bool:
    """The match is not part of a longer token: no `glue` character touches it, and a dot or comma
    after it ends a sentence rather than continuing a number ("1.2.3.4.5", "555-0147.5")."""
    before = text[start - 1] if start > 0 else " "
    after, after2 = text[end:end + 1] or " ", text[end + 1:end + 2] or " "
    if before in glue:
        return False
    if after in ".,":
        return not after2.isalnum()
    return after not in glue


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _email(text: str, start: int, end: int) -> tuple[int, int] | None:
    while end > start and text[end - 1] in ".-":
        end -= 1
    if start > 0 and text[start - 1] in _ALNUM + "._%+-@":
        return None
    tld = text[text.rfind(".", start, end) + 1:end].lower()
    if tld in _FILE_TLDS:
        return None
    return start, end


def _ip(text: str, start: int, end: int) -> tuple[int, int] | None:
    candidate = text[start:end]
    if ":" in candidate:
        if candidate.endswith(":") and not candidate.endswith("::"):
            candidate, end = candidate[:-1], end - 1  # a colon after the address ("at 2606:4700::1111: ...")
        if candidate.count(":") < 2 or not any(ch.isdigit() for ch in candidate):
            return None
        if not _isolated(text, start, end, _ALNUM + ":"):
            return None
    else:
        if not _isolated(text, start, end, "0123456789."):
            return None
        if _VERSION_BEFORE.search(text[max(0, start - 20):start]):
            return None  # "version 1.2.3.4", "v2.0.0.1"
    try:
        address = ipaddress.ip_address(candidate)
    except ValueError:
        return None
    if not address.is_global or address.is_multicast:
        return None  # private, loopback, link-local, documentation, reserved: not personal
    return start, end


def _digits(s: str) -> str:
    return "".join(ch for ch in s if ch.isdigit())


def _luhn(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_network(number: str) -> bool:
    """Issuer prefixes of the major networks: Luhn alone passes one random number in ten."""
    n, p2, p4 = len(number), int(number[:2]), int(number[:4])
    if number[0] == "4":
        return n in (13, 16, 19)                                  # Visa
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16                                            # Mastercard
    if p2 in (34, 37):
        return n == 15                                            # American Express
    if number.startswith(("6011", "65")) or 644 <= int(number[:3]) <= 649:
        return 16 <= n <= 19                                      # Discover
    if 3528 <= p4 <= 3589:
        return 16 <= n <= 19                                      # JCB
    if p2 in (36, 38, 39) or 300 <= int(number[:3]) <= 305:
        return 14 <= n <= 19                                      # Diners
    if number.startswith("62"):
        return 16 <= n <= 19                                      # UnionPay
    return False


def _card(text: str, start: int, end: int) -> tuple[int, int] | None:
    if not _isolated(text, start, end, _ALNUM):
        return None
    raw = text[start:end]
    separators = {ch for ch in raw if not ch.isdigit()}
    if len(separators) > 1:
        return None  # "1234 5678-9012 3456" mixes separators: not how cards are written
    number = _digits(raw)
    if not 13 <= len(number) <= 19 or not _luhn(number) or not _card_network(number):
        return None
    return start, end


def _iban(text: str, start: int, end: int) -> tuple[int, int] | None:
    if start > 0 and text[start - 1].isalnum():
        return None
    raw = text[start:end]
    compact = raw.replace(" ", "")
    expected = _IBAN_LENGTHS.get(compact[:2])
    if expected is None:
        return None
    if len(compact) > expected:  # the pattern may have run into the next word: trim to the country length
        kept, count = 0, 0
        for i, ch in enumerate(raw):
            if ch != " ":
                count += 1
            if count == expected:
                kept = i + 1
                break
        raw, end, compact = raw[:kept], start + kept, compact[:expected]
    if len(compact) != expected or (end < len(text) and text[end].isalnum()):
        return None
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return (start, end) if int(number) % 97 == 1 else None


def _phone(text: str, start: int, end: int) -> tuple[int, int] | None:
    while end > start and not text[end - 1].isdigit():
        end -= 1
    if not _isolated(text, start, end, _ALNUM + "+") or (start > 0 and text[start - 1] in ".,/" and
                                                          start > 1 and text[start - 2].isdigit()):
        return None
    raw = text[start:end]
    digits = _digits(raw)
    if raw.startswith("+"):
        ok = 8 <= len(digits) <= 15                      # E.164: at most 15 digits
    elif raw[0] == "0":
        ok = 9 <= len(digits) <= 12 and _plausible_national(raw)
    else:  # NANP, optionally with the country code 1: area code and exchange start with 2-9
        nanp = digits[1:] if len(digits) == 11 and digits[0] == "1" else digits
        ok = len(nanp) == 10 and nanp[0] in "23456789" and nanp[3] in "23456789"
    if not ok or _NOT_PHONE_BEFORE.search(text[max(0, start - 16):start]):
        return None
    return start, end


def _plausible_national(raw: str) -> bool:
    """Numbers with a trunk 0 (030 1234567, 0221/123456, 01 23 45 67 89), not dates or ranges."""
    groups = re.split(r"[ /\-]", raw)
    if len(groups) == 3 and all(len(g) <= 4 for g in groups) and len(groups[-1]) == 4 and len(groups[0]) <= 2:
        return False  # 01-12-2020 / 05/06/2021: a date
    return True


_VALIDATORS: dict[str, Callable[[str, int, int], tuple[int, int] | None]] = {
    EMAIL: _email, IP: _ip, PHONE: _phone, CARD: _card, IBAN: _iban,
}


SPEC = StageSpec(
    name=PiiRemover.name, order=110, config=PiiConfig, build=PiiRemover,
    about="e-mail, IP, phone, card and IBAN numbers -> placeholders",
    reasons={DropReason.PII_BUDGET: "PII search ran past `pii.budget_s` for this document: ledgered, "
                                    "not published unredacted"})
