"""Time cues in a hybrid search's query, through the real gateway, worker and store: a
question about what is current puts the newest version of a fact first, and a relative
time ("two months ago", 上个月) favours memories from then, softly."""

from __future__ import annotations

from typing import Any

import httpx
from helpers import save, search


def _ids(api: httpx.Client, user: str, items: dict[str, str]) -> dict[str, str]:
    ids = {}
    for content, occurred in items.items():
        saved = save(api, user, content, occurred_at=occurred)
        assert saved.status_code == 201, saved.text
        ids[saved.json()["memory"]["id"]] = content
    return ids


def _ranked(api: httpx.Client, user: str, query: str, as_of: str) -> list[dict[str, Any]]:
    return search(api, user, query, as_of=as_of, explain=True, top_k=5)


def test_a_question_about_now_puts_the_newest_version_first(api: httpx.Client,
                                                            user: str) -> None:
    ids = _ids(api, user, {"I live in Berlin with my two cats": "2024-01-10T09:00:00Z",
                           "I live in Lisbon with my two cats": "2025-06-01T09:00:00Z"})
    # Years later, recency no longer tells the two apart: the cue does.
    hits = _ranked(api, user, "Where do I live now?", "2031-01-01T00:00:00Z")
    assert [ids[h["memory"]["id"]] for h in hits[:2]] == [
        "I live in Lisbon with my two cats", "I live in Berlin with my two cats"]
    assert [h["explanation"]["time"] for h in hits[:2]] == [1.0, 0.0]
    # Without a cue the time part is 0 for both.
    plain = _ranked(api, user, "Where do I live?", "2031-01-01T00:00:00Z")
    assert {h["explanation"]["time"] for h in plain} == {0.0}


def test_a_relative_time_favours_memories_from_then(api: httpx.Client, user: str) -> None:
    # Two memories about as relevant to the question: the time it names tells them apart.
    ids = _ids(api, user, {"I went hiking in the hills with Anna": "2025-05-14T09:00:00Z",
                           "I went hiking in the hills with Ben": "2025-03-20T09:00:00Z"})
    as_of = "2025-05-20T12:00:00Z"
    for query in ("Who did I go hiking with two months ago?", "我两个月前和谁去徒步了?"):
        hits = _ranked(api, user, query, as_of)
        first, second = hits[0], hits[1]
        assert ids[first["memory"]["id"]] == "I went hiking in the hills with Ben", query
        assert first["explanation"]["time"] == 1.0
        assert 0.0 < second["explanation"]["time"] < 0.5  # outside the window: soft
    # The cue never hides a memory: both are still found.
    assert len(_ranked(api, user, "hiking two months ago", as_of)) == 2
