"""The context block: which language it is written in, how a memory reads, what fits the budget.

Pure functions, no I/O: `shared.context` feeds them search hits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from shared.schemas import BlockLanguage

HEADERS = {
    BlockLanguage.EN: "Relevant memories about the user (most relevant first):",
    BlockLanguage.ZH: "关于用户的相关记忆（按相关性排序）：",
}

# An ideograph carries about as much as 2.5 Latin letters (Chinese text runs well under half
# the length of its English translation). Counting raw characters would call most Chinese
# sentences with an English term in them ("帮我debug一下这个function") English.
IDEOGRAPH_WEIGHT = 2.5
# A script dominates when it has at least this share of the weighted letters; below that
# the text is mixed and the query decides.
DOMINANT_SHARE = 2 / 3

T = TypeVar("T")


_IDEOGRAPH = re.compile(
    "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"  # CJK ideographs
)
# ASCII plus Latin-1 and Latin Extended-A/B letters (é, ß, ł), without × and ÷.
_LATIN = re.compile("[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f]")


def script_weights(text: str) -> tuple[float, float]:
    """(weighted CJK ideographs, Latin letters) in `text`."""
    return len(_IDEOGRAPH.findall(text)) * IDEOGRAPH_WEIGHT, float(len(_LATIN.findall(text)))


def _leaning(text: str) -> BlockLanguage | None:
    zh, en = script_weights(text)
    if zh > en:
        return BlockLanguage.ZH
    if en > zh:
        return BlockLanguage.EN
    return None


def detect_language(query: str, user_messages: Sequence[str] = ()) -> BlockLanguage:
    """The dominant script of the query and the user's recent messages.

    Mixed text (neither script has two thirds) and ties go to the query's own leaning; a
    query with neither script, or an exact tie in it, gives English.
    """
    zh, en = script_weights("\n".join([query, *user_messages]))
    total = zh + en
    if total > 0 and zh / total >= DOMINANT_SHARE:
        return BlockLanguage.ZH
    if total > 0 and en / total >= DOMINANT_SHARE:
        return BlockLanguage.EN
    return _leaning(query) or BlockLanguage.EN


def one_line(content: str) -> str:
    # A memory with line breaks would read as several entries; the words are kept as they are.
    return " ".join(content.split())


def format_line(content: str, occurred_at: datetime) -> str:
    """`- [YYYY-MM-DD] content`, the UTC date, the same in both languages."""
    day = occurred_at.astimezone(UTC).date().isoformat()
    return f"- [{day}] {one_line(content)}"


def render(language: BlockLanguage, lines: Sequence[str]) -> str:
    """The header and one line per memory; no memories, no block (not a lone header)."""
    if not lines:
        return ""
    return "\n".join([HEADERS[language], *lines])


@dataclass(frozen=True)
class Packed(Generic[T]):
    block: str
    tokens: int
    kept: list[T]
    omitted: int


# How far a block's count may stray from the sum of its parts' counts: tokenizers can merge
# (or split) a token or two where lines join. Beyond it, a decision needs no exact count.
JOIN_SLACK = 4


def pack(
    language: BlockLanguage,
    entries: Iterable[tuple[T, str]],
    budget: int,
    count: Callable[[str], int],
) -> Packed[T]:
    """Add entries (item, line) in the given order while the whole block stays in budget.

    An entry that does not fit is skipped and counted, and a later, shorter one may still
    fit. `tokens` is always the exact count of the returned block, never above `budget`.

    Counting the whole block for every entry is quadratic (seconds for 50 long memories), so
    each line is counted once and added to a running total; only entries near the edge get
    the block counted exactly. If the sum misled anyway, the exact way decides.
    """
    entries = list(entries)
    kept: list[T] = []
    lines: list[str] = []
    omitted = 0
    running = count(HEADERS[language])
    running_is_exact = True
    for item, line in entries:
        estimate = running + count("\n" + line)
        if estimate > budget - JOIN_SLACK and not running_is_exact:
            running, running_is_exact = count(render(language, lines) or HEADERS[language]), True
            estimate = running + count("\n" + line)
        if estimate > budget + JOIN_SLACK:
            omitted += 1
            continue
        if estimate > budget - JOIN_SLACK:
            exact = count(render(language, [*lines, line]))
            if exact > budget:
                omitted += 1
                continue
            running, running_is_exact = exact, True
        else:
            running, running_is_exact = estimate, False
        kept.append(item)
        lines.append(line)
    block = render(language, lines)
    tokens = count(block)
    if tokens > budget:
        return pack_exactly(language, entries, budget, count)
    return Packed(block, tokens, kept, omitted)


def pack_exactly(
    language: BlockLanguage,
    entries: Iterable[tuple[T, str]],
    budget: int,
    count: Callable[[str], int],
) -> Packed[T]:
    """`pack` counting the whole block for every entry: slow, exact."""
    kept: list[T] = []
    lines: list[str] = []
    omitted = 0
    tokens = 0
    for item, line in entries:
        size = count(render(language, [*lines, line]))
        if size <= budget:
            kept.append(item)
            lines.append(line)
            tokens = size
        else:
            omitted += 1
    return Packed(render(language, lines), tokens, kept, omitted)
