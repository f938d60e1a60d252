"""Redaction: examples of each kind, and properties over generated text and secrets."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.extraction.redaction import found_secrets, luhn_ok, redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail me at li.wei+work@example.com.cn please", "mail me at [EMAIL] please"),
        ("我的手机号是13800138000，谢谢", "我的手机号是[PHONE]，谢谢"),
        ("call +86 138 0013 8000", "call [PHONE]"),
        ("office +44 20 7946 0958 or (415) 555-2671", "office [PHONE] or [PHONE]"),
        ("座机 010-62345678", "座机 [PHONE]"),
        ("身份证号 11010519491231002X 已登记", "身份证号 [ID_NUMBER] 已登记"),
        ("card 4111 1111 1111 1111 expires", "card [CARD] expires"),
        ("卡号4111111111111111", "卡号[CARD]"),
        ("key sk-abcdefghijklmnopqrstuvwx1234 here", "key [API_KEY] here"),
        ("AWS AKIAIOSFODNN7EXAMPLE", "AWS [API_KEY]"),
        ("api_key=Zx81kLmn0pq", "api_key=[API_KEY]"),
        ("Authorization: Bearer abc.def-123456789", "Authorization: Bearer [TOKEN]"),
        ("jwt eyJhbGciOi.eyJzdWIiOiIx.SflKxwRJSM", "jwt [TOKEN]"),
        ("my password is hunter2.", "my password is [PASSWORD]."),
        ("我的密码是abc123456，别忘了", "我的密码是[PASSWORD]，别忘了"),
        ("密码：Qw!9x", "密码：[PASSWORD]"),
    ],
)
def test_each_kind_becomes_its_placeholder(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "order 1234 5678 9012 3456 shipped",  # fails Luhn: not a card
        "在2024年3月搬到上海，住了12年",
        "Java 17 and Python 3.11 on port 8080",
        "I am 42 years old and have 3 kids",
    ],
)
def test_ordinary_numbers_survive(text: str) -> None:
    assert redact(text) == text
    assert found_secrets(text) == []


def test_found_secrets_names_the_kinds() -> None:
    assert found_secrets("write to a@b.io, pwd: x") == ["EMAIL", "PASSWORD"]
    assert found_secrets(redact("write to a@b.io, pwd: x")) == []


# ---- properties ----------------------------------------------------------------

_words = st.text(
    alphabet=st.sampled_from(string.ascii_letters + string.digits + " .,:!?-_@+()[]" +
                             "我你他的是在有和了项目密码号码手机卡，。！？：、"),
    max_size=40,
)


def _with_check_digit(body: str) -> str:
    for d in "0123456789":
        if luhn_ok(body + d):
            return body + d
    raise AssertionError("unreachable")


_emails = st.builds(
    lambda user, host, tld: f"{user}@{host}.{tld}",
    st.text(alphabet=string.ascii_lowercase + string.digits + "._+-", min_size=1, max_size=12),
    st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=10),
    st.sampled_from(["com", "cn", "io", "org", "co.uk", "com.cn"]),
)
_cn_mobiles = st.builds(
    lambda second, rest, sep: f"1{second}{rest[:1]}{sep}{rest[1:5]}{sep}{rest[5:]}",
    st.sampled_from("3456789"), st.text(alphabet=string.digits, min_size=9, max_size=9),
    st.sampled_from(["", " ", "-"]),
)
_intl_phones = st.builds(
    lambda cc, a, b, c: f"+{cc} {a} {b} {c}",
    st.integers(1, 999), st.integers(10, 9999), st.integers(100, 9999), st.integers(1000, 9999),
)
def _card(body: str, sep: str) -> str:
    number = _with_check_digit(body)
    return sep.join(number[i:i + 4] for i in range(0, 16, 4))


_cards = st.builds(
    _card,
    st.text(alphabet=string.digits, min_size=15, max_size=15).filter(lambda b: b[0] != "0"),
    st.sampled_from(["", " ", "-"]),
)
_ids = st.builds(
    lambda region, year, month, day, seq, check: (
        f"{region}{year}{month:02d}{day:02d}{seq:03d}{check}"
    ),
    st.integers(110000, 659999).map(str), st.integers(1900, 2024).map(str),
    st.integers(1, 12), st.integers(1, 28), st.integers(0, 999), st.sampled_from("0123456789X"),
)
_keys = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["sk-", "sk-proj-", "ghp_", "AKIA"]),
    st.text(alphabet=string.ascii_uppercase + string.digits, min_size=20, max_size=40),
)
_tokens = st.builds(
    lambda body: f"Bearer {body}",
    st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=12, max_size=40),
)
_passwords = st.builds(
    lambda label, value: (label, value),
    st.sampled_from(["password is ", "password: ", "密码是", "密码：", "pwd="]),
    st.text(alphabet=string.ascii_letters + string.digits + "!#$%^&*", min_size=4, max_size=20),
)


@settings(max_examples=1000)
@given(st.text(max_size=300))
def test_any_text_redacts_without_error_and_idempotently(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=1000)
@given(_words, st.one_of(_emails, _cn_mobiles, _intl_phones, _cards, _ids, _keys, _tokens),
       _words)
def test_no_generated_secret_survives(before: str, secret: str, after: str) -> None:
    out = redact(f"{before} {secret} {after}")
    assert secret not in out
    assert redact(out) == out


@settings(max_examples=200)
@given(_words, _passwords, _words)
def test_no_generated_password_survives(before: str, pair: tuple[str, str], after: str) -> None:
    label, value = pair
    out = redact(f"{before} {label}{value} {after}")
    assert f"{label}{value}" not in out
    assert redact(out) == out
