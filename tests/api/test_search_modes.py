"""Search modes, calibrated scores with labels, explanations, filters and access reinforcement."""

from __future__ import annotations

import time

import httpx
import pytest
from helpers import save, search


@pytest.fixture()
def seeded(api: httpx.Client, user: str) -> str:
    for content, occurred, importance in (
        ("Caroline went to the LGBTQ support group on Tuesday", "2023-05-08T10:00:00Z", 5),
        ("Melanie painted a sunrise over the lake last year", "2022-07-01T10:00:00Z", 5),
        ("用户下个月要去杭州出差", "2023-05-20T10:00:00Z", 9),
    ):
        assert save(api, user, content, occurred_at=occurred, importance=importance,
                    type="episodic").status_code == 201
    return user


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_every_mode_finds_the_match(api: httpx.Client, seeded: str, mode: str) -> None:
    hits = search(api, seeded, "When did Caroline go to the LGBTQ support group?", mode=mode,
                  top_k=3)
    assert hits[0]["memory"]["content"].startswith("Caroline went")
    for hit in hits:
        assert 0.0 <= hit["score"] <= 1.0
        assert hit["label"] == ("high" if hit["score"] >= 0.7 else
                                "relevant" if hit["score"] >= 0.5 else "reference")
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_explain_and_min_score(api: httpx.Client, seeded: str) -> None:
    hits = search(api, seeded, "杭州出差", explain=True, top_k=3)
    top = hits[0]
    assert top["memory"]["content"] == "用户下个月要去杭州出差"
    parts = top["explanation"]
    assert parts["dense"] is not None and parts["keyword"] is not None
    assert parts["final"] == pytest.approx(top["score"], abs=1e-5)
    assert parts["importance"] == pytest.approx(8 / 9, abs=1e-6)
    strict = search(api, seeded, "杭州出差", min_score=top["score"] - 1e-6)
    assert [h["memory"]["id"] for h in strict] == [top["memory"]["id"]]
    assert search(api, seeded, "completely unrelated quantum chromodynamics", mode="keyword") == []


def test_time_and_importance_filters(api: httpx.Client, seeded: str) -> None:
    recent = search(api, seeded, "what happened", top_k=10,
                    occurred_after="2023-01-01T00:00:00Z")
    assert all(h["memory"]["occurred_at"] >= "2023-01-01" for h in recent) and len(recent) == 2
    important = search(api, seeded, "what happened", top_k=10, min_importance=8)
    assert [h["memory"]["content"] for h in important] == ["用户下个月要去杭州出差"]


def test_recency_relative_to_as_of(api: httpx.Client, seeded: str) -> None:
    def recency(as_of: str) -> float:
        hit = search(api, seeded, "Melanie painted a sunrise", explain=True, as_of=as_of)[0]
        assert hit["memory"]["content"].startswith("Melanie")
        return float(hit["explanation"]["recency"])

    assert recency("2022-07-02T00:00:00Z") > 0.9 > recency("2023-07-01T00:00:00Z")


def test_access_reinforcement_is_recorded_after_search(api: httpx.Client, seeded: str) -> None:
    def access() -> float:
        hit = search(api, seeded, "Caroline LGBTQ support group", explain=True, top_k=1)[0]
        return float(hit["explanation"]["access"])

    first = access()
    deadline = time.monotonic() + 15
    while access() <= first and time.monotonic() < deadline:
        time.sleep(0.1)
    assert access() > first
