"""Time cues read from a search query: the periods it names, and whether it asks for the newest.

A query such as "what did I eat yesterday?" or "我上个月去了哪里" names a period; memories
from that period should rank a little higher. A query such as "where do I live now?" or
"我现在住哪" asks for the current state of a fact; the newest version of that fact should
outrank the older ones. `read_time_cues` reads both from the text, in English and Chinese,
mixed freely; `window_closeness` and `newness` turn them into per-memory numbers in [0, 1]
for the scorer. The windows are meant as a soft boost, never a filter: a phrase read wrongly
("I like the band Yesterday" does name yesterday) costs a nudge, not a lost memory.

Periods are resolved against `as_of`, the search's "now", in UTC: the query carries no time
zone, and the smooth decay of `window_closeness` softens the edges a time zone would move.
Calendar periods ("yesterday", "last month", "上周") are the calendar periods themselves, weeks
starting on Monday; fuzzy ones ("3 days ago", "recently") take their widths from `_WIDTHS`,
the one place where widths are chosen.

The text is untrusted: the first `_MAX_CHARS` of any `str` are read in time linear in their
length (fixed phrases form one prefix tree, repeats are bounded or over a single
character class, and a number run is only tried from its first digit), counts are clamped to
`_WIDTHS.furthest`, and nothing raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

# Only this much of a query is read: queries are capped at 32 KB upstream, so this never cuts a
# real one, and it bounds the work on anything longer.
_MAX_CHARS = 32_768
# At most this many distinct windows per query, and this many phrases looked at: a real query
# names one or two periods, and a repeated phrase must not make the scorer's work grow.
_MAX_WINDOWS = 8
_MAX_PHRASES = 256


@dataclass(frozen=True, slots=True)
class _Widths:
    """Every width a fuzzy window takes, with the reason; calendar periods need none.

    Calendar periods are exact: a day is 00:00–24:00 UTC, a week Monday–Monday, "last month"
    the previous calendar month, "last weekend" Saturday–Monday of the previous week, a season
    its three meteorological months (northern hemisphere), "last Christmas" 24–26 December.
    """

    # "recently", "lately", 最近, 近来: the last two weeks — long enough for "what have I been
    # up to recently", short enough to still prefer the recent over the old.
    recently: timedelta = timedelta(days=14)
    # 这几天, 这些天 ("these few days"): the last week.
    these_days: timedelta = timedelta(days=7)
    # 刚才, 刚刚, "just now": the last two hours — a chat turn or two, plus ingestion delay.
    just_now: timedelta = timedelta(hours=2)
    # "the past week/month/year" is a rolling span ending now, unlike the calendar "last week".
    past_week: timedelta = timedelta(days=7)
    past_month: timedelta = timedelta(days=30)
    past_year: timedelta = timedelta(days=365)
    # Parts of a day, as hours after that day's midnight (30 = 06:00 the next day): "last
    # night" on a Tuesday is Monday 18:00 to Tuesday 06:00.
    morning: tuple[int, int] = (5, 12)
    afternoon: tuple[int, int] = (12, 18)
    night: tuple[int, int] = (18, 30)
    # "N units ago" is centred on now − N units, with half a unit either side (so "3 days ago"
    # spans one day), widened to a tenth of the distance for far ones ("20 years ago" ± 2 years):
    # people round more the further back they look.
    ago_slack_units: float = 0.5
    ago_slack_fraction: float = 0.1
    # Vague counts: "a few", "the other day", 几, 前几天 → 2–4; "several", 好几 → 3–6.
    few: tuple[float, float] = (2.0, 4.0)
    several: tuple[float, float] = (3.0, 6.0)
    # 半年 / 半个月 / 半天 are read as 6 months / 15 days / 12 hours, then as any "N units ago".
    # The narrowest window: "earlier this week" said at Monday 00:00 still has a width.
    minimum: timedelta = timedelta(hours=1)
    # The furthest back any count reaches: "10000000000000000000 days ago" means "very long ago".
    furthest: timedelta = timedelta(days=200 * 365.2425)


_WIDTHS = _Widths()

_UNIT_S: dict[str, float] = {
    "hour": 3600.0,
    "day": 86_400.0,
    "week": 7 * 86_400.0,
    "month": 30.436875 * 86_400.0,
    "year": 365.2425 * 86_400.0,
    "decade": 3652.425 * 86_400.0,
}
# "Half a <unit>" in a smaller unit, so that its slack is measured in that unit.
_HALF: dict[str, tuple[float, str]] = {
    "year": (6.0, "month"),
    "month": (15.0, "day"),
    "week": (3.5, "day"),
    "day": (12.0, "hour"),
}


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A period a query names: [start, end), both aware UTC, start < end.

    `phrase` is the query's text that named it, as written. Aware datetimes in another zone
    are converted to UTC; naive ones, or an empty or reversed window, raise ValueError, since a
    window that cannot be compared with UTC memory times would silently boost the wrong ones.
    """

    start: datetime
    end: datetime
    phrase: str

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("TimeWindow needs aware datetimes")
        object.__setattr__(self, "start", self.start.astimezone(UTC))
        object.__setattr__(self, "end", self.end.astimezone(UTC))
        if not self.start < self.end:
            raise ValueError("TimeWindow needs start < end")


