"""Rescoring boosts from a candidate's raw payload (shared/scoring.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from shared.scoring import Weights, boosts

AS_OF = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("stored", [
    "2024-04-01T12:00:00Z",  # how memoryd stores times
    "2024-04-01T14:00:00+02:00",  # the same instant with an offset
    "2024-04-01T12:00:00.000000+00:00",
])
def test_recency_halves_over_the_half_life_whatever_the_offset(stored: str) -> None:
    parts = boosts({"occurred_at": stored, "importance": 5}, AS_OF, Weights(half_life_days=30))
    assert parts["recency"] == pytest.approx(0.5)


def test_recency_is_relative_to_as_of() -> None:
    payload = {"occurred_at": "2024-04-01T12:00:00Z"}
    ages = [boosts(payload, AS_OF + timedelta(days=d), Weights(half_life_days=30))["recency"]
            for d in (-30, 0, 30)]
    assert ages == pytest.approx([1.0, 0.5, 0.25])  # a memory from the future counts as new


def test_importance_and_access_boosts() -> None:
    parts = boosts({"occurred_at": "2024-05-01T12:00:00Z", "importance": 10, "access_count": 5},
                   AS_OF, Weights())
    assert parts["importance"] == 1.0
    assert parts["access"] == pytest.approx(1 - math.exp(-1))
    bare = boosts({"occurred_at": "2024-05-01T12:00:00Z"}, AS_OF, Weights())
    assert bare == {"recency": 1.0, "importance": pytest.approx(4 / 9), "access": 0.0}
