"""Fusion and rescoring (shared/retrieval/scoring.py): per payload, and column-wise over
candidates."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from shared.memories.reads import best_candidates
from shared.records.schemas import SearchMode
from shared.retrieval.scoring import (
    BOOSTS,
    Candidates,
    ListScores,
    Weights,
    boost_columns,
    boosts,
    final_score,
    final_scores,
    relevance,
    smooth_by_neighbours,
)
from shared.store.scoring_table import ScoringTable, ranked_lists, union_ids

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


def candidates(dense: list[tuple[str, float]], keyword: list[tuple[str, float]],
               payloads: dict[str, dict[str, object]]) -> Candidates:
    table = ScoringTable()
    table.add(payloads)
    lists = [([i for i, _ in hits], np.array([s for _, s in hits], dtype=np.float64))
             for hits in (dense, keyword)]
    ids = union_ids(lists)
    return Candidates.of(ranked_lists(lists, ids, table.rows_of(ids), table), 0, 1)


WHEN: dict[str, object] = {"occurred_at": "2024-04-01T12:00:00Z"}


def test_linear_fusion_counts_a_missing_list_as_nothing() -> None:
    c = candidates([("both", 0.95), ("dense", 0.85)], [("kw", 8.0), ("both", 24.0)],
                   dict.fromkeys(("both", "dense", "kw"), WHEN))
    assert c.ids == ["both", "dense", "kw"]
    assert c.list_scores(2) == ListScores(None, None, 8.0, 1)
    assert c.list_scores(0) == ListScores(0.95, 1, 24.0, 2)
    w = Weights(keyword_half=8.0)
    rels = relevance(c, SearchMode.HYBRID, "e5-small", w, 0.3)
    assert rels.tolist() == pytest.approx([0.3 * 1.0 + 0.7 * 0.75, 0.3 * 0.5, 0.7 * 0.5])
    assert relevance(c, SearchMode.DENSE, "e5-small", w, 0.3).tolist() == pytest.approx(
        [1.0, 0.5, 0.0])
    assert relevance(c, SearchMode.KEYWORD, "e5-small", w, 0.3).tolist() == pytest.approx(
        [0.75, 0.0, 0.5])


def test_rank_fusion_scores_first_in_both_lists_as_one() -> None:
    c = candidates([("a", 0.9), ("b", 0.8)], [("a", 3.0)], {"a": WHEN, "b": WHEN})
    w = Weights(fusion="rrf", rrf_k=60)
    assert relevance(c, SearchMode.HYBRID, "e5-small", w, 0.3).tolist() == pytest.approx(
        [1.0, (1 / 62) / (2 / 61)])


def test_neighbours_in_the_same_thread_lift_each_other() -> None:
    def turn(thread: str | None, seq: int | None) -> dict[str, object]:
        return {**WHEN, "thread_id": thread, "thread_seq": seq}
    payloads = {"t0": turn("t", 0), "t1": turn("t", 1), "t5": turn("t", 5),
                "u1": turn("u", 1), "none": turn(None, None)}
    c = candidates([(i, 0.9) for i in payloads], [], payloads)
    rels = np.array([0.5, 0.2, 0.9, 0.8, 0.7])
    smoothed = smooth_by_neighbours(c, rels, Weights(neighbour=0.2, neighbour_span=2))
    # t0 and t1 lift each other; t5 is too far, u1 alone in its thread, "none" in none.
    assert smoothed.tolist() == pytest.approx([0.5 + 0.2 * 0.2, 0.2 + 0.2 * 0.5, 0.9, 0.8, 0.7])
    capped = smooth_by_neighbours(c, np.array([1.0, 0.95, 0, 0, 0]), Weights(neighbour=0.2))
    assert capped[:2].tolist() == [1.0, 1.0]


def test_column_boosts_and_final_scores_match_the_per_payload_ones() -> None:
    payloads: dict[str, dict[str, object]] = {
        "old": {"occurred_at": "2024-01-01T00:00:00+05:00", "importance": 9, "access_count": 2},
        "new": {"occurred_at": "2024-05-01T11:00:00Z"},
        "future": {"occurred_at": "2024-06-01T00:00:00Z", "importance": 1, "access_count": 40},
    }
    c = candidates([(i, 0.9) for i in payloads], [], payloads)
    w = Weights(half_life_days=10)
    parts = boost_columns(c, AS_OF, w)
    rels = np.array([0.9, 0.4, 0.6])
    finals = final_scores(rels, parts, w)
    for i, point_id in enumerate(c.ids):
        expected = boosts(payloads[point_id], AS_OF, w)
        assert dict(zip(BOOSTS, parts[i].tolist(), strict=True)) == pytest.approx(expected)
        assert finals[i] == pytest.approx(final_score(float(rels[i]), expected, w))


def test_equal_scores_rank_by_memory_id_whatever_the_list_order() -> None:
    """Keyword lists order equal scores as the store happened to insert them; the ranking
    breaks those ties by memory id, so a search gives the same answer on every run."""
    ids = ["c-memory", "a-memory", "b-memory"]
    rankings = []
    for order in (ids, ids[::-1], [ids[1], ids[2], ids[0]]):
        c = candidates([], [(i, 8.0) for i in order], dict.fromkeys(ids, WHEN))
        final = np.full(len(c.ids), 0.4)
        parts = np.zeros((len(c.ids), 3))
        rankings.append([s.id for s in best_candidates(c, final, final, parts, 3, None)])
    assert rankings == [["a-memory", "b-memory", "c-memory"]] * 3
    # A higher score still comes first, whatever its id.
    c = candidates([], [(i, 8.0) for i in ids], dict.fromkeys(ids, WHEN))
    final = np.array([0.9, 0.4, 0.4])
    top = best_candidates(c, final, final, np.zeros((3, 3)), 2, None)
    assert [s.id for s in top] == ["c-memory", "a-memory"]
