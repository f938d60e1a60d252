"""`python -m ops.bench.fusion part`: where the best hits of users with and without the
evidence part (docs/decisions/0029-keyword-statistics-no-one-else-moves.md)."""

from __future__ import annotations

import numpy as np

from ops.bench.fusion import (
    Dumped,
    half_by_mass,
    parting,
    query_mass,
    raw_keyword,
    top_scores,
)


def row(qid: str, keys: list[str], keyword: list[float], relevant: tuple[str, ...],
        other: Dumped | None = None) -> Dumped:
    n = len(keys)
    return Dumped(qid, "c", "q", relevant, keys, np.full(n, np.nan), np.asarray(keyword),
                  np.zeros(n, np.int64), np.arange(1, n + 1), np.zeros((n, 8)), other)


def test_parting_is_where_missed_evidence_equals_passed_others() -> None:
    grid = np.arange(0.0, 20.0, 0.5)
    # Evidence top hits 10, 12, 14, 16; other users' best 2, 4, 6, 11. At 10.5 one of four
    # evidence hits falls below and one of four others passes: the two shares are equal.
    at, error = parting([np.array([10.0, 12, 14, 16])], [np.array([2.0, 4, 6, 11])], grid)
    assert 10.0 < at <= 11.0 and error == 0.25
    # Pooled, each set weighs the same whatever its size.
    big = np.array([1.0] * 100)
    at, _ = parting([np.array([10.0]), np.array([10.0])], [big, np.array([9.0])], grid)
    assert 9.0 < at <= 10.0


def test_top_scores_keep_evidence_top_hits_and_the_other_users_best() -> None:
    theirs = row("q1", ["x", "y"], [3.0, np.nan], ())
    rows = [
        row("q1", ["a", "b"], [9.0, 4.0], ("a",), theirs),  # top hit bears evidence
        row("q2", ["a", "b"], [2.0, 5.0], ("a",), row("q2", [], [], ())),  # it does not
    ]
    evidence, others = top_scores(rows, "e5-small", raw_keyword)
    assert evidence.tolist() == [9.0]
    assert others.tolist() == [3.0, 0.0]


def test_a_querys_mass_grows_with_its_terms_and_sets_the_half_point() -> None:
    short, longer = "Where does Caroline live?", "Where does Caroline live with her cat Luna?"
    assert 0 < query_mass(short) < query_mass(longer)
    assert query_mass("???") == 0.0
    # Decision 0040's half-point: `half` at mass m0, more for a larger query.
    half = half_by_mass(query_mass(short), 0.3)
    asked, asked_more = row("q1", [], [], ()), row("q2", [], [], ())
    asked.query, asked_more.query = short, longer
    assert abs(half(asked) - 11.0) < 1e-9 and half(asked_more) > 11.0