@dataclass(frozen=True, slots=True)
class TimeCues:
    """What a query says about time: the windows it names, in the order written, and whether it
    asks for the latest state of a fact."""

    windows: tuple[TimeWindow, ...]
    latest: bool

    @property
    def any(self) -> bool:
        """True when there is something for the scorer to use."""
        return bool(self.windows) or self.latest


_Span = tuple[datetime, datetime]
_Resolve = Callable[[datetime], _Span]

# ---- calendar arithmetic (UTC, weeks start on Monday) ----

_DAY = timedelta(days=1)


def _midnight(now: datetime, days: int = 0) -> datetime:
    return datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=days)


def _monday(now: datetime, weeks: int = 0) -> datetime:
    return _midnight(now, 7 * weeks - now.weekday())


def _month_at(index: int) -> datetime:
    """The first of a month counted as year * 12 + (month - 1)."""
    year, month0 = divmod(index, 12)
    return datetime(year, month0 + 1, 1, tzinfo=UTC)


def _day(offset: int) -> _Resolve:
    def resolve(now: datetime) -> _Span:
        start = _midnight(now, offset)
        return start, start + _DAY

    return resolve


def _part_of_day(offset: int, hours: tuple[int, int]) -> _Resolve:
    def resolve(now: datetime) -> _Span:
        day = _midnight(now, offset)
        return day + timedelta(hours=hours[0]), day + timedelta(hours=hours[1])

    return resolve


def _week(offset: int) -> _Resolve:
    def resolve(now: datetime) -> _Span:
        start = _monday(now, offset)
        return start, start + 7 * _DAY

    return resolve


def _month(offset: int) -> _Resolve:
    def resolve(now: datetime) -> _Span:
        index = now.year * 12 + now.month - 1 + offset
        return _month_at(index), _month_at(index + 1)

    return resolve


def _year(offset: int) -> _Resolve:
    def resolve(now: datetime) -> _Span:
        year = now.year + offset
        return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)

    return resolve


def _weekend(offset: int) -> _Resolve:
    def resolve(now: datetime) -> _Span:
        saturday = _monday(now, offset) + 5 * _DAY
        return saturday, saturday + 2 * _DAY

    return resolve


def _latest_weekend(now: datetime) -> _Span:
    """The weekend under way, else the one just past (周末, "over the weekend")."""
    return _weekend(0 if now.weekday() >= 5 else -1)(now)


def _rolling(width: timedelta) -> _Resolve:
    def resolve(now: datetime) -> _Span:
        return now - width, now

    return resolve


def _so_far(period: str) -> _Resolve:
    """"earlier this week/month/year": from the period's start to now."""

    def resolve(now: datetime) -> _Span:
        if period == "week":
            start = _monday(now)
        elif period == "month":
            start = datetime(now.year, now.month, 1, tzinfo=UTC)
        else:
            start = datetime(now.year, 1, 1, tzinfo=UTC)
        return start, now

    return resolve


