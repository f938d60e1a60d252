"""The bench's questions per stack: distinct within a stack, and the run for users with no
memories takes extra questions without moving the ones the timed runs get."""

from __future__ import annotations

import pytest

from ops.bench.run import parse_args
from ops.bench.search import question_slices

QUESTIONS = [f"question {i}?" for i in range(50)]


def test_extra_questions_follow_the_timed_ones_without_moving_them() -> None:
    plain = question_slices(QUESTIONS, 2, 20)
    with_extra = question_slices(QUESTIONS, 2, 20, extra=10)
    for before, after in zip(plain, with_extra, strict=True):
        assert after[:20] == before
        assert len(after) == 30 and len(set(after)) == 30  # none repeats within a stack


def test_too_many_questions_per_stack_is_refused() -> None:
    with pytest.raises(ValueError, match="51 searches per size"):
        question_slices(QUESTIONS, 1, 45, extra=6)


def test_empty_n_defaults_on_and_refuses_a_negative_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse_args([]).empty_n == 400
    assert parse_args(["--empty-n", "0"]).empty_n == 0
    with pytest.raises(SystemExit):
        parse_args(["--empty-n", "-1"])
    assert "--empty-n must be 0 or more" in capsys.readouterr().err
