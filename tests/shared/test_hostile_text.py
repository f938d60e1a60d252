"""Every per-text pass does linear work: hostile text at the maximum message size costs at
most a constant factor more than a quarter of it, and short inputs give the results of the
earlier (slow but straightforward) implementation.

The linearity check compares CPU time on a text and on its first quarter: linear work gives
a ratio near 4, quadratic 16, cubic 64; the bound is 10 (with a 1 ms floor on the quarter,
so timer noise on tiny times cannot fail it). It states how the work grows, not how fast a
host is: `python -m ops.bench.hostile` measures the time itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import text_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.extraction import redaction
from memoryd.extraction import rules_patterns as p
from memoryd.extraction.redaction import found_secrets, redact
from memoryd.extraction.rules import extract_rules
from memoryd.extraction.screens import fold
from memoryd.extraction.topics import topic_reading
from memoryd.platform.settings import Settings
from memoryd.retrieval.keywords import keyword_vector
from ops.bench import hostile as bench_hostile
from ops.bench.hostile_corpus import fill, hostile_corpus

MAX_BYTES = Settings().max_message_bytes
RATIO = 10.0
FLOOR_MS = 1.0


# The passes and the CPU clock of `ops/bench/hostile.py`: the test checks what it measures.
PASSES = bench_hostile.PASSES
_cpu_ms = bench_hostile.cpu_ms


def _superlinear(run: Callable[[str], object], text: str) -> str | None:
    """None when `run`'s work on `text` grows linearly; else what was measured."""
    quarter = text[: len(text) // 4]
    full_ms, quarter_ms = _cpu_ms(run, text, 3), _cpu_ms(run, quarter, 3)
    if full_ms <= RATIO * max(quarter_ms, FLOOR_MS):
        return None
    # Measured once more before failing: another process on the host can take a time slice.
    full_ms = min(full_ms, _cpu_ms(run, text, 3))
    if full_ms <= RATIO * max(quarter_ms, FLOOR_MS):
        return None
    return f"{full_ms:.1f} ms for {len(text)} chars, {quarter_ms:.1f} ms for {len(quarter)}"


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    keyword_vector("我喜欢吃辣")  # the segmenter loads its dictionary on the first Chinese text


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_is_linear_on_the_hostile_corpus(name: str) -> None:
    run = PASSES[name]
    slow = {shape: found for shape, text in hostile_corpus(MAX_BYTES).items()
            if (found := _superlinear(run, text)) is not None}
    assert not slow, f"{name} grows faster than linearly on {slow}"


def test_a_facts_topics_are_read_in_linear_time() -> None:
    slow = {shape: found for shape, text in hostile_corpus(MAX_BYTES).items()
            if (found := _superlinear(topic_reading, text)) is not None}
    assert not slow, f"topic_reading grows faster than linearly on {slow}"


# ---- generated hostile text --------------------------------------------------------------

_HOSTILE_PIECES = [
    "1234 ", "1234-", "4111 1111 1111 1111", "1 ", "12", "+1 ", "-", "--", ".", "..", "@",
    "a@", "@b.", "a.b", " ", "  ", "\n", "\t", "。", "，", "、", "；", "！", "？", "：", "“",
    "我", "喜欢", "东京", "ｶﾀｶﾅ", "привет", "١٢٣", "é", "password", "pwd:", "密码是", "apikey",
    "api_key=", "secret key", "token:", "令牌为", "Bearer ", "sk-", "eyJ", "AKIA", "ghp_",
    "a1", "ff", "i ", "my ", "remember ", "always ", "i like ", ", ", "and ", "!", "?", ";",
    "'", "’", "<a>:", "Bart: ", "\"",
]
hostile_piece = st.sampled_from(_HOSTILE_PIECES)
hostile_unit = st.lists(hostile_piece, min_size=1, max_size=6).map("".join)
short_hostile = st.lists(hostile_piece, max_size=16).map("".join)

# Real secrets and identifiers among the hostile pieces, so the comparison is not only
# between two "nothing found" answers.
_SECRETS = [
    "li.wei+work@example.com.cn", "a@b.io", "x_y@host-1.co.uk", "13800138000",
    "+44 20 7946 0958", "(415) 555-2671", "010-62345678", "11010519491231002X",
    "4111 1111 1111 1111", "4111111111111111", "5500-0000-0000-0004",
    "sk-abcdefghijklmnopqrstuvwx1234", "AKIAIOSFODNN7EXAMPLE", "api_key=Zx81kLmn0pq",
    "Bearer abc.def-123456789", "eyJhbGciOi.eyJzdWIiOiIx.SflKxwRJSM",
    "password is hunter2.", "密码：Qw!9x", "token: abcdef123", "pwd: x",
    "0123456789abcdef0123456789abcdef",
]
short_mixed = st.lists(st.one_of(hostile_piece, st.sampled_from(_SECRETS)),
                       max_size=12).map("".join)

REFERENCE = settings(max_examples=400, derandomize=True, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow])
AT_MAX_SIZE = settings(max_examples=12, derandomize=True, deadline=None, database=None,
                       suppress_health_check=[HealthCheck.too_slow])


