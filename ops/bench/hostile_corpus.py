"""Hostile text: messages shaped to make a per-text pass (redaction, the rules extractor,
keyword tokenization, the query reader) do more than linear work, each filled to a size.

`ops/bench/hostile.py` times every pass over these messages; the "hostile-tenant" chaos
scenario (`ops/chaos/hostile.py`) sends them through the API; tests/shared/ checks the
passes over the same shapes. Each entry is a repeated unit after an optional prefix: runs
of digit groups (the card finder), a secret's keyword before a long run of what could be
its value (the named-key and password patterns), runs of one separator, CJK punctuation
and mixed scripts (tokenization), many short sentences and one long one (the rules).
"""

from __future__ import annotations

# name → (prefix, unit repeated after it). A card that passes Luhn ("4111 1111 1111 1111")
# makes every window of the digit-group run a candidate worth checking.
SHAPES: dict[str, tuple[str, str]] = {
    "digit-groups": ("", "1234 "),
    "digit-groups-dash": ("", "1234-"),
    "single-digits": ("", "1 "),
    "digits": ("", "1"),
    "cards": ("", "4111 1111 1111 1111 "),
    "phone-ish": ("", "+1 "),
    "password-dots": ("password:", "."),
    "password-spaces": ("password", " "),
    "password-marks": ("password is ", "a.!"),
    "apikey-spaces": ("apikey", " "),
    "token-spaces": ("token", " "),
    "keyword-chain": ("", "apikey:token:password:"),
    "bearer": ("", "Bearer "),
    "jwt-ish": ("", "eyJabcd."),
    "hex": ("", "a1"),
    "dots": ("", "."),
    "ats": ("", "@"),
    "dashes": ("", "-"),
    "spaces": ("x", " "),  # a message of whitespace alone is refused (422)
    "newlines": ("x", "\n"),
    "letters": ("", "a"),
    "letters-dot": ("", "a."),
    "letters-at": ("", "a@"),
    "letters-dash": ("", "a-"),
    "email-ish": ("", "a@b."),
    "local-part": ("", "a.b_c%d+e-"),
    "domain-labels": ("x@", "ab1."),
    "cjk-punctuation": ("", "。，、；！？"),
    # The embedder: a token a character with no space ("a/a/a/…", the query), six
    # tokens a character (㎯ is six code points to the tokenizer), and U+FDFA, which the
    # tokenizer expands to 18 code points from 3 bytes (its buffer holds 4 a byte).
    "slashes": ("", "a/"),
    "expanding": ("", "\u33af"),
    "overrun": ("", "\ufdfa"),
    "cjk": ("", "我喜欢吃辣的川菜，周末常去成都。"),
    "cjk-one-char": ("", "我"),
    "mixed-scripts": ("", "我like привет ١٢٣ 東京ｶﾀｶﾅ "),
    "short-sentences": ("", "i a;"),
    "short-lines": ("", "my x\n"),
    "labels": ("", "a:\n"),
    "long-sentence": ("", "i like it and my "),
    "i-words": ("", "i "),
    "remember": ("remember ", "that "),
    "apostrophes": ("", "i'm’ "),
    # Sentences and clauses that differ, so no cache of what was already read helps; "{n}"
    # is the unit's number.
    "numbered-sentences": ("", "i a{n};"),
    "numbered-lines": ("", "我{n}\n"),
    "numbered-clauses": ("", "my x{n}, "),
    "long-sentences": ("", "i'm " + "going to like it and my {n} " * 40 + "tomorrow. "),
    "long-clauses": ("", "please " + "always be x{n}, " * 60 + "remember. "),
}


def fill(prefix: str, unit: str, max_bytes: int) -> str:
    """`prefix` then `unit` repeated, cut to at most `max_bytes` of UTF-8 (whole characters)."""
    room = max_bytes - len(prefix.encode("utf-8"))
    if room <= 0:
        return prefix.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
    parts: list[str] = []
    size = n = 0
    while size < room:
        piece = unit.replace("{n}", _number(n)) if "{n}" in unit else unit
        parts.append(piece)
        size += len(piece.encode("utf-8"))
        n += 1
    body = "".join(parts).encode("utf-8")[:room].decode("utf-8", errors="ignore")
    return prefix + body


def _number(n: int) -> str:
    """`n` in letters ("a", "b", … "ba"): a word, where digits would be a number to redact."""
    digits = ""
    while True:
        n, r = divmod(n, 26)
        digits = "abcdefghijklmnopqrstuvwxyz"[r] + digits
        if n == 0:
            return digits


def hostile_corpus(max_bytes: int) -> dict[str, str]:
    """Every shape, each one message of at most `max_bytes` bytes of UTF-8."""
    return {name: fill(prefix, unit, max_bytes) for name, (prefix, unit) in SHAPES.items()}
