"""Failed jobs are listed per tenant (reason, attempts, time, payload reference) and a
retry sends the same arguments again under the same job id."""

from __future__ import annotations

import time
from typing import Any

import httpx
from helpers import save, wait_job

from memoryd.jobs.enqueue import submit
from memoryd.jobs.names import TaskName
from memoryd.records.commands import UpdateCommand
from memoryd.records.identity import content_hash, memory_id
from memoryd.records.models import utcnow
from memoryd.records.schemas import UpdateRequest


def failing_update(stack: Any, user: str, content: str) -> tuple[str, str]:
    """An edit of a memory that does not exist yet: the worker fails it (not found)."""
    target = memory_id("tenant-a", user, "global", None, content_hash(content))
    command = UpdateCommand(tenant_id="tenant-a", user_id=user, received_at=utcnow(),
                            memory_id=target, changes=UpdateRequest(importance=9, tags=["猫"]))
    rt = stack.runtime
    return submit(rt.jobs, rt.celery, TaskName.UPDATE, command).job_id, target


def all_failed(api: httpx.Client, limit: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    for _ in range(1000):
        params: dict[str, Any] = {"status": "failed", "limit": limit}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/v1/jobs", params=params)
        assert page.status_code == 200, page.text
        items += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if not cursor:
            return items
    raise AssertionError("pagination did not end")


def test_failed_job_is_listed_and_retried(stack: Any, api: httpx.Client, api_b: httpx.Client,
                                          user: str) -> None:
    content = "My cat Mimi is nine years old"
    job_id, target = failing_update(stack, user, content)
    failed = wait_job(api, job_id)
    assert failed["status"] == "failed" and failed["error"]["code"] == "not_found"

    listed = {j["job_id"]: j for j in all_failed(api, 50)}
    entry = listed[job_id]
    assert entry["kind"] == "memory.update" and entry["user_id"] == user
    assert entry["attempts"] == 1 and entry["error"]["code"] == "not_found"
    assert entry["failed_at"] and entry["payload_ref"] == f"memoryd:job:{job_id}#payload"
    assert entry["payload_bytes"] > 0
    # The payload is where the reference says, and is the task's arguments.
    kept = stack.runtime.redis.hget(f"memoryd:job:{job_id}", "payload")
    assert len(kept) == entry["payload_bytes"] and target.encode() in kept
    # Another tenant sees neither the job nor the listing entry, and cannot retry it.
    assert job_id not in {j["job_id"] for j in all_failed(api_b, 50)}
    assert api_b.post(f"/v1/jobs/{job_id}/retry").status_code == 404

    # The cause goes away; the retry runs the same edit under the same id.
    saved = save(api, user, content).json()["memory"]
    assert saved["id"] == target
    retried = api.post(f"/v1/jobs/{job_id}/retry")
    assert retried.status_code == 202 and retried.json() == {"job_id": job_id,
                                                             "status": "queued"}
    done = wait_job(api, job_id)
    assert done["status"] == "succeeded" and done["attempts"] == 2
    memory = api.get(f"/v1/memories/{target}", params={"user_id": user}).json()
    assert memory["importance"] == 9 and memory["tags"] == ["猫"]
    assert job_id not in {j["job_id"] for j in all_failed(api, 50)}
    assert stack.runtime.redis.hget(f"memoryd:job:{job_id}", "payload") is None
    # Only a failed job is retried.
    again = api.post(f"/v1/jobs/{job_id}/retry")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    assert api.post("/v1/jobs/no-such-job/retry").status_code == 404


def test_failed_jobs_page_newest_first(stack: Any, api: httpx.Client, user: str) -> None:
    mine = []
    for i in range(3):
        job_id, _ = failing_update(stack, user, f"fact number {i} about 北京")
        assert wait_job(api, job_id)["status"] == "failed"
        mine.append(job_id)
        time.sleep(0.01)
    paged = all_failed(api, 1)
    ids = [j["job_id"] for j in paged]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if i in mine] == list(reversed(mine))
    times = [j["failed_at"] for j in paged]
    assert times == sorted(times, reverse=True)
    bad = api.get("/v1/jobs", params={"status": "failed", "cursor": "nope!"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "cursor"
    other = api.get("/v1/jobs", params={"status": "running"})
    assert other.status_code == 422 and other.json()["error"]["field"] == "status"