@REFERENCE
@given(st.one_of(short_hostile, short_mixed))
def test_redaction_matches_the_reference_on_short_text(text: str) -> None:
    assert redact(text) == text_reference.redact(text)
    assert found_secrets(text) == text_reference.found_secrets(text)


_RULE_PIECES = [
    "i ", "i'm ", "i am ", "my ", "name is ", "like ", "love ", "hate ", "prefer ", "going to ",
    "plan to ", "tomorrow ", "next week ", "always ", "never ", "please ", "call me ",
    "from now on ", "remember ", "that ", "don't forget ", "note that ", "keep in mind ",
    "you ", "it ", "a ", "an ", "engineer ", "from ", "Lisbon ", "work at ", "have ", "two ",
    "cats ", "is ", "are ", "favorite ", "color ", "blue", "and ", ", ", "- ", "—", "if ",
    "what ", "?", "我", "喜欢", "吃辣", "叫", "小王", "是", "有", "猫", "打算", "明天", "记住",
    "以后", "不要", "你", "，", "：", "请", "的", "名字", "住在", "北京", "过敏", "对",
]
rule_text = st.lists(st.sampled_from(_RULE_PIECES), min_size=1, max_size=10).map("".join)
_ORDERED = (*p.EXPLICIT, *(rule.pattern for rule in p.RULES))


@REFERENCE
@given(st.one_of(rule_text, short_hostile))
def test_one_scan_tells_whether_any_rule_applies(text: str) -> None:
    # The extractor skips a sentence or clause that this one pattern does not match, so it
    # must match exactly where some explicit request or rule does.
    assert bool(p.ANY_MATCH.match(text)) == any(pattern.match(text) for pattern in _ORDERED)


@pytest.mark.parametrize(
    "text",
    ["I like tea", "i LIKE tea", "\u0130 like tea", "\u0131 like tea", "\uff29 like tea",
     "My name is Ana", "\u212a\u212a, remember it", "\u017fo, always answer in English",
     "我喜欢吃辣", "请记住我住在北京", "Ⅰ like tea", ""],
)
def test_the_first_character_dispatch_agrees_with_every_pattern(text: str) -> None:
    # Cased non-ASCII first letters (dotted I, Kelvin sign, long s) fall back to all patterns.
    assert p.ANY_MATCH.match(text) == any(pattern.match(text) for pattern in _ORDERED)


def test_the_dispatch_compiles_a_bounded_number_of_patterns() -> None:
    # Sentences starting with ever new characters (ideographs no rule starts with) must not
    # each cost a compiled alternation: the cache is bounded by the pattern tables.
    starts = [chr(0x4E00 + i) for i in range(3000)]
    for ch in starts:
        text = f"{ch}喜欢吃辣"
        assert p.ANY_MATCH.match(text) == any(pattern.match(text) for pattern in _ORDERED)
    keys = {first for first, _ in p.ANY_MATCH._compiled}
    assert len(p.ANY_MATCH._compiled) <= 4 * (len(p.ANY_MATCH._by_key) + 1), len(keys)


def test_every_character_ignorecase_matches_to_a_prefilter_letter_folds_to_it() -> None:
    # Redaction skips a case-insensitive pattern when the text's casefold lacks its keyword.
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for letter in sorted(set("keysecrtokenpasswd")):
        matched = re.findall(f"(?i){letter}", everything)
        assert matched and all(letter in ch.casefold() for ch in matched), letter


