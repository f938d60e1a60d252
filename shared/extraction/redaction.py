"""Secrets and personal identifiers → typed placeholders, before any text leaves the process
(an LLM call) or is stored, in every extraction mode.

Each kind is one pattern; card numbers must also pass the Luhn check, so order numbers and
timestamps survive. Placeholders contain no digit or `@`, so redacting twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

PLACEHOLDERS = ("[EMAIL]", "[PHONE]", "[ID_NUMBER]", "[CARD]", "[API_KEY]", "[TOKEN]",
                "[PASSWORD]")

# An address is a local part, `@`, then this domain. The local part is found by scanning back
# from each `@` (see `_emails`): a pattern starting with the local part would rescan the same
# run of letters from every position in it, quadratic in its length.
_EMAIL_DOMAIN = re.compile(r"[A-Za-z0-9\-]++(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_EMAIL_LOCAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")

# Vendor key shapes first (OpenAI, AWS, GitHub, Slack, Google, Anthropic-style), then a key
# named as such: "api_key=…", "secret: …".
_API_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r")"
)
_NAMED_KEY = re.compile(
    r"(?i)((?:api[_\- ]?key|secret[_\- ]?key|access[_\- ]?key|client[_\- ]?secret|密钥)"
    r"\s*+(?:is|是|为|[:：=])?\s*+)([^\s,，。;；]{6,})"
)
_TOKEN = re.compile(
    r"(?:(?<=Bearer )|(?<=bearer ))[A-Za-z0-9._~+/\-]{8,}=*"
    r"|eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}"
    r"|(?<![A-Za-z0-9])(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Fa-f0-9]{32,}(?![A-Za-z0-9])"
)
_NAMED_TOKEN = re.compile(
    r"(?i)((?:access[_\- ]?token|auth[_\- ]?token|refresh[_\- ]?token|token|令牌)"
    r"\s*+(?:is|是|为|[:：=])\s*+)([^\s,，。;；]{6,})"
)
# The value is the run of characters after the keyword, without the sentence punctuation that
# ends it (`.,;!?` before a space or the end of the text): the shortest prefix of the run
# after which only such punctuation is left. Written as three alternatives, each scanning the
# run once, since a lazy value with that lookahead rescans the tail at every character.
_PASSWORD = re.compile(
    r"(?i)((?:password|passwd|passcode|pwd|密码|口令)\s*+(?:is|是|为|[:：=])?\s*+)("
    r"(?>(?:[.,;!?]*+[^\s，。；！？、.,;!?])+)(?=[.,;!?]*+(?:\s|$))"  # up to its last non-.,;!?
    r"|(?>[^\s，。；！？、]+)(?=[，。；！？、])"  # all of a run that ends at CJK punctuation
    r"|[.,;!?](?=[.,;!?]*+(?:\s|$))"  # a run of punctuation alone: its first character
    r")"
)
# Mainland resident ID: region, birth date, sequence, check character.
_ID_NUMBER = re.compile(
    r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
    r"\d{3}[0-9Xx](?![0-9A-Za-z])"
)
# Any run of digit groups; `_card` looks inside it for a Luhn-valid card.
# A run with fewer than 13 digits holds no card: the lookahead skips it (and every later start
# inside it, which has fewer digits still) without calling `_card`.
_CARD = re.compile(r"(?<![\d\-+])(?=(?:\d[ \-]?){13})\d+(?:[ \-]\d+)*(?!\d)")  # "+…": a phone
_PHONE = re.compile(
    r"(?<![\d+])(?:"
    r"\+\d{1,3}[ \-]?(?:\(\d{1,4}\)[ \-]?)?\d{1,4}(?:[ \-]?\d{2,4}){1,4}"  # +44 20 …
    r"|(?:\(?86\)?[ \-]?)?1[3-9]\d[ \-]?\d{4}[ \-]?\d{4}"  # 138 0013 8000
    r"|0\d{2,3}-\d{7,8}"  # 010-12345678
    r"|\(\d{3}\)[ \-]?\d{3}-\d{4}|\d{3}-\d{3}-\d{4}"  # (415) 555-2671
    r")(?!\d)"
)


_DIGITS = re.compile(r"\d+")
_CARD_MIN_DIGITS = 13
_CARD_MAX_DIGITS = 19


_LUHN_DOUBLED = {str(d): d * 2 - 9 if d > 4 else d * 2 for d in range(10)}


def luhn_ok(digits: str) -> bool:
    total = sum(map(int, digits[::-2])) + sum(_LUHN_DOUBLED[ch] for ch in digits[-2::-2])
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    """The longest Luhn-valid run of digit groups: a match can start in a neighbouring number
    ("order 000000000000 4111 1111 1111 1111").

    A card has at most 19 digits, and a window of several groups only holds groups of 3+
    digits: at most 6 windows start at each group, so the work is linear in the run's length.
    """
    text = match.group(0)
    spans = [g.span() for g in _DIGITS.finditer(text)]
    sizes = [e - s for s, e in spans]
    offsets = [0, *accumulate(sizes)]  # group k's digits are digits[offsets[k]:offsets[k + 1]]
    luhn: _LuhnSums | None = None  # built at the first window worth checking
    # Cards are written in groups of 3+ digits; "1 2 3 …" is a list of numbers. A window of
    # several groups must lie within a stretch of such groups: long_end[i] is where the
    # stretch holding group i ends.
    long_end = [len(spans)] * (len(spans) + 1)
    for k in range(len(spans) - 1, -1, -1):
        long_end[k] = long_end[k + 1] if sizes[k] >= 3 else k
    out: list[str] = []
    pos = i = 0
    while i < len(spans):
        # Ends of the windows starting at group i that hold a card's number of digits.
        ends: list[int] = []
        if sizes[i] < 3:  # a group of 1–2 digits is a window on its own, too short for a card
            i += 1
            continue
        for j in range(i + 1, long_end[i] + 1):
            total = offsets[j] - offsets[i]
            if total > _CARD_MAX_DIGITS:
                break
            if total >= _CARD_MIN_DIGITS:
                ends.append(j)
        if ends and luhn is None:
            luhn = _LuhnSums("".join(text[a:b] for a, b in spans))
        for j in reversed(ends):  # longest first
            if luhn is not None and luhn.ok(offsets[i], offsets[j]):
                out.append(text[pos:spans[i][0]] + "[CARD]")
                pos, i = spans[j - 1][1], j
                break
        else:
            i += 1
    out.append(text[pos:])
    return "".join(out)


class _LuhnSums:
    """The Luhn check of any slice of one digit string in constant time, from prefix sums.

    A doubled digit d counts 2d - 9 when d > 4, i.e. d + (d - 9·[d > 4]) : the checksum of
    digits[a:e] is the sum of its digits plus, over the positions doubled (those whose
    parity differs from the last digit's), the sum of d - 9·[d > 4].
    """

    def __init__(self, digits: str) -> None:
        values = list(map(int, digits))
        extra = [v - 9 if v > 4 else v for v in values]
        even, odd = extra[:], extra[:]
        even[1::2] = [0] * len(even[1::2])
        odd[0::2] = [0] * len(odd[0::2])
        self._all = [0, *accumulate(values)]
        self._extra = ([0, *accumulate(even)], [0, *accumulate(odd)])

    def ok(self, start: int, end: int) -> bool:
        doubled = self._extra[end % 2]  # parity of end - 2, the digit before the last
        total = self._all[end] - self._all[start] + doubled[end] - doubled[start]
        return total % 10 == 0


def _emails(text: str) -> str:
    """Every address replaced, as `re.sub` would with the pattern local-part `@` domain.

    A match is leftmost, and its local part is the whole run of local-part characters before
    the `@` (none of them is `@`), cut at the end of the previous match. Each `@` is looked at
    once and each character scanned back over at most once.
    """
    out: list[str] = []
    pos = 0  # end of the previous match: the next one starts at or after it
    at = text.find("@")
    while at != -1:
        start = at
        while start > pos and text[start - 1] in _EMAIL_LOCAL:
            start -= 1
        domain = _EMAIL_DOMAIN.match(text, at + 1) if start < at else None
        if domain is not None:
            out.append(text[pos:start] + "[EMAIL]")
            pos = domain.end()
            at = text.find("@", pos)
        else:
            at = text.find("@", at + 1)
    out.append(text[pos:])
    return "".join(out)


def _phone(match: re.Match[str]) -> str:
    text = match.group(0)
    # Too many digits: the match ran into a neighbouring number. Try it shorter, then
    # starting later.
    ends = [g.end() for g in re.finditer(r"\d+", text)]
    for end in reversed(ends):
        if 7 <= len(re.sub(r"\D", "", text[:end])) <= 15:
            return "[PHONE]" + text[end:]
    return text[0] + _PHONE.sub(_phone, text[1:])


def _named(placeholder: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        value = match.group(2)
        if any(p in value for p in PLACEHOLDERS):
            return match.group(0)  # already redacted (by this or another kind)
        return match.group(1) + placeholder

    return replace


@dataclass(frozen=True)
class _Rule:
    kind: str
    apply: Callable[[str], str]  # the text with this kind's placeholders in
    # Whether the rule can find anything in a text: a cheap necessary condition (a word every
    # match holds), so most texts skip most patterns.
    may_match: Callable[[str], bool]


def _sub(pattern: re.Pattern[str],
         replace: str | Callable[[re.Match[str]], str]) -> Callable[[str], str]:
    def apply(text: str) -> str:
        return pattern.sub(replace, text)

    return apply


def _holds(*words: str, folded: bool = False) -> Callable[[str], bool]:
    """True when the text (or, with `folded`, its casefold) contains one of `words`.

    Case-insensitive patterns are checked on the casefold: every character that `re`'s
    IGNORECASE matches to an ASCII letter folds to that letter (the Kelvin sign to "k", the
    long s to "s"), which tests/shared/test_hostile_text.py checks over all of Unicode.
    """

    def may_match(text: str) -> bool:
        haystack = text.casefold() if folded else text
        return any(word in haystack for word in words)

    return may_match


_DIGIT = re.compile(r"\d")
_HEX_RUN = re.compile(r"[A-Fa-f0-9]{32}")


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


def _may_be_token(text: str) -> bool:
    return "earer " in text or "eyJ" in text or _HEX_RUN.search(text) is not None


# Order matters: keys and tokens hold digit runs a phone or card pattern would half-match,
# and an ID number would pass for a card.
_RULES = (
    _Rule("EMAIL", _emails, _holds("@")),
    _Rule("API_KEY", _sub(_API_KEY, "[API_KEY]"), _holds("sk-", "AKIA", "gh", "xox", "AIza")),
    _Rule("API_KEY", _sub(_NAMED_KEY, _named("[API_KEY]")),
          _holds("key", "secret", "密钥", folded=True)),
    _Rule("TOKEN", _sub(_TOKEN, "[TOKEN]"), _may_be_token),
    _Rule("TOKEN", _sub(_NAMED_TOKEN, _named("[TOKEN]")), _holds("token", "令牌", folded=True)),
    _Rule("PASSWORD", _sub(_PASSWORD, _named("[PASSWORD]")),
          _holds("pass", "pwd", "密码", "口令", folded=True)),
    _Rule("ID_NUMBER", _sub(_ID_NUMBER, "[ID_NUMBER]"), _has_digit),
    _Rule("CARD", _sub(_CARD, _card), _has_digit),
    _Rule("PHONE", _sub(_PHONE, _phone), _has_digit),
)


def _apply(rule: _Rule, text: str) -> str:
    return rule.apply(text) if rule.may_match(text) else text


def redact(text: str) -> str:
    """The text with every secret and identifier replaced by its placeholder.

    Every rule's work is linear in the length of the text (tests/shared/test_hostile_text.py,
    `python -m ops.bench.hostile`): a message a client crafted cannot hold a worker.
    """
    for rule in _RULES:
        text = _apply(rule, text)
    return text


def found_secrets(text: str) -> list[str]:
    """Kinds of secret still present: what a validated memory must not contain."""
    return sorted({rule.kind for rule in _RULES if _apply(rule, text) != text})
