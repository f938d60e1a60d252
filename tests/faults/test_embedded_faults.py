"""Embedded mode (`memoryd up` as a subprocess): the stack SIGKILLed and restarted, Redis
restarted, the embedding provider gone, eight worker threads on one user's repeated facts.
Redis gone at a chosen point of a job: tests/faults/test_redis_away.py."""

from __future__ import annotations

from pathlib import Path

from ops.chaos.common import Row
from ops.chaos.embedded import (
    concurrent_workers,
    embedder_unreachable,
    redis_restarted,
    stack_killed_and_restarted,
)


def exactly_once(row: Row, expected: int) -> None:
    assert (row.expected, row.found, row.duplicates, row.lost) == (expected, expected, 0, 0), row


def test_killed_stack_requeues_its_unacked_tasks_at_start(tmp_path: Path) -> None:
    # The visibility timeout stays at its default (minutes): the scenario waits at most
    # 120 s, so finishing at all shows the tasks were requeued at start, not timed out.
    row = stack_killed_and_restarted(tmp_path, n=6)
    exactly_once(row, 6)


def test_redis_restart_loses_no_queued_job(tmp_path: Path) -> None:
    row = redis_restarted(tmp_path, n=20)
    exactly_once(row, 20)


def test_embedder_down_then_back(tmp_path: Path) -> None:
    # task_max_retries 0: only the separate budget for unavailable dependencies lets the
    # jobs ride out the outage.
    row = embedder_unreachable(tmp_path, n=4, outage_s=1.0, task_max_retries=0)
    exactly_once(row, 4)


def test_eight_threads_store_each_repeated_fact_once(tmp_path: Path) -> None:
    row = concurrent_workers(tmp_path, n=48, threads=8)
    exactly_once(row, row.expected)
    assert row.expected >= 10
