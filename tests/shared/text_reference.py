"""Redaction as it was before its passes were made linear: the reference the property test
compares with on short inputs (it is slow on long hostile ones: the card finder is cubic).
Nothing outside tests uses it."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

PLACEHOLDERS = ("[EMAIL]", "[PHONE]", "[ID_NUMBER]", "[CARD]", "[API_KEY]", "[TOKEN]",
                "[PASSWORD]")

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")

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
    r"\s*(?:is|是|为|[:：=])?\s*)([^\s,，。;；]{6,})"
)
_TOKEN = re.compile(
    r"(?:(?<=Bearer )|(?<=bearer ))[A-Za-z0-9._~+/\-]{8,}=*"
    r"|eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}"
    r"|(?<![A-Za-z0-9])(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Fa-f0-9]{32,}(?![A-Za-z0-9])"
)
_NAMED_TOKEN = re.compile(
    r"(?i)((?:access[_\- ]?token|auth[_\- ]?token|refresh[_\- ]?token|token|令牌)"
    r"\s*(?:is|是|为|[:：=])\s*)([^\s,，。;；]{6,})"
)
_PASSWORD = re.compile(
    r"(?i)((?:password|passwd|passcode|pwd|密码|口令)\s*(?:is|是|为|[:：=])?\s*)"
    r"([^\s，。；！？、]+?)(?=[.,;!?]*(?:\s|$)|[，。；！？、])"
)
# Mainland resident ID: region, birth date, sequence, check character.
_ID_NUMBER = re.compile(
    r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
    r"\d{3}[0-9Xx](?![0-9A-Za-z])"
)
# Any run of digit groups; `_card` looks inside it for a Luhn-valid card.
_CARD = re.compile(r"(?<![\d\-+])\d+(?:[ \-]\d+)*(?!\d)")  # "+…" is a phone number
_PHONE = re.compile(
    r"(?<![\d+])(?:"
    r"\+\d{1,3}[ \-]?(?:\(\d{1,4}\)[ \-]?)?\d{1,4}(?:[ \-]?\d{2,4}){1,4}"  # +44 20 …
    r"|(?:\(?86\)?[ \-]?)?1[3-9]\d[ \-]?\d{4}[ \-]?\d{4}"  # 138 0013 8000
    r"|0\d{2,3}-\d{7,8}"  # 010-12345678
    r"|\(\d{3}\)[ \-]?\d{3}-\d{4}|\d{3}-\d{3}-\d{4}"  # (415) 555-2671
    r")(?!\d)"
)


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    """The longest Luhn-valid run of digit groups: a match can start in a neighbouring number
    ("order 000000000000 4111 1111 1111 1111")."""
    text = match.group(0)
    groups = [(g.start(), g.end(), g.group(0)) for g in re.finditer(r"\d+", text)]
    out: list[str] = []
    pos = i = 0
    while i < len(groups):
        for j in range(len(groups), i, -1):
            window = groups[i:j]
            digits = "".join(g[2] for g in window)
            # Cards are written in groups of 3+ digits; "1 2 3 …" is a list of numbers.
            grouped = len(window) == 1 or all(len(g[2]) >= 3 for g in window)
            if grouped and 13 <= len(digits) <= 19 and luhn_ok(digits):
                out.append(text[pos:groups[i][0]] + "[CARD]")
                pos, i = groups[j - 1][1], j
                break
        else:
            i += 1
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
    pattern: re.Pattern[str]
    replace: str | Callable[[re.Match[str]], str]


# Order matters: keys and tokens hold digit runs a phone or card pattern would half-match,
# and an ID number would pass for a card.
_RULES = (
    _Rule("EMAIL", _EMAIL, "[EMAIL]"),
    _Rule("API_KEY", _API_KEY, "[API_KEY]"),
    _Rule("API_KEY", _NAMED_KEY, _named("[API_KEY]")),
    _Rule("TOKEN", _TOKEN, "[TOKEN]"),
    _Rule("TOKEN", _NAMED_TOKEN, _named("[TOKEN]")),
    _Rule("PASSWORD", _PASSWORD, _named("[PASSWORD]")),
    _Rule("ID_NUMBER", _ID_NUMBER, "[ID_NUMBER]"),
    _Rule("CARD", _CARD, _card),
    _Rule("PHONE", _PHONE, _phone),
)


def redact(text: str) -> str:
    """The text with every secret and identifier replaced by its placeholder."""
    for rule in _RULES:
        text = rule.pattern.sub(rule.replace, text)
    return text


def found_secrets(text: str) -> list[str]:
    """Kinds of secret still present: what a validated memory must not contain."""
    return sorted({rule.kind for rule in _RULES if rule.pattern.sub(rule.replace, text) != text})