def _season(first_month: int) -> _Resolve:
    """"last summer": the latest such season that has ended — in July, the previous year's."""

    def resolve(now: datetime) -> _Span:
        for year in (now.year, now.year - 1, now.year - 2):
            index = year * 12 + first_month - 1
            start, end = _month_at(index), _month_at(index + 3)
            if end <= now:
                return start, end
        raise ValueError("no season")  # unreachable: two years back always ended

    return resolve


def _christmas(now: datetime) -> _Span:
    """The latest Christmas Day before today, with Eve and Boxing Day."""
    year = now.year if (now.month, now.day) > (12, 25) else now.year - 1
    start = datetime(year, 12, 24, tzinfo=UTC)
    return start, start + 3 * _DAY


def _last_weekday(weekday: int) -> _Resolve:
    """English "last Friday": the latest Friday before today — on a Friday, a week ago."""

    def resolve(now: datetime) -> _Span:
        back = (now.weekday() - weekday - 1) % 7 + 1
        return _day(-back)(now)

    return resolve


def _day_of_week(weeks: int, weekday: int) -> _Resolve:
    """Chinese 上周三: Wednesday of the previous calendar week, whatever today is."""

    def resolve(now: datetime) -> _Span:
        start = _monday(now, weeks) + weekday * _DAY
        return start, start + _DAY

    return resolve


def _ago(count: tuple[float, float], unit: str) -> _Resolve:
    """"N units ago": around now − N units, with the slack of `_WIDTHS`."""
    if count == (0.5, 0.5) and unit in _HALF:
        half_count, unit = _HALF[unit]
        count = (half_count, half_count)
    size = _UNIT_S[unit]
    furthest = _WIDTHS.furthest.total_seconds()
    near, far = min(count[0] * size, furthest), min(count[1] * size, furthest)
    slack = max(_WIDTHS.ago_slack_units * size, _WIDTHS.ago_slack_fraction * far)

    def resolve(now: datetime) -> _Span:
        return now - timedelta(seconds=far + slack), now - timedelta(seconds=near - slack)

    return resolve


def _within(count: tuple[float, float], unit: str) -> _Resolve:
    """"in the last N units", 过去三天: from now − N units to now."""
    seconds = min(count[1] * _UNIT_S[unit], _WIDTHS.furthest.total_seconds())
    return _rolling(timedelta(seconds=seconds))


# ---- the phrases ----

# A Latin word's edge: no letter or digit of a spaced script next to it. CJK characters count
# as an edge, so "我yesterday去了" is read, while "monthly" never yields "month".
_CJK = r"\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"
_L = rf"(?<![^\W{_CJK}])"
_R = rf"(?![^\W{_CJK}])"
_SP = r"\s{1,4}"

_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

_EN_FIXED: dict[str, _Resolve] = {
    "today": _day(0),
    "earlier today": _day(0),
    "yesterday": _day(-1),
    "the day before yesterday": _day(-2),
    "day before yesterday": _day(-2),
    "this morning": _part_of_day(0, _WIDTHS.morning),
    "this afternoon": _part_of_day(0, _WIDTHS.afternoon),
    "this evening": _part_of_day(0, _WIDTHS.night),
    "tonight": _part_of_day(0, _WIDTHS.night),
    "yesterday morning": _part_of_day(-1, _WIDTHS.morning),
    "yesterday afternoon": _part_of_day(-1, _WIDTHS.afternoon),
    "yesterday evening": _part_of_day(-1, _WIDTHS.night),
    "last night": _part_of_day(-1, _WIDTHS.night),
    "last week": _week(-1),
    "previous week": _week(-1),
    "past week": _rolling(_WIDTHS.past_week),
    "this week": _week(0),
    "last month": _month(-1),
    "previous month": _month(-1),
    "past month": _rolling(_WIDTHS.past_month),
    "this month": _month(0),
    "last year": _year(-1),
    "previous year": _year(-1),
    "past year": _rolling(_WIDTHS.past_year),
    "this year": _year(0),
    "last weekend": _weekend(-1),
    "past weekend": _weekend(-1),
    "previous weekend": _weekend(-1),
    "over the weekend": _latest_weekend,
    "earlier this week": _so_far("week"),
    "earlier this month": _so_far("month"),
    "earlier this year": _so_far("year"),
    "recently": _rolling(_WIDTHS.recently),
    "lately": _rolling(_WIDTHS.recently),
    "just now": _rolling(_WIDTHS.just_now),
    "the other day": _ago(_WIDTHS.few, "day"),
    "last spring": _season(3),
    "last summer": _season(6),
    "last autumn": _season(9),
    "last fall": _season(9),
    "last winter": _season(12),
    "last christmas": _christmas,
    **{f"last {name}": _last_weekday(i) for i, name in enumerate(_WEEKDAYS_EN)},
}

