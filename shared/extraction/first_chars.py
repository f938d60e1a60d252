"""Which of a set of start-anchored patterns can match a text, chosen by its first character.

`AnyOf(patterns).match(text)` is true exactly when one of `patterns` matches at the start of
`text`. One alternation of every pattern tries each alternative in turn, so its cost grows
with the table; here the alternation holds only the patterns whose first character can be
`text[0]` (read from the parsed pattern), plus those whose first character is unknown
(`.+`, `\\S`, a pattern that may match nothing). A character this module cannot reason about
safely under case-insensitive matching uses the full alternation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

# The parser's node kinds are not public API; this module only reads them, and falls back to
# "unknown" (the full alternation) for any node it does not handle.
from re import _constants as _sre  # type: ignore[attr-defined]
from re import _parser as _parse  # type: ignore[attr-defined]

__all__ = ["AnyOf", "first_chars", "last_chars", "may_start"]

_UNKNOWN = None
_RANGE_LIMIT = 64  # a wider class ([a-z], [^…]) is treated as unknown


def first_chars(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """The characters a match of `pattern` can start with, as written in the pattern (case
    variants are the caller's concern), or None when unknown or when it may match nothing."""
    chars, nullable = _seq(_parse.parse(pattern.pattern, pattern.flags))
    if chars is None or nullable:
        return None
    return frozenset(chars)


def last_chars(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """For a pattern anchored at the end (`$`): the characters its match can end with, as
    written in the pattern; None when it is not anchored there, or unknown."""
    items = list(_parse.parse(pattern.pattern, pattern.flags))
    while items and items[-1][0] in (_sre.ASSERT, _sre.ASSERT_NOT):
        items.pop()
    if not items or items[-1] != (_sre.AT, _sre.AT_END):
        return None
    chars, nullable = _seq(reversed(items[:-1]), backwards=True)
    if chars is None or nullable:
        return None
    return frozenset(chars)


def may_start(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    """A cheap test that `pattern.match(text)` may succeed, from `text`'s first character:
    False only when no match can start there."""
    chars = first_chars(pattern)
    ignore_case = bool(pattern.flags & re.IGNORECASE)
    keys = None if chars is None else {_safe_key(ch, ignore_case) for ch in chars}
    if keys is None or None in keys:
        return lambda _text: True

    def test(text: str) -> bool:
        if not text:
            return True
        key = _safe_key(text[0], ignore_case)
        return key is None or key in keys

    return test


def _seq(
    items: Iterable[tuple[object, object]], backwards: bool = False
) -> tuple[set[str] | None, bool]:
    """The characters the sequence `items` can start with (or, `backwards`, end with: the
    items are then given last first), and whether it can match nothing."""
    found: set[str] = set()
    for op, av in items:
        chars, nullable = _node(op, av, backwards)
        if chars is None:
            return None, True
        found |= chars
        if not nullable:
            return found, False
    return found, True


def _node(op: object, av: object, backwards: bool) -> tuple[set[str] | None, bool]:  # noqa: PLR0911
    if op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):
        return set(), True  # consumes nothing; ignoring a lookahead only widens the set
    if op is _sre.LITERAL:
        assert isinstance(av, int)
        return {chr(av)}, False
    if op is _sre.IN:
        assert isinstance(av, list)
        return _charset(av), False
    if op is _sre.BRANCH:
        assert isinstance(av, tuple)
        found: set[str] = set()
        nullable = False
        for branch in av[1]:
            chars, empty = _seq(_ordered(branch, backwards), backwards)
            if chars is None:
                return None, True
            found |= chars
            nullable = nullable or empty
        return found, nullable
    if op is _sre.SUBPATTERN:
        assert isinstance(av, tuple)
        return _seq(_ordered(av[-1], backwards), backwards)
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
        assert isinstance(av, tuple)
        low, _high, body = av
        chars, nullable = _seq(_ordered(body, backwards), backwards)
        return chars, nullable or low == 0
    return _UNKNOWN, True


def _ordered(
    items: Iterable[tuple[object, object]], backwards: bool
) -> Iterable[tuple[object, object]]:
    return reversed(list(items)) if backwards else items


def _charset(items: list[tuple[object, object]]) -> set[str] | None:
    found: set[str] = set()
    for op, av in items:
        if op is _sre.LITERAL:
            assert isinstance(av, int)
            found.add(chr(av))
        elif op is _sre.RANGE:
            assert isinstance(av, tuple)
            low, high = av
            if high - low > _RANGE_LIMIT:
                return None
            found.update(chr(code) for code in range(low, high + 1))
        else:
            return None  # NEGATE, CATEGORY (\d, \w, …)
    return found


def _uncased(ch: str) -> bool:
    return ch.lower() == ch and ch.upper() == ch and ch.casefold() == ch


@lru_cache(maxsize=8192)  # one character's answer never changes; texts repeat characters
def _safe_key(ch: str, ignore_case: bool) -> str | None:
    """The dispatch key of a first character, or None when only the full alternation is safe.

    ASCII letters fold to lower case. Under case-insensitive matching some non-ASCII letters
    match ASCII ones (the Kelvin sign matches "k", the long s "s"), so a non-ASCII character
    is keyed only when it has no case at all (CJK ideographs, most punctuation).
    """
    if ch.isascii():
        return ch.lower() if ignore_case else ch
    if not ignore_case or _uncased(ch):
        return ch
    return None


# (first, last) character pairs remembered per AnyOf: the pairs of ordinary text are a few
# thousand; hostile text of arbitrary characters cannot grow the table past this.
_MAX_END_PAIRS = 16384


class AnyOf:
    """`match(text)`: whether any pattern matches at the start of `text`, as one alternation
    of all of them would tell, scanning only the alternatives that can start there and, of
    those anchored at the end, only the ones that can end with `text`'s last character."""

    def __init__(self, patterns: Sequence[re.Pattern[str]], flags: int = 0) -> None:
        self._patterns = tuple(patterns)
        self._flags = flags
        ignore_case = bool(flags & re.IGNORECASE)
        self._ignore_case = ignore_case
        self._always: list[int] = []
        self._by_key: dict[str, list[int]] = {}
        for index, pattern in enumerate(self._patterns):
            chars = first_chars(pattern)
            keys = None if chars is None else {_safe_key(ch, ignore_case) for ch in chars}
            if keys is None or None in keys:
                self._always.append(index)
                continue
            for key in keys:
                assert key is not None
                self._by_key.setdefault(key, []).append(index)
        # Of the patterns that can start anywhere, those that can end with a given character
        # (the ones not anchored at the end can end with any).
        ends: dict[int, set[str] | None] = {}
        for index in self._always:
            chars = last_chars(self._patterns[index])
            keys = None if chars is None else {_safe_key(ch, ignore_case) for ch in chars}
            ends[index] = None if keys is None or None in keys else {str(k) for k in keys}
        self._always_any_end = tuple(i for i in self._always if ends[i] is None)
        self._always_by_end: dict[str, tuple[int, ...]] = {}
        for key in {k for chars in ends.values() if chars is not None for k in chars}:
            self._always_by_end[key] = tuple(
                i for i in self._always if ends[i] is None or key in (ends[i] or ()))
        self._all = self._compile(range(len(self._patterns)))
        # Compiled on first use: as many as (first key, end subset) pairs that occur, which
        # the tables bound (a few hundred at most).
        self._compiled: dict[tuple[str, tuple[int, ...]], re.Pattern[str]] = {}
        self._by_ends: dict[tuple[str, str], re.Pattern[str]] = {}

    def match(self, text: str) -> bool:
        if not text:
            return self._all.match(text) is not None
        # The pattern depends only on the text's first and last characters: looked up by
        # them, one dict access a sentence. Bounded: past the bound the pair is worked out.
        ends = (text[0], text[-1])
        known = self._by_ends.get(ends)
        if known is None:
            known = self._pattern_for(text)
            if len(self._by_ends) < _MAX_END_PAIRS:
                self._by_ends[ends] = known
        return known.match(text) is not None

    def _pattern_for(self, text: str) -> re.Pattern[str]:
        first = _safe_key(text[0], self._ignore_case)
        if first is None:
            return self._all
        # `$` also matches before a final newline: such a text keeps every pattern.
        last = None if text.endswith("\n") else _safe_key(text[-1], self._ignore_case)
        if last is None:
            always = tuple(self._always)
        else:
            always = self._always_by_end.get(last, self._always_any_end)
        # A character no pattern starts with shares one entry (""): the cache holds at most
        # one pattern per (key some pattern starts with, end subset), whatever the text.
        key = (first if first in self._by_key else "", always)
        pattern = self._compiled.get(key)
        if pattern is None:
            indices = sorted({*always, *self._by_key.get(key[0], ())})
            pattern = self._compiled[key] = self._compile(indices)
        return pattern

    def _compile(self, indices: Iterable[int]) -> re.Pattern[str]:
        return _alternation([self._patterns[i].pattern for i in indices], self._flags)


def _alternation(bodies: Sequence[str], flags: int) -> re.Pattern[str]:
    """One pattern matching where any of `bodies` does; named groups become plain groups (a
    name may repeat across bodies)."""
    if not bodies:
        return re.compile(r"(?!)")
    plain = [re.sub(r"\(\?P<\w+>", "(?:", body) for body in bodies]
    return re.compile("|".join(f"(?:{body})" for body in plain), flags)