@REFERENCE
@given(st.one_of(short_hostile, short_mixed))
def test_prefilters_skip_only_rules_that_find_nothing(text: str) -> None:
    unfiltered = text
    for rule in redaction._RULES:
        unfiltered = rule.apply(unfiltered)
    assert redact(text) == unfiltered


_SCREEN_CASES = [
    "If I were rich", "ıf i were rich", "IF MY car", "I wish I knew", "I WISH", "were I you",
    "i could have gone", "so what if it rains", "don't remember this", "you do not need to SAVE",
    "stop recording", "Forget it", "不要记住这个", "你叫什么", "好吗", "我喜欢吃辣吗",
    "please forget to", "nothing here at all", "", "i a1", "\u0131f i",
]


@pytest.mark.parametrize("text", _SCREEN_CASES)
def test_screened_searches_answer_as_their_patterns(text: str) -> None:
    assert p.DOUBTFUL_SCAN.found(text) == (p.DOUBTFUL.search(text) is not None)
    assert p.FORGET_SCAN.found(text) == (p.FORGET.search(text) is not None)


@REFERENCE
@given(st.one_of(rule_text, short_hostile,
                 st.lists(st.sampled_from(_SCREEN_CASES), max_size=4).map(" ".join)))
def test_screened_searches_agree_on_generated_text(text: str) -> None:
    assert p.DOUBTFUL_SCAN.found(text) == (p.DOUBTFUL.search(text) is not None)
    assert p.FORGET_SCAN.found(text) == (p.FORGET.search(text) is not None)


def test_the_screens_fold_is_what_ignorecase_matches() -> None:
    # A screen looks for its words in `fold(text)`: every character IGNORECASE matches to an
    # ASCII letter must fold to that letter.
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for letter in "abcdefghijklmnopqrstuvwxyz":
        matched = re.findall(f"(?i){letter}", everything)
        assert matched and all(letter in fold(ch) for ch in matched), letter


@REFERENCE
@given(st.lists(rule_text, min_size=1, max_size=6))
def test_repeated_sentences_give_what_one_of_them_gives(sentences: list[str]) -> None:
    # Each distinct sentence is read once: saying it again adds nothing, in any order.
    once = extract_rules([". ".join(sentences)])
    twice = extract_rules([". ".join(sentences + sentences), ". ".join(reversed(sentences))])
    assert twice == once


@AT_MAX_SIZE
@given(st.lists(hostile_piece, max_size=2).map("".join), hostile_unit)
def test_generated_hostile_text_at_the_maximum_size_is_linear(prefix: str, unit: str) -> None:
    text = fill(prefix, unit, MAX_BYTES)
    assert len(text.encode("utf-8")) <= MAX_BYTES
    slow = {name: found for name, run in PASSES.items()
            if (found := _superlinear(run, text)) is not None}
    assert not slow, f"{unit!r} after {prefix!r}: {slow}"


def test_control_characters_are_refused_or_dropped_exactly_as_before() -> None:
    # Validation finds them with one regex scan now (a Python loop over every character
    # held the interpreter lock for 60 ms on a full interaction). Identifiers refuse the C0
    # controls (tab, newline and carriage return as "a single line"); chat text, message
    # content and queries alike, drops them and DEL instead.
    from pydantic import TypeAdapter

    from memoryd.records.schemas import ContextRequest, Identifier, Message, SearchRequest

    strict = TypeAdapter(Identifier)
    for code in range(0x80):
        char = chr(code)
        try:
            strict.validate_python(f"a{char}b")
        except ValueError:
            assert code < 32, repr(char)
        else:
            assert code >= 32, repr(char)
        dropped = (code < 32 and char not in "\t\n\r") or code == 0x7F
        said = "ab" if dropped else f"a{char}b"
        content = Message.model_validate({"role": "user", "content": f"a{char}b"}).content
        asked = [model.model_validate({"user_id": "u", "query": f"a{char}b"}).query
                 for model in (SearchRequest, ContextRequest)]
        assert [content, *asked] == [said] * 3, repr(char)