_ZH_FIXED: dict[str, _Resolve] = {
    "今天": _day(0),
    "今日": _day(0),
    "昨天": _day(-1),
    "昨日": _day(-1),
    "前天": _day(-2),
    "大前天": _day(-3),
    "今早": _part_of_day(0, _WIDTHS.morning),
    "今晨": _part_of_day(0, _WIDTHS.morning),
    "今天早上": _part_of_day(0, _WIDTHS.morning),
    "今天上午": _part_of_day(0, _WIDTHS.morning),
    "今天下午": _part_of_day(0, _WIDTHS.afternoon),
    "今晚": _part_of_day(0, _WIDTHS.night),
    "今夜": _part_of_day(0, _WIDTHS.night),
    "今天晚上": _part_of_day(0, _WIDTHS.night),
    "昨天早上": _part_of_day(-1, _WIDTHS.morning),
    "昨天上午": _part_of_day(-1, _WIDTHS.morning),
    "昨天下午": _part_of_day(-1, _WIDTHS.afternoon),
    "昨晚": _part_of_day(-1, _WIDTHS.night),
    "昨夜": _part_of_day(-1, _WIDTHS.night),
    "昨天晚上": _part_of_day(-1, _WIDTHS.night),
    "上周": _week(-1),
    "上一周": _week(-1),
    "上个周": _week(-1),
    "上星期": _week(-1),
    "上个星期": _week(-1),
    "上礼拜": _week(-1),
    "上个礼拜": _week(-1),
    "这周": _week(0),
    "本周": _week(0),
    "这星期": _week(0),
    "这个星期": _week(0),
    "这礼拜": _week(0),
    "这个礼拜": _week(0),
    "上个月": _month(-1),
    "上月": _month(-1),
    "上一个月": _month(-1),
    "这个月": _month(0),
    "这月": _month(0),
    "本月": _month(0),
    "今年": _year(0),
    "去年": _year(-1),
    "前年": _year(-2),
    "大前年": _year(-3),
    "周末": _latest_weekend,
    "这周末": _weekend(0),
    "本周末": _weekend(0),
    "这个周末": _weekend(0),
    "上周末": _weekend(-1),
    "上个周末": _weekend(-1),
    "最近": _rolling(_WIDTHS.recently),
    "近来": _rolling(_WIDTHS.recently),
    "近期": _rolling(_WIDTHS.recently),
    "这几天": _rolling(_WIDTHS.these_days),
    "这些天": _rolling(_WIDTHS.these_days),
    "这两天": _rolling(_WIDTHS.these_days),
    "前几天": _ago(_WIDTHS.few, "day"),
    "前两天": _ago(_WIDTHS.few, "day"),
    "刚才": _rolling(_WIDTHS.just_now),
    "刚刚": _rolling(_WIDTHS.just_now),
}


_Tree = dict[str, "_Tree"]


