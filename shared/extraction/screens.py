"""Unanchored searches that skip texts which cannot hold a match.

`Screened(whole, start, words).found(text)` answers `whole.search(text) is not None`. A
match of `whole` is either at the start of the text (its `^` alternatives, given again as
`start`) or somewhere inside, and every inside alternative needs a Han character or one of
`words`. A text without them is answered by `start` alone, without a scan over it: the
searches the rules extractor makes on every sentence and clause then cost next to nothing
on text with nothing to find (tests/shared/test_hostile_text.py checks the equivalence).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["Screened", "fold"]

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def fold(text: str) -> str:
    """What `re.IGNORECASE` compares ASCII letters by: the casefold, except that it also
    matches the dotless ı to "i" (a test checks this over all of Unicode)."""
    return text.casefold().replace("\u0131", "i")


class Screened:
    def __init__(self, whole: re.Pattern[str], start: re.Pattern[str], words: Sequence[str]):
        self._whole = whole
        self._start = start
        self._words = tuple(words)

    def found(self, text: str) -> bool:
        if self._start.match(text) is not None:
            return True
        if _HAN.search(text) is None:
            folded = fold(text)
            if not any(word in folded for word in self._words):
                return False
        return self._whole.search(text) is not None
