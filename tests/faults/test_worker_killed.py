"""Server mode: a prefork worker's pool process SIGKILLed mid-job (in a store write, in a
slow remote call, in an LLM extraction's model call); the job is redelivered and completes
with exactly one effect (one point, one ADD audit event); eight worker processes on one
user never store a fact twice."""

from __future__ import annotations

from pathlib import Path

from ops.chaos.llm import worker_killed_in_llm_call
from ops.chaos.server import (
    concurrent_worker_processes,
    worker_killed_in_slow_embedding,
    worker_killed_in_store_write,
)


def test_killed_right_after_the_store_write(tmp_path: Path) -> None:
    row = worker_killed_in_store_write(tmp_path, n=4, kills=2)
    assert row.notes[0] == "2 kills"
    assert (row.expected, row.found, row.duplicates, row.lost) == (4, 4, 0, 0), row


def test_killed_during_a_slow_remote_call(tmp_path: Path) -> None:
    row = worker_killed_in_slow_embedding(tmp_path, n=3, kills=1)
    assert (row.expected, row.found, row.duplicates, row.lost) == (3, 3, 0, 0), row


def test_killed_during_an_llm_call(tmp_path: Path) -> None:
    # One kill at the failpoint before the request, one with the request at the model.
    row = worker_killed_in_llm_call(tmp_path, n=4, kills=2)
    assert row.notes[0] == "2 kills (1 at the failpoint before the request, 1 with the " \
        "request at the model)", row
    # The job killed before its request asked once, the one killed mid-request twice.
    assert row.notes[1] == "model asked 5 times for 4 interactions", row
    assert (row.expected, row.found, row.duplicates, row.lost) == (4, 4, 0, 0), row


def test_eight_worker_processes_store_each_repeated_fact_once(tmp_path: Path) -> None:
    row = concurrent_worker_processes(tmp_path, n=40, processes=8)
    assert (row.found, row.duplicates, row.lost) == (row.expected, 0, 0), row
    assert row.expected >= 10