def _trie(phrases: Sequence[str]) -> str:
    """A pattern matching exactly the phrases, spaces as 1–4 spaces, as a prefix tree.

    Each position tries one branch per character rather than every phrase, so a text made of
    phrase prefixes ("今上这今上这…") is still read in linear time; a phrase that is a prefix of
    another is an optional tail, tried longest first.
    """
    tree: _Tree = {}
    for phrase in phrases:
        node = tree
        for ch in phrase:
            node = node.setdefault(ch, {})
        node[""] = {}  # the phrase may end here

    def emit(node: _Tree) -> str:
        branches = [(_SP if ch == " " else re.escape(ch)) + emit(child)
                    for ch, child in node.items() if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if "" in node else body

    return emit(tree)


_EN_FIXED_RE = re.compile(f"{_L}{_trie(list(_EN_FIXED))}{_R}", re.IGNORECASE)
_ZH_FIXED_RE = re.compile(_trie(list(_ZH_FIXED)))


def _en_key(text: str) -> str:
    return " ".join(text.casefold().split())


_EN_WORDS: dict[str, float] = {
    name: float(i)
    for i, name in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_EN_NUM = (
    rf"(?P<n>\d+|a{_SP}couple(?:{_SP}of)?|couple(?:{_SP}of)?|a{_SP}few|few|several|an?|"
    + "|".join(sorted(_EN_WORDS, key=len, reverse=True))
    + ")"
)
_EN_UNIT = r"(?P<u>hour|day|week|month|year|decade)s?"
_EN_AGO_RE = re.compile(rf"{_L}{_EN_NUM}{_SP}{_EN_UNIT}{_SP}ago{_R}", re.IGNORECASE)
_EN_WITHIN_RE = re.compile(
    rf"{_L}(?:the{_SP})?(?:last|past|previous){_SP}{_EN_NUM}{_SP}{_EN_UNIT}{_R}", re.IGNORECASE
)

_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
              "七": 7, "八": 8, "九": 9}
_ZH_TENS = {"十": 10, "百": 100, "千": 1000}
_ZH_NUMERAL = "零〇一二两三四五六七八九十百千"
_ZH_NUM = rf"(?<![\d{_ZH_NUMERAL}几])(?P<n>\d+|[{_ZH_NUMERAL}]{{1,8}}几?|好几|几|半)"
_ZH_UNIT = r"(?P<u>个?小时|天|日|个?星期|个?礼拜|周|个月|年)"
_ZH_AGO_RE = re.compile(rf"{_ZH_NUM}\s{{0,2}}{_ZH_UNIT}多?(?:之|以)?前")
_ZH_WITHIN_RE = re.compile(rf"(?:最近|过去|近)的?{_ZH_NUM}\s{{0,2}}{_ZH_UNIT}")
_ZH_UNITS = {"小时": "hour", "天": "day", "日": "day", "星期": "week", "礼拜": "week",
             "周": "week", "月": "month", "年": "year"}

# 上周三, 上个星期天, 这周五 (English "last Monday" is in _EN_FIXED). "上周一起…" is "together
# last week", not "last Monday", so 一 starting a word is left to 上周.
_ZH_WEEKDAY_RE = re.compile(
    r"(?P<w>上|这|本)个?(?:周|星期|礼拜)(?P<d>一(?![起直下次样些定般切共边])|[二三四五六日天])"
)


def _count_en(text: str) -> tuple[float, float] | None:
    words = _en_key(text)
    if words.isdecimal():
        return _digits(words)
    if words in _EN_WORDS:
        value = _EN_WORDS[words]
        return value, value
    if words.startswith(("a couple", "couple")):
        return 2.0, 2.0
    if words in ("a few", "few"):
        return _WIDTHS.few
    if words == "several":
        return _WIDTHS.several
    if words in ("a", "an"):
        return 1.0, 1.0
    return None


def _digits(text: str) -> tuple[float, float]:
    """A digit run as a count; anything past 7 digits is "very many" (clamped later)."""
    value = float(int(text)) if len(text) <= 7 else 1e7
    return value, value


def _zh_int(text: str) -> int | None:
    """一 → 1, 十五 → 15, 二十 → 20, 两百零五 → 205; None for a run that is not one number."""
    total, digit, last_place = 0, -1, 10**6
    for ch in text:
        if ch in ("零", "〇"):
            continue
        if ch in _ZH_DIGITS:
            if digit >= 0:
                return None
            digit = _ZH_DIGITS[ch]
            continue
        place = _ZH_TENS[ch]
        if place >= last_place:
            return None
        total += (digit if digit >= 0 else 1) * place
        digit, last_place = -1, place
    return total + max(digit, 0)


def _count_zh(text: str) -> tuple[float, float] | None:
    if text.isdecimal():
        return _digits(text)
    if text == "半":
        return 0.5, 0.5
    if text == "几":
        return _WIDTHS.few
    if text == "好几":
        return _WIDTHS.several
    if text.endswith("几"):  # 十几 → 11–19, 二十几 → 21–29
        base = _zh_int(text[:-1]) if text[-2:-1] == "十" else None
        return None if base is None else (base + 1.0, base + 9.0)
    if len(text) == 2 and text[0] in _ZH_DIGITS and text[1] in _ZH_DIGITS:  # 三四天 → 3–4
        low, high = _ZH_DIGITS[text[0]], _ZH_DIGITS[text[1]]
        return (float(low), float(high)) if high == low + 1 else None
    value = _zh_int(text)
    return None if value is None else (float(value), float(value))


def _zh_unit(text: str) -> str:
    return _ZH_UNITS[text.lstrip("个")]


_Candidate = tuple[int, int, _Resolve]


def _candidates(text: str) -> Iterator[_Candidate]:
    """Every phrase any pattern reads, as (start, end, resolver); overlaps are settled later."""
    for m in _EN_FIXED_RE.finditer(text):
        resolve = _EN_FIXED.get(_en_key(m.group()))  # None only for an odd case fold
        if resolve is not None:
            yield m.start(), m.end(), resolve
    for m in _ZH_FIXED_RE.finditer(text):
        yield m.start(), m.end(), _ZH_FIXED[m.group()]
    for pattern, count_of, unit_of, make in (
        (_EN_AGO_RE, _count_en, str.lower, _ago),
        (_EN_WITHIN_RE, _count_en, str.lower, _within),
        (_ZH_AGO_RE, _count_zh, _zh_unit, _ago),
        (_ZH_WITHIN_RE, _count_zh, _zh_unit, _within),
    ):
        for m in pattern.finditer(text):
            count = count_of(m.group("n"))
            unit = unit_of(m.group("u")).removesuffix("s")
            if count is not None and unit in _UNIT_S:
                yield m.start(), m.end(), make(count, unit)
    for m in _ZH_WEEKDAY_RE.finditer(text):
        weeks = -1 if m.group("w") == "上" else 0
        yield m.start(), m.end(), _day_of_week(weeks, _WEEKDAYS_ZH[m.group("d")[0]])


def _windows(text: str, now: datetime) -> tuple[TimeWindow, ...]:
    """The phrases in reading order, a longer one winning over those inside it ("上周末" is
    not also "上周" and "周末"), each resolved once, identical windows kept once."""
    found = sorted(_candidates(text), key=lambda c: (c[0], -c[1]))
    windows: list[TimeWindow] = []
    seen: set[tuple[datetime, datetime]] = set()
    taken_to = 0
    for looked, (start, end, resolve) in enumerate(found):
        if looked >= _MAX_PHRASES or len(windows) >= _MAX_WINDOWS:
            break
        if start < taken_to:
            continue
        taken_to = end
        try:
            low, high = resolve(now)
            high = max(high, low + _WIDTHS.minimum)
        except (OverflowError, ValueError):  # a date before year 1 or after 9999
            continue
        if (low, high) not in seen:
            seen.add((low, high))
            windows.append(TimeWindow(low, high, text[start:end]))
    return tuple(windows)


# The "latest" cue: words that ask for a fact's current state. A word that names the state
# ("latest", "current", 最新) asks it wherever it stands, a noun phrase included ("my
# latest phone"). An adverb of the state ("now", "still", 现在, 还是) asks it only in a
# question: in a statement it is how the speaker feels ("I'm still scared", 我还是很担心),
# which asks for no newer memory over an older one.
_LATEST_EN_RE = re.compile(
    rf"{_L}(?:latest|current|most{_SP}recent(?:ly)?){_R}", re.IGNORECASE)
_STATE_EN_RE = re.compile(
    rf"{_L}(?:(?P<not>just{_SP}now)|right{_SP}now|currently|nowadays|now|these{_SP}days|"
    rf"still|at{_SP}the{_SP}moment|anymore){_R}",
    re.IGNORECASE,
)
_LATEST_ZH_RE = re.compile(r"最新|当前")
_STATE_ZH_RE = re.compile(r"现在|目前|如今|还在|还是|眼下|这阵子")
# A sentence (up to its end mark) and whether it is a question: a question mark, an English
# question word anywhere ("when" only first: elsewhere it joins clauses) or an auxiliary
# first, a Chinese question word or particle. A point between digits ("2.5 mg") is a
# decimal point, not a sentence's end; the two branches never match the same character,
# so the scan stays linear.
_SENTENCE_RE = re.compile(r"(?:[^.!?。！？\n]|(?<=\d)\.(?=\d))+[.!?。！？]*")
_QUESTION_EN_RE = re.compile(
    rf"{_L}(?:what|where|who|whom|whose|which|why|how){_R}|"
    r"^\W*(?:when|do|does|did|is|are|am|was|were|have|has|had|can|could|will|would|"
    r"should|shall|may|might|must)\b",
    re.IGNORECASE,
)
_QUESTION_ZH_RE = re.compile(
    r"吗|呢|什么|哪|谁|几|多少|怎么|怎样|是否|是不是|有没有|为什么|为何|多久")


def _is_question(sentence: str) -> bool:
    s = sentence.strip()
    return (s.endswith(("?", "？")) or bool(_QUESTION_EN_RE.search(s))
            or bool(_QUESTION_ZH_RE.search(s)))


def _asks_latest(text: str) -> bool:
    """Whether the query wants a fact's current state: a word that names it anywhere, or an
    adverb of it in a question ("just now" is a time, not a state)."""
    if _LATEST_EN_RE.search(text) or _LATEST_ZH_RE.search(text):
        return True
    for match in _SENTENCE_RE.finditer(text):
        sentence = match.group()
        if not _is_question(sentence):
            continue
        if _STATE_ZH_RE.search(sentence) or any(
                m.group("not") is None for m in _STATE_EN_RE.finditer(sentence)):
            return True
    return False


def read_time_cues(query: str, as_of: datetime) -> TimeCues:
    """The windows `query` names, resolved against `as_of`, and whether it asks for the latest.

    A naive `as_of` is taken as UTC. Windows come in the order written, at most `_MAX_WINDOWS`
    distinct ones; a query naming no period has none. Never raises on any `str`.
    """
    now = as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)
    text = query[:_MAX_CHARS]
    return TimeCues(windows=_windows(text, now), latest=_asks_latest(text))


