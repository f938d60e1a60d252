"""Recall, hit and latency arithmetic on hand-made rankings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from memoryd.evaluation import EvalError
from memoryd.evaluation import metrics as mx
from memoryd.evaluation.runner import calibration_of, other_user, parse_name

RANKED = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]


def test_recall_is_the_share_of_relevant_ids_in_the_top_k() -> None:
    assert mx.recall_at(RANKED, ["a", "f"], 5) == 0.5
    assert mx.recall_at(RANKED, ["a", "f"], 10) == 1.0
    assert mx.recall_at(RANKED, ["z"], 10) == 0.0
    assert mx.recall_at(RANKED, ["c", "d", "x"], 5) == pytest.approx(2 / 3)
    assert mx.recall_at(["a", "a"], ["a", "b"], 5) == 0.5  # a repeated id counts once
    with pytest.raises(ValueError):
        mx.recall_at(RANKED, [], 5)


def test_hit_needs_one_relevant_id_in_the_top_k() -> None:
    assert mx.hit_at(RANKED, ["f", "z"], 5) == 0.0
    assert mx.hit_at(RANKED, ["f", "z"], 10) == 1.0
    assert mx.hit_at([], ["a"], 10) == 0.0


def test_shorter_rankings_than_k() -> None:
    assert mx.recall_at(["a"], ["a", "b"], 10) == 0.5


def test_percentile_and_mean() -> None:
    assert mx.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert mx.percentile(list(map(float, range(1, 101))), 95) == pytest.approx(95.05)
    assert mx.percentile([7.0], 95) == 7.0
    assert math.isnan(mx.percentile([], 95))
    assert mx.mean([1.0, 2.0]) == 1.5


def test_summaries_overall_and_per_category() -> None:
    specs = mx.LOCOMO_METRICS
    rows = [
        mx.score_question("q1", "temporal", RANKED, ["a"], 10.0, specs),
        mx.score_question("q2", "temporal", RANKED, ["f", "z"], 20.0, specs),
        mx.score_question("q3", "multi-hop", RANKED, ["z"], 30.0, specs),
    ]
    assert rows[1].scores == {"recall@5": 0.0, "recall@10": 0.5, "hit@10": 1.0}
    overall = mx.summarize_group(rows, specs)
    assert overall.count == 3
    assert overall.metrics == {"recall@5": 0.3333, "recall@10": 0.5, "hit@10": 0.6667}
    groups = mx.summarize_by_category(rows, specs, ["multi-hop", "temporal", "single-hop"])
    assert list(groups) == ["multi-hop", "temporal"]
    assert groups["temporal"].metrics["recall@10"] == 0.75
    assert mx.latency_summary([r.latency_ms for r in rows]) == {"mean_ms": 20.0, "p95_ms": 29.0}
    assert [s.name for s in mx.MADIAL_METRICS] == ["recall@5", "recall@10", "hit@5"]


def test_calibration_counts_labels_of_evidence_top_hits_and_of_another_user() -> None:
    tops = [("D1:1", 0.8), ("D1:2", 0.4), ("D9:9", 0.9), None]
    relevant = [("D1:1",), ("D1:2", "D1:3"), ("D1:1",), ("D1:1",)]
    cal = calibration_of(tops, relevant, [0.2, 0.6, 0.49, 0.1])
    # Two top hits bear evidence (0.8 and 0.4): one is labelled relevant.
    assert cal["evidence_top_hits"] == 2 and cal["top_hit_labelled_relevant"] == 0.5
    # The other user's best was below 0.5 for three of four questions.
    assert cal["other_user_questions"] == 4 and cal["other_user_nothing_relevant"] == 0.75
    empty = calibration_of([None], [("x",)], [])
    assert math.isnan(empty["top_hit_labelled_relevant"])
    assert math.isnan(empty["other_user_nothing_relevant"])


def test_the_other_user_is_the_next_one_and_needs_two() -> None:
    assert other_user(["a", "b", "c"], "a") == "b"
    assert other_user(["a", "b", "c"], "c") == "a"
    assert other_user(["a"], "a") is None
    assert other_user(["a", "b"], "z") is None


def test_a_set_name_is_safe_in_a_file_name() -> None:
    assert parse_name("madial-en") == "madial-en" and parse_name(None) is None
    for bad in ("../x", "MADial", "", "a" * 41, "a b"):
        with pytest.raises(EvalError, match="--name"):
            parse_name(bad)


def test_ndcg_rewards_relevant_turns_by_their_rank() -> None:
    assert mx.ndcg_at(RANKED, ["a"], 10) == 1.0
    assert mx.ndcg_at(RANKED, ["b"], 10) == pytest.approx(1 / math.log2(3))
    # Two relevant, one found at rank 1: DCG 1, ideal 1 + 1/log2(3).
    assert mx.ndcg_at(RANKED, ["a", "z"], 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert mx.ndcg_at(RANKED, ["k"], 10) == 0.0
    assert mx.ndcg_at(["a", "a"], ["a", "b"], 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    with pytest.raises(ValueError):
        mx.ndcg_at(RANKED, [], 10)


def test_sessions_rank_by_their_best_turn_and_recall_all_needs_every_one() -> None:
    turns = ["s1:3", "s2:0", "s1:1", "s3:4", "s4:0", "s5:2", "s6:1"]
    sessions = mx.ranked_groups(turns, lambda key: key.rsplit(":", 1)[0])
    assert sessions == ["s1", "s2", "s3", "s4", "s5", "s6"]
    assert mx.recall_all_at(sessions, ["s1", "s5"], 5) == 1.0
    assert mx.recall_all_at(sessions, ["s1", "s6"], 5) == 0.0
    spec = mx.MetricSpec("session_recall_all", 5)
    assert spec.name == "session_recall_all@5"
    assert spec.score(turns, ["s2:0"], ["s2", "s4"], lambda k: k.rsplit(":", 1)[0]) == 1.0
    with pytest.raises(ValueError):
        spec.score(turns, ["s2:0"], ["s2"])  # no way to tell a turn's session


def test_a_report_given_a_directory_goes_inside_it(tmp_path: Path) -> None:
    """`--out DIR`, an existing directory, says where the report goes, under its default
    file name; any other path is the file itself. A directory used to fail only after the run."""
    from datetime import UTC, datetime

    from memoryd.evaluation.report import default_out_path

    now = datetime(2026, 12, 4, 15, 0, 37, tzinfo=UTC)
    assert default_out_path("chat-lme", now) == Path(
        "bench-results/eval-chat-lme-20261204T150037.json")
    assert default_out_path("lme", now, tmp_path) == tmp_path / "eval-lme-20261204T150037.json"
    assert default_out_path("lme", now, tmp_path / "r.json") == tmp_path / "r.json"
