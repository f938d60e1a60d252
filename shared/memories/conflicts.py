"""Conflicts between a new memory and its nearest neighbour, and the versions they leave.

A candidate whose nearest memory (same scope and project, current) scores inside the
conflict band goes to one judge call. `update_old` makes the new memory a new version that
supersedes the old one (kept, marked, out of search); `conflict` keeps both, marked, with
the newer ranked first; `same_fact` refreshes the old one; `unrelated` adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from memoryd.extraction.ask import ask_json
from memoryd.extraction.llm_prompt import judge_messages
from memoryd.llm.base import ChatClient
from memoryd.memories.versions import version_chain
from memoryd.memories.writes import dedup_threshold
from memoryd.platform.settings import Settings
from memoryd.records.schemas import SearchHit

# Measured with e5-small: changed facts score 0.86 ("I live in Berlin" / "I moved to
# Munich") to 0.97 ("I prefer dark mode" / "… light mode"); unrelated facts of one user
# 0.80–0.91. Its band starts at 0.85: an unrelated pair inside costs one judge call, a
# changed fact below it would be kept twice.
DEFAULT_CONFLICT_LOW = {"e5-small": 0.85}


class Verdict(StrEnum):
    SAME_FACT = "same_fact"
    UPDATE_OLD = "update_old"
    CONFLICT = "conflict"
    UNRELATED = "unrelated"


def conflict_band(settings: Settings, embedder: str) -> tuple[float, float]:
    low = settings.conflict_low or DEFAULT_CONFLICT_LOW.get(embedder, 0.80)
    high = settings.conflict_high or dedup_threshold(settings.dedup_threshold, embedder)
    return low, high


def in_band(score: float, band: tuple[float, float], numbers_differ: bool) -> bool:
    """Above the band is a duplicate, unless the numbers differ: "Java 16" / "Java 17"."""
    low, high = band
    return score >= low and (score < high or numbers_differ)


def _verdict(data: dict[str, Any]) -> Verdict:
    value = str(data.get("decision", "")).strip().lower()
    try:
        return Verdict(value)
    except ValueError:
        raise ValueError(f"decision {value!r} is not one of "
                         f"{', '.join(v.value for v in Verdict)}") from None


def judge(client: ChatClient, existing: str, new: str, retries: int) -> Verdict:
    return ask_json(client, judge_messages(existing, new), retries, _verdict, "judge")


def order_conflicts(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """Of two conflicting memories on one page, the newer goes first (at the older's place)."""
    out = list(hits)
    position = {h.memory.id: i for i, h in enumerate(out)}
    for hit in list(out):
        for other_id in hit.memory.conflicts_with:
            i, j = position.get(hit.memory.id), position.get(other_id)
            if i is None or j is None:
                continue
            first, second = (i, j) if i < j else (j, i)
            if out[second].memory.created_at > out[first].memory.created_at:
                out[first], out[second] = out[second], out[first]
                position[out[first].memory.id], position[out[second].memory.id] = first, second
    return out


__all__ = ["Verdict", "conflict_band", "in_band", "judge", "order_conflicts", "version_chain"]