def window_closeness(occurred: np.ndarray, windows: Sequence[TimeWindow]) -> np.ndarray:
    """For each memory time (epoch seconds, float64; +inf or NaN = unknown time), a value in
    [0, 1]: 1 inside any window, exp(−distance / length) outside, distance to the nearest edge
    and length of that window, so a fuzzy month-long window forgives a day's miss and a one-day
    window does not. The best window counts. Unknown times, and every time when there are no
    windows, get 0: a boost needs evidence. The result has `occurred`'s shape; the loop is over
    windows (at most a handful), never over memories.
    """
    times = np.asarray(occurred, dtype=np.float64)
    known = np.isfinite(times)
    safe = np.where(known, times, 0.0)
    best = np.zeros(times.shape, dtype=np.float64)
    for window in windows:
        start, end = window.start.timestamp(), window.end.timestamp()
        distance = np.maximum(np.maximum(start - safe, safe - end), 0.0)
        best = np.maximum(best, np.exp(-distance / (end - start)))
    result: np.ndarray = np.where(known, best, 0.0)
    return result


def newness(occurred: np.ndarray) -> np.ndarray:
    """For the "latest" cue: each memory's newness among the given candidates, in [0, 1], by
    rank so that one very old outlier does not squash the rest: 1 for the newest, falling
    linearly with the rank of its time to 0 for the oldest; equal times share a rank. Unknown
    times (inf/NaN) get 0; a single known time, or all equal, get 1. Shape is preserved.
    """
    times = np.asarray(occurred, dtype=np.float64)
    known = np.isfinite(times)
    result = np.zeros(times.shape, dtype=np.float64)
    if not known.any():
        return result
    distinct, rank = np.unique(times[known], return_inverse=True)
    if distinct.size == 1:
        result[known] = 1.0
    else:
        result[known] = rank.reshape(-1) / (distinct.size - 1)
    return result
