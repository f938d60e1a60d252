"""Time cues read from a search query: windows in English and Chinese, the latest cue, and the
numbers the scorer takes from them."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from memoryd.retrieval.time_cues import (
    TimeCues,
    TimeWindow,
    newness,
    read_time_cues,
    window_closeness,
)

DAY = timedelta(days=1)
YEAR = timedelta(days=365.2425)
MONTH = timedelta(days=30.436875)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# A Wednesday, mid-morning.
WED = utc(2024, 5, 15, 10)
SAT = utc(2024, 5, 18, 10)
MON = utc(2024, 5, 13, 10)


def only(query: str, as_of: datetime = WED) -> tuple[datetime, datetime]:
    cues = read_time_cues(query, as_of)
    assert len(cues.windows) == 1, (query, cues.windows)
    window = cues.windows[0]
    return window.start, window.end


def centre(span: tuple[datetime, datetime]) -> datetime:
    return span[0] + (span[1] - span[0]) / 2


# ---- calendar days and parts of days ----


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I eat yesterday?", utc(2024, 5, 14), utc(2024, 5, 15)),
        ("who did I meet today", utc(2024, 5, 15), utc(2024, 5, 16)),
        ("the day before yesterday I ran", utc(2024, 5, 13), utc(2024, 5, 14)),
        ("what did I have for breakfast this morning", utc(2024, 5, 15, 5), utc(2024, 5, 15, 12)),
        ("plans for tonight", utc(2024, 5, 15, 18), utc(2024, 5, 16, 6)),
        ("what did I watch last night", utc(2024, 5, 14, 18), utc(2024, 5, 15, 6)),
        ("我昨天吃了什么", utc(2024, 5, 14), utc(2024, 5, 15)),
        ("今天见了谁", utc(2024, 5, 15), utc(2024, 5, 16)),
        ("前天跑步了吗", utc(2024, 5, 13), utc(2024, 5, 14)),
        ("大前天去了哪", utc(2024, 5, 12), utc(2024, 5, 13)),
        ("昨晚看了什么电影", utc(2024, 5, 14, 18), utc(2024, 5, 15, 6)),
        ("今早吃了什么", utc(2024, 5, 15, 5), utc(2024, 5, 15, 12)),
        ("今晚吃什么", utc(2024, 5, 15, 18), utc(2024, 5, 16, 6)),
    ],
)
def test_days_and_parts_of_days(query: str, start: datetime, end: datetime) -> None:
    assert only(query) == (start, end)


# ---- weeks, months, years, weekends ----


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what did I do last week", utc(2024, 5, 6), utc(2024, 5, 13)),
        ("the previous week", utc(2024, 5, 6), utc(2024, 5, 13)),
        ("this week", utc(2024, 5, 13), utc(2024, 5, 20)),
        ("last month", utc(2024, 4, 1), utc(2024, 5, 1)),
        ("previous month", utc(2024, 4, 1), utc(2024, 5, 1)),
        ("this month", utc(2024, 5, 1), utc(2024, 6, 1)),
        ("last year", utc(2023, 1, 1), utc(2024, 1, 1)),
        ("this year", utc(2024, 1, 1), utc(2025, 1, 1)),
        ("last weekend", utc(2024, 5, 11), utc(2024, 5, 13)),
        ("上周去了哪", utc(2024, 5, 6), utc(2024, 5, 13)),
        ("上星期", utc(2024, 5, 6), utc(2024, 5, 13)),
        ("上个星期", utc(2024, 5, 6), utc(2024, 5, 13)),
        ("上礼拜", utc(2024, 5, 6), utc(2024, 5, 13)),
        ("这周", utc(2024, 5, 13), utc(2024, 5, 20)),
        ("本周", utc(2024, 5, 13), utc(2024, 5, 20)),
        ("上个月", utc(2024, 4, 1), utc(2024, 5, 1)),
        ("上月", utc(2024, 4, 1), utc(2024, 5, 1)),
        ("这个月", utc(2024, 5, 1), utc(2024, 6, 1)),
        ("本月", utc(2024, 5, 1), utc(2024, 6, 1)),
        ("去年", utc(2023, 1, 1), utc(2024, 1, 1)),
        ("今年", utc(2024, 1, 1), utc(2025, 1, 1)),
        ("前年", utc(2022, 1, 1), utc(2023, 1, 1)),
        ("上周末去爬山了", utc(2024, 5, 11), utc(2024, 5, 13)),
        ("周末做了什么", utc(2024, 5, 11), utc(2024, 5, 13)),
    ],
)
def test_calendar_periods(query: str, start: datetime, end: datetime) -> None:
    assert only(query) == (start, end)


def test_the_weekend_under_way_on_a_saturday() -> None:
    assert only("周末做了什么", SAT) == (utc(2024, 5, 18), utc(2024, 5, 20))
    assert only("上周末", SAT) == (utc(2024, 5, 11), utc(2024, 5, 13))
    assert only("last weekend", SAT) == (utc(2024, 5, 11), utc(2024, 5, 13))


def test_past_week_month_year_roll_back_from_now() -> None:
    assert only("over the past week") == (WED - 7 * DAY, WED)
    assert only("in the past month") == (WED - 30 * DAY, WED)
    assert only("the past year") == (WED - 365 * DAY, WED)


def test_earlier_this_week_month_year_run_to_now() -> None:
    assert only("earlier this week") == (utc(2024, 5, 13), WED)
    assert only("earlier this month") == (utc(2024, 5, 1), WED)
    assert only("earlier this year") == (utc(2024, 1, 1), WED)


# ---- "N units ago" ----


@pytest.mark.parametrize(
    ("query", "back", "width"),
    [
        ("3 days ago", 3 * DAY, DAY),
        ("three days ago", 3 * DAY, DAY),
        ("a day ago", DAY, DAY),
        ("two weeks ago", 14 * DAY, 7 * DAY),
        ("a month ago", MONTH, MONTH),
        ("an hour ago", timedelta(hours=1), timedelta(hours=1)),
        ("a couple of days ago", 2 * DAY, DAY),
        ("twelve days ago", 12 * DAY, 2.4 * DAY),
        ("20 years ago", 20 * YEAR, 4 * YEAR),
        ("三天前", 3 * DAY, DAY),
        ("3天前", 3 * DAY, DAY),
        ("３天前", 3 * DAY, DAY),
        ("两周前", 14 * DAY, 7 * DAY),
        ("两个星期前", 14 * DAY, 7 * DAY),
        ("三个月前", 3 * MONTH, MONTH),
        ("一年前", YEAR, YEAR),
        ("五年以前", 5 * YEAR, YEAR),
        ("十天前", 10 * DAY, 2 * DAY),
        ("二十天前", 20 * DAY, 4 * DAY),
        ("两个小时前", timedelta(hours=2), timedelta(hours=1)),
        ("半个月前", 15 * DAY, 3 * DAY),
    ],
)
def test_n_units_ago_is_centred_with_its_width(
    query: str, back: timedelta, width: timedelta
) -> None:
    span = only(query)
    assert abs(centre(span) - (WED - back)) < timedelta(seconds=1)
    assert abs((span[1] - span[0]) - width) < timedelta(seconds=1)


def test_half_a_year_ago_is_about_six_months() -> None:
    start, end = only("半年前搬的家")
    assert start < WED - 6 * MONTH < end
    assert end < WED - 5 * MONTH
    assert start > WED - 7 * MONTH


@pytest.mark.parametrize(
    ("query", "low", "high"),
    [
        ("a few days ago", 2 * DAY, 4 * DAY),
        ("the other day", 2 * DAY, 4 * DAY),
        ("several weeks ago", 21 * DAY, 42 * DAY),
        ("几天前", 2 * DAY, 4 * DAY),
        ("前几天", 2 * DAY, 4 * DAY),
        ("三四天前", 3 * DAY, 4 * DAY),
        ("两三天前", 2 * DAY, 3 * DAY),
        ("十几年前", 11 * YEAR, 19 * YEAR),
        ("几个月前", 2 * MONTH, 4 * MONTH),
    ],
)
def test_vague_counts_cover_their_range(query: str, low: timedelta, high: timedelta) -> None:
    start, end = only(query)
    assert start <= WED - high
    assert WED - low <= end
    assert end < WED


@pytest.mark.parametrize(
    ("query", "back"),
    [
        ("in the last 3 days", 3 * DAY),
        ("over the past two weeks", 14 * DAY),
        ("the last 24 hours", DAY),
        ("in the last few days", 4 * DAY),
        ("最近三天", 3 * DAY),
        ("过去一年", YEAR),
        ("近两个月", 2 * MONTH),
    ],
)
def test_in_the_last_n_units_runs_to_now(query: str, back: timedelta) -> None:
    start, end = only(query)
    assert end == WED
    assert abs(start - (WED - back)) < timedelta(seconds=1)


@pytest.mark.parametrize(
    ("query", "back"),
    [
        ("what have I been up to recently", 14 * DAY),
        ("lately", 14 * DAY),
        ("我最近在忙什么", 14 * DAY),
        ("近来", 14 * DAY),
        ("这几天", 7 * DAY),
        ("这些天", 7 * DAY),
        ("刚才说了什么", timedelta(hours=2)),
        ("刚刚", timedelta(hours=2)),
        ("what did I say just now", timedelta(hours=2)),
    ],
)
def test_recent_windows_end_now(query: str, back: timedelta) -> None:
    assert only(query) == (WED - back, WED)


# ---- weekdays and seasons ----


@pytest.mark.parametrize(
    ("query", "as_of", "day"),
    [
        ("last Monday", WED, utc(2024, 5, 13)),
        ("last Monday", MON, utc(2024, 5, 6)),
        ("last Friday", WED, utc(2024, 5, 10)),
        ("last Wednesday", WED, utc(2024, 5, 8)),
        ("last sunday", WED, utc(2024, 5, 12)),
        ("上周一", WED, utc(2024, 5, 6)),
        ("上周一", MON, utc(2024, 5, 6)),
        ("上周三", WED, utc(2024, 5, 8)),
        ("上周日", WED, utc(2024, 5, 12)),
        ("上星期天", WED, utc(2024, 5, 12)),
        ("上星期五", WED, utc(2024, 5, 10)),
        ("上礼拜二", WED, utc(2024, 5, 7)),
        ("这周五", WED, utc(2024, 5, 17)),
    ],
)
def test_weekdays(query: str, as_of: datetime, day: datetime) -> None:
    assert only(query, as_of) == (day, day + DAY)


def test_shang_zhou_yi_qi_is_together_last_week_not_last_monday() -> None:
    assert only("上周一起吃饭的人是谁") == (utc(2024, 5, 6), utc(2024, 5, 13))


@pytest.mark.parametrize(
    ("query", "as_of", "start", "end"),
    [
        ("last summer", utc(2024, 7, 10), utc(2023, 6, 1), utc(2023, 9, 1)),
        ("last summer", utc(2024, 10, 10), utc(2024, 6, 1), utc(2024, 9, 1)),
        ("last winter", utc(2024, 2, 10), utc(2022, 12, 1), utc(2023, 3, 1)),
        ("last winter", utc(2024, 4, 10), utc(2023, 12, 1), utc(2024, 3, 1)),
        ("last spring", WED, utc(2023, 3, 1), utc(2023, 6, 1)),
        ("last fall", WED, utc(2023, 9, 1), utc(2023, 12, 1)),
        ("last autumn", WED, utc(2023, 9, 1), utc(2023, 12, 1)),
        ("last Christmas", WED, utc(2023, 12, 24), utc(2023, 12, 27)),
        ("last Christmas", utc(2024, 12, 25, 12), utc(2023, 12, 24), utc(2023, 12, 27)),
        ("last Christmas", utc(2024, 12, 27), utc(2024, 12, 24), utc(2024, 12, 27)),
    ],
)
def test_seasons_and_christmas_are_the_latest_ended(
    query: str, as_of: datetime, start: datetime, end: datetime
) -> None:
    assert only(query, as_of) == (start, end)


# ---- calendar boundaries ----


def test_last_month_on_the_31st_of_march_is_february_of_a_leap_year() -> None:
    assert only("last month", utc(2024, 3, 31, 23, 59)) == (utc(2024, 2, 1), utc(2024, 3, 1))


def test_last_month_in_january_is_december_of_the_previous_year() -> None:
    assert only("上个月", utc(2024, 1, 15)) == (utc(2023, 12, 1), utc(2024, 1, 1))
    assert only("last month", utc(2024, 1, 1)) == (utc(2023, 12, 1), utc(2024, 1, 1))


def test_this_month_in_december_ends_on_the_first_of_january() -> None:
    assert only("本月", utc(2023, 12, 31, 23)) == (utc(2023, 12, 1), utc(2024, 1, 1))


def test_last_week_across_new_year_starts_on_a_monday() -> None:
    start, end = only("last week", utc(2024, 1, 3))
    assert (start, end) == (utc(2023, 12, 25), utc(2024, 1, 1))
    assert start.weekday() == 0


def test_yesterday_on_the_first_of_march_is_the_leap_day() -> None:
    assert only("昨天", utc(2024, 3, 1, 0, 0)) == (utc(2024, 2, 29), utc(2024, 3, 1))


def test_this_week_on_a_sunday_started_on_monday() -> None:
    assert only("this week", utc(2024, 5, 19, 23)) == (utc(2024, 5, 13), utc(2024, 5, 20))


def test_earlier_this_week_at_monday_midnight_still_has_a_width() -> None:
    start, end = only("earlier this week", utc(2024, 5, 13))
    assert start == utc(2024, 5, 13)
    assert end - start == timedelta(hours=1)


# ---- several expressions, mixed languages, overlaps ----


def test_mixed_language_query() -> None:
    cues = read_time_cues("我上个月 went to Tokyo", WED)
    assert [(w.phrase, w.start, w.end) for w in cues.windows] == [
        ("上个月", utc(2024, 4, 1), utc(2024, 5, 1))
    ]
    assert not cues.latest


def test_english_next_to_chinese_without_spaces() -> None:
    assert only("我yesterday去了超市") == (utc(2024, 5, 14), utc(2024, 5, 15))


def test_several_expressions_come_back_in_the_order_written() -> None:
    cues = read_time_cues("上周末 I went hiking, and yesterday 我休息了, 3 days ago too", WED)
    assert [w.phrase for w in cues.windows] == ["上周末", "yesterday", "3 days ago"]
    assert cues.windows[0].start == utc(2024, 5, 11)
    assert cues.windows[1].start == utc(2024, 5, 14)


def test_the_same_period_twice_is_one_window() -> None:
    cues = read_time_cues("last week 和 上周 and LAST WEEK", WED)
    assert len(cues.windows) == 1
    assert cues.windows[0].phrase == "last week"


@pytest.mark.parametrize(
    ("query", "phrase"),
    [
        ("上周末", "上周末"),
        ("the day before yesterday", "the day before yesterday"),
        ("大前天", "大前天"),
        ("这周末", "这周末"),
        ("今天晚上", "今天晚上"),
        ("最近三天", "最近三天"),
    ],
)
def test_a_longer_phrase_is_not_also_read_as_the_phrases_inside_it(
    query: str, phrase: str
) -> None:
    cues = read_time_cues(query, WED)
    assert [w.phrase for w in cues.windows] == [phrase]


@pytest.mark.parametrize(
    "query",
    ["YESTERDAY", "Last Week", "LAST  MONTH", "last\nweek", "Three Days Ago", "Recently"],
)
def test_english_is_case_and_spacing_insensitive_and_keeps_the_phrase_as_written(
    query: str,
) -> None:
    cues = read_time_cues(f"so, {query}?", WED)
    assert [w.phrase for w in cues.windows] == [query]


@pytest.mark.parametrize(
    "query",
    [
        "",
        "What's my monthly budget?",
        "Tuesday's child is full of grace",
        "Do I prefer weekday mornings?",
        "Lastly, send the weekly report",
        "the lastweek tag",
        "Todayville is a town",
        "yesterdays",
        "What is my name?",
        "我的月度预算是多少",
        "星期一我一般去健身",
        "days ago",
        "二四天前",
    ],
)
def test_no_cue(query: str) -> None:
    cues = read_time_cues(query, WED)
    assert cues == TimeCues(windows=(), latest=False)
    assert not cues.any


def test_the_band_yesterday_is_read_as_yesterday() -> None:
    # Known and accepted: a name that is a time word reads as one. The window only nudges
    # ranking, so the cost is a small boost for yesterday's memories.
    assert only("I like the band Yesterday") == (utc(2024, 5, 14), utc(2024, 5, 15))


# ---- the latest cue ----


@pytest.mark.parametrize(
    "query",
    [
        "Where do I live now?",
        "what is my current job",
        "Am I currently dating anyone?",
        "what do I do these days",
        "nowadays what do I eat",
        "my latest phone",
        "the most recent trip",
        "Do I still play piano?",
        "what am I reading at the moment",
        "what am I doing right now",
        "I don't smoke anymore, do I?",
        "我现在住哪",
        "目前在哪工作",
        "当前的手机号",
        "最新的地址",
        "如今住在哪",
        "我还在学日语吗",
        "我还是住在北京吗",
        "眼下在忙什么",
        "这阵子在读什么书",
        "我上个月 went to Tokyo, where do I live now?",
    ],
)
def test_latest_cue(query: str) -> None:
    cues = read_time_cues(query, WED)
    assert cues.latest
    assert cues.any


@pytest.mark.parametrize(
    "query",
    [
        "what did I say just now",
        "I know the rules",
        "snowboarding trips",
        "a distillery",
        "我叫什么",
        # An adverb of the state in a statement is how the speaker feels, not a question
        # about a fact's current state.
        "I'm still a bit scared.",
        "I still had it with me when I was playing on the slide there.",
        "Now that he's gone, there's nobody to keep me company.",
        "Do you really think so? I'm still really worried.",
        "我还是觉得有点害怕",
        "但现在看来我得等更久才能去找新的贝壳了。",
    ],
)
def test_no_latest_cue(query: str) -> None:
    assert not read_time_cues(query, WED).latest


@pytest.mark.parametrize(
    ("query", "latest"),
    [
        ("I'm still scared. Do I still have the dog?", True),
        ("I'm still scared. Do I have the dog?", False),
        ("那我们现在应该找哪些视频呢？", True),
        ("我现在很难过。", False),
        ("When do I see the dentist now", True),
        ("my current address", True),
        ("我最新的地址", True),
        # A decimal point ends no sentence: the question runs on to "now".
        ("Do I take 2.5 mg of it now", True),
        ("I take 2.5 mg now. Do I have the dog?", False),
    ],
)
def test_an_adverb_of_the_state_cues_only_in_a_question(query: str, latest: bool) -> None:
    assert read_time_cues(query, WED).latest is latest


def test_any_is_true_for_a_window_alone() -> None:
    cues = read_time_cues("yesterday", WED)
    assert cues.any and not cues.latest


# ---- as_of and the window type ----


def test_naive_as_of_is_utc() -> None:
    naive = read_time_cues("昨天 and last week", datetime(2024, 5, 15, 10))
    aware = read_time_cues("昨天 and last week", WED)
    assert naive == aware
    for window in naive.windows:
        assert window.start.utcoffset() == timedelta(0)
        assert window.end.utcoffset() == timedelta(0)


def test_as_of_in_another_zone_is_read_in_utc() -> None:
    # 01:00 on the 15th in UTC+8 is 17:00 on the 14th in UTC.
    as_of = datetime(2024, 5, 15, 1, tzinfo=timezone(timedelta(hours=8)))
    start, end = only("yesterday", as_of)
    assert (start, end) == (utc(2024, 5, 13), utc(2024, 5, 14))
    assert start.tzinfo == UTC


def test_every_window_is_aware_utc_and_non_empty() -> None:
    query = (
        "yesterday today tonight this morning last night 3 days ago last week this month "
        "last year recently earlier this year last summer last Monday 昨天 前天 上周 上个月 去年 "
        "最近 刚才 三天前 半年前 上周三 周末 上周末 前几天 in the last 2 weeks 这几天"
    )
    for as_of in (WED, SAT, MON, utc(2024, 1, 1), utc(2023, 12, 31, 23, 59)):
        cues = read_time_cues(query, as_of)
        assert len(cues.windows) == 8  # the cap
        for window in cues.windows:
            assert window.start < window.end
            assert window.start.tzinfo == UTC and window.end.tzinfo == UTC
            assert window.phrase in query


def test_time_window_checks_its_own_contract() -> None:
    with pytest.raises(ValueError):
        TimeWindow(datetime(2024, 1, 1), utc(2024, 1, 2), "x")
    with pytest.raises(ValueError):
        TimeWindow(utc(2024, 1, 2), utc(2024, 1, 1), "x")
    plus8 = timezone(timedelta(hours=8))
    window = TimeWindow(datetime(2024, 1, 1, 8, tzinfo=plus8), utc(2024, 1, 2), "x")
    assert window.start == utc(2024, 1, 1) and window.start.tzinfo == UTC


# ---- hostile input ----


def _random_text(seed: int, size: int) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0, 0x110000)) for _ in range(size))


HOSTILE = [
    "1" * 32_768,
    "9" * 30_000 + " days ago",
    "昨天" * 16_384,
    "3 days ago " * 3_000,
    "last " * 6_000,
    "a " * 16_000 + "days ago",
    " " * 32_000 + "yesterday",
    "一" * 32_768,
    "十" * 32_000 + "天前",
    "今上这" * 11_000,
    "\x00\x1f\u200b\ufeff" * 8_000,
    "\ud800\udfff" * 16_000,
    "the past " * 3_600,
    "yesterday" * 3_600,
    "\u212a" * 32_768,
    _random_text(1, 32_768),
    _random_text(2, 32_768),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("query", HOSTILE, ids=lambda q: repr(q[:12]))
def test_hostile_input_is_read_without_raising(query: str) -> None:
    cues = read_time_cues(query, WED)
    assert isinstance(cues, TimeCues)
    assert len(cues.windows) <= 8
    for window in cues.windows:
        assert window.start < window.end


@pytest.mark.timeout(30)
def test_hostile_repetitions_give_one_window() -> None:
    assert len(read_time_cues("昨天" * 16_384, WED).windows) == 1
    assert len(read_time_cues("3 days ago " * 3_000, WED).windows) == 1
    # Only the first 32 KB are read.
    assert read_time_cues(" " * 40_000 + "yesterday", WED).windows == ()


@pytest.mark.parametrize(
    "query",
    ["10000000000000000000 days ago", "9" * 30_000 + " years ago", "99999999999999天前"],
)
def test_huge_counts_are_clamped_to_two_hundred_years(query: str) -> None:
    start, end = only(query)
    assert end < WED - 150 * YEAR
    assert start > WED - 230 * YEAR


def test_many_distinct_windows_are_capped() -> None:
    query = " ".join(f"{n} days ago" for n in range(1, 400))
    cues = read_time_cues(query, WED)
    assert [w.phrase for w in cues.windows] == [f"{n} days ago" for n in range(1, 9)]


@pytest.mark.parametrize(
    ("query", "as_of", "phrase"),
    [
        ("last year, 200 years ago, 去年, this year, yesterday", utc(1, 1, 1), "this year"),
        ("tonight, this year, 今晚, last year", datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
         "last year"),
    ],
)
def test_dates_beyond_the_calendar_are_skipped_not_raised(
    query: str, as_of: datetime, phrase: str
) -> None:
    cues = read_time_cues(query, as_of)
    assert [w.phrase for w in cues.windows] == [phrase]


# ---- window_closeness ----


def _epoch(dt: datetime) -> float:
    return dt.timestamp()


def _day_window() -> TimeWindow:
    return TimeWindow(utc(2024, 5, 14), utc(2024, 5, 15), "yesterday")


def test_closeness_is_one_inside_and_decays_by_window_lengths_outside() -> None:
    times = np.array(
        [
            _epoch(utc(2024, 5, 14, 12)),
            _epoch(utc(2024, 5, 14)),
            _epoch(utc(2024, 5, 15)),
            _epoch(utc(2024, 5, 16)),
            _epoch(utc(2024, 5, 12)),
            _epoch(utc(2024, 5, 1)),
        ]
    )
    got = window_closeness(times, [_day_window()])
    assert got.dtype == np.float64
    assert got[:3].tolist() == [1.0, 1.0, 1.0]
    assert got[3] == pytest.approx(math.exp(-1))
    assert got[4] == pytest.approx(math.exp(-2))
    assert 0.0 < got[5] < got[4] < got[3] < 1.0


def test_closeness_of_unknown_times_is_zero() -> None:
    times = np.array([math.inf, math.nan, -math.inf, _epoch(utc(2024, 5, 14, 6))])
    assert window_closeness(times, [_day_window()]).tolist() == [0.0, 0.0, 0.0, 1.0]


def test_closeness_takes_the_best_window_and_measures_in_its_own_length() -> None:
    month = TimeWindow(utc(2024, 4, 1), utc(2024, 5, 1), "last month")
    day = _day_window()
    a_day_after_the_month = _epoch(utc(2024, 5, 2))
    got = window_closeness(np.array([a_day_after_the_month]), [day, month])
    assert got[0] == pytest.approx(math.exp(-1 / 30))
    assert window_closeness(np.array([_epoch(utc(2024, 5, 16))]), [month])[0] < got[0]


def test_closeness_without_windows_is_zero_and_shapes_are_kept() -> None:
    times = np.array([[_epoch(utc(2024, 5, 14, 1)), math.nan], [0.0, 1e9]])
    assert window_closeness(times, []).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    got = window_closeness(times, [_day_window()])
    assert got.shape == (2, 2)
    assert got[0, 0] == 1.0 and got[0, 1] == 0.0
    assert np.all((got >= 0.0) & (got <= 1.0))
    assert window_closeness(np.array([]), [_day_window()]).shape == (0,)


def test_closeness_of_windows_read_from_a_query() -> None:
    cues = read_time_cues("what did I do 3 days ago", WED)
    three_days = _epoch(WED - 3 * DAY)
    a_week = _epoch(WED - 7 * DAY)
    got = window_closeness(np.array([three_days, a_week, math.inf]), cues.windows)
    assert got[0] == 1.0
    assert 0.0 < got[1] < 0.1
    assert got[2] == 0.0


# ---- newness ----


def test_newness_is_linear_in_rank() -> None:
    got = newness(np.array([10.0, 40.0, 20.0, 1e9]))
    assert got.tolist() == pytest.approx([0.0, 2 / 3, 1 / 3, 1.0])


def test_newness_ignores_the_size_of_gaps() -> None:
    assert newness(np.array([0.0, 1e9, 1e9 + 1])).tolist() == pytest.approx([0.0, 0.5, 1.0])


def test_newness_of_unknown_times_is_zero() -> None:
    got = newness(np.array([5.0, math.inf, math.nan, 7.0]))
    assert got.tolist() == [0.0, 0.0, 0.0, 1.0]


def test_newness_of_one_candidate_or_equal_times_is_one() -> None:
    assert newness(np.array([123.0])).tolist() == [1.0]
    assert newness(np.array([5.0, math.nan])).tolist() == [1.0, 0.0]
    assert newness(np.array([3.0, 3.0])).tolist() == [1.0, 1.0]


def test_newness_ties_share_a_rank() -> None:
    assert newness(np.array([1.0, 2.0, 2.0, 3.0])).tolist() == pytest.approx([0.0, 0.5, 0.5, 1.0])


def test_newness_keeps_shapes_and_handles_empty_and_all_unknown() -> None:
    assert newness(np.array([])).shape == (0,)
    assert newness(np.array([math.nan, math.inf])).tolist() == [0.0, 0.0]
    got = newness(np.array([[1.0, 3.0], [2.0, math.inf]]))
    assert got.shape == (2, 2)
    assert got.ravel().tolist() == pytest.approx([0.0, 1.0, 0.5, 0.0])
