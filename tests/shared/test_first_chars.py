"""`AnyOf` answers as the plain alternation of its patterns would, whatever the text, also
after its (first, last) character table has filled up."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.extraction import first_chars
from memoryd.extraction import rules_patterns as p
from memoryd.extraction.first_chars import AnyOf

_PATTERNS = (*p.EXPLICIT, *(rule.pattern for rule in p.RULES))
_ALL = re.compile("|".join(f"(?:{re.sub(r'[(][?]P<[a-z_]+>', '(?:', x.pattern)})"
                           for x in _PATTERNS), re.IGNORECASE)
_SEEDS = ["i live in Berlin", "my name is Ana", "我叫李雷", "我对花生过敏", "remember that x",
          "always answer in English", "i'm allergic to nuts\n", "", "x", "我"]
_TEXTS = st.one_of(st.sampled_from(_SEEDS),
                   st.builds(lambda a, b: a + b, st.sampled_from(_SEEDS), st.text(max_size=12)),
                   st.text(max_size=30))


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_the_table_answers_as_the_whole_alternation(text: str) -> None:
    assert p.ANY_MATCH.match(text) == (_ALL.match(text) is not None)


def test_a_full_table_still_answers_every_text() -> None:
    any_of = AnyOf(_PATTERNS, re.IGNORECASE)
    # Fill the table with pairs no ordinary text has, then ask texts it has not seen.
    for code in range(first_chars._MAX_END_PAIRS + 10):
        any_of.match(chr(0x4E00 + code % 20000) + "x" + chr(0x3400 + code // 20000))
    assert len(any_of._by_ends) == first_chars._MAX_END_PAIRS
    for text in _SEEDS:
        assert any_of.match(text) == (_ALL.match(text) is not None)


def test_the_seeds_hold_both_answers() -> None:
    answers = {p.ANY_MATCH.match(text) for text in _SEEDS}
    assert answers == {True, False}
