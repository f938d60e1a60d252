"""One tenant's backlog never holds up another's writes (issue 19, item 11).

Bulk work (imports, interactions marked `backfill`) runs on the bulk queue with worker
threads of its own (`bulk_worker_concurrency`, 2 by default); saves, edits, forgets
and ordinary interactions keep the other threads. The checks are about order, not speed:
the save is done while the other tenant's bulk jobs are still waiting their turn.
`ops/bench/fairness.py` measures the latency.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
from helpers import wait_job

PLACES = ["Lisbon", "Osaka", "Quito", "Tromsø", "Hanoi", "Cusco", "Tbilisi", "Perth"]
THINGS = ["sourdough", "bouldering", "the cello", "birdwatching", "ceramics", "chess"]


def long_turn(i: int, j: int, sentences: int = 8) -> str:
    """A long chat turn, different for every (i, j): a history replay's typical message."""
    parts = [
        f"On day {i}.{j}.{k} I was in {PLACES[(i + k) % len(PLACES)]} practising "
        f"{THINGS[(j + k) % len(THINGS)]} with a friend who lives there, number {i * 31 + k}."
        for k in range(sentences)
    ]
    return " ".join(parts)


def _statuses(api: httpx.Client, job_ids: list[str]) -> list[str]:
    return [str(api.get(f"/v1/jobs/{job_id}").json()["status"]) for job_id in job_ids]


def _drain(api: httpx.Client, job_ids: list[str]) -> None:
    """Let the backlog finish, so the session's stack is idle for the next test."""
    for job_id in job_ids:
        done = wait_job(api, job_id, 180)
        assert done["status"] == "succeeded", done


def _save_b(api_b: httpx.Client) -> httpx.Response:
    return api_b.post("/v1/memories", params={"wait": 20}, json={
        "user_id": f"saver-{uuid.uuid4().hex[:8]}", "content": "Remember: my locker code is 4711"})


def test_a_save_is_done_while_another_tenants_backfill_waits(
    stack: Any, api: httpx.Client, api_b: httpx.Client, user: str
) -> None:
    job_ids = []
    for i in range(12):
        answer = api.post("/v1/interactions", json={
            "user_id": user, "extract": "raw", "backfill": True,
            "messages": [{"role": "user", "content": long_turn(i, j)} for j in range(2)],
        })
        assert answer.status_code == 202, answer.text
        job_ids.append(answer.json()["job_id"])
    try:
        saved = _save_b(api_b)
        assert saved.status_code == 201, saved.text
        assert "queued" in _statuses(api, job_ids), "the save waited for the backfill"
    finally:
        _drain(api, job_ids)


def test_a_save_is_done_while_another_tenants_imports_wait(
    stack: Any, api: httpx.Client, api_b: httpx.Client, user: str
) -> None:
    # More import jobs than the stack has write threads (4): on one shared queue the save
    # would wait for every import ahead of it to be taken.
    job_ids = []
    for i in range(6):
        records = [{"content": long_turn(i, j, sentences=4)} for j in range(10)]
        answer = api.post("/v1/import", params={"user_id": user}, json=records)
        assert answer.status_code == 202, answer.text
        job_ids.append(answer.json()["job_id"])
    try:
        saved = _save_b(api_b)
        assert saved.status_code == 201, saved.text
        assert "queued" in _statuses(api, job_ids), "the save waited for the imports"
    finally:
        _drain(api, job_ids)


def test_one_tenants_writes_past_its_share_run_on_both_bulk_threads(
    stack: Any, api: httpx.Client, user: str
) -> None:
    # A chat server's burst: one tenant, many users, no marker. Two writes hold the
    # tenant's share of the memory queue; the rest overflow to the bulk queue, whose two
    # threads (one per background model lane) both take them: four jobs run at once.
    job_ids = []
    for i in range(8):
        answer = api.post("/v1/interactions", json={
            "user_id": f"{user}-{i}", "extract": "raw",
            "messages": [{"role": "user", "content": long_turn(i, j, 16)} for j in range(3)],
        })
        assert answer.status_code == 202, answer.text
        job_ids.append(answer.json()["job_id"])
    try:
        most = 0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            statuses = _statuses(api, job_ids)
            most = max(most, statuses.count("running"))
            if most >= 4 or all(s == "succeeded" for s in statuses):
                break
            time.sleep(0.02)
        assert most == 4, f"at most {most} of one tenant's jobs ran at once"
    finally:
        _drain(api, job_ids)


def test_backfill_must_be_a_boolean(api: httpx.Client, user: str) -> None:
    answer = api.post("/v1/interactions", json={
        "user_id": user, "backfill": "sometimes", "messages": [{"role": "user", "content": "hi"}]})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "backfill"
