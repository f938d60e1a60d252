"""A task delivered twice, or retried after a failure before its write, makes one memory."""

from __future__ import annotations

import time
from typing import Any

import httpx
from helpers import wait_job

from memoryd.jobs.names import QUEUE_OF, TaskName


def count(api: httpx.Client, user: str) -> int:
    return len(api.get("/v1/memories", params={"user_id": user}).json()["items"])


def resend(stack: Any, job_id: str, command: dict[str, Any]) -> None:
    """Publish the same message again, as the broker does after a lost ack."""
    stack.runtime.celery.send_task(
        TaskName.SAVE.value, kwargs={"command": command}, task_id=job_id,
        queue=QUEUE_OF[TaskName.SAVE].value,
    )


def command_for(user: str, content: str) -> dict[str, Any]:
    return {"tenant_id": "tenant-a", "user_id": user, "received_at": "2024-06-01T00:00:00Z",
            "content": content, "type": "semantic", "scope": "global", "tags": [],
            "importance": 5}


def test_duplicate_delivery_makes_one_memory(stack: Any, api: httpx.Client, user: str) -> None:
    job_id = f"job-dup-{user}"
    command = command_for(user, "I run a small bakery called Crumb")
    assert stack.runtime.jobs.create(job_id, "tenant-a", TaskName.SAVE.value, None)
    resend(stack, job_id, command)
    first = wait_job(api, job_id)
    assert first["status"] == "succeeded" and first["result"]["outcome"] == "added"
    # The worker crashed after writing but before recording success: the job looks unfinished
    # and the broker delivers the message again.
    stack.runtime.redis.hset(f"memoryd:job:{job_id}", "status", "running")
    resend(stack, job_id, command)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        view = stack.runtime.jobs.peek(job_id)
        if view.attempts >= 2 and view.status.value == "succeeded":
            break
        time.sleep(0.05)
    again = wait_job(api, job_id)
    assert again["attempts"] == 2
    assert again["status"] == "succeeded"
    assert again["result"]["outcome"] == "added"
    assert again["result"]["memory"]["id"] == first["result"]["memory"]["id"]
    assert count(api, user) == 1


def test_retry_after_failure_before_write(stack: Any, api: httpx.Client, user: str) -> None:
    # Another holder keeps the user's write lock: the task fails (transiently) before writing.
    lock = stack.runtime.redis.lock(f"memoryd:lock:tenant-a:{user}", timeout=60)
    assert lock.acquire(blocking=False)
    job = api.post("/v1/memories", json={"user_id": user, "content": "I speak Portuguese"}).json()
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        status = api.get(f"/v1/jobs/{job['job_id']}").json()
        if status["status"] == "retrying":
            break
        time.sleep(0.05)
    assert status is not None and status["status"] == "retrying", status
    assert status["error"]["code"] == "lock_timeout"
    assert count(api, user) == 0
    lock.release()
    done = wait_job(api, job["job_id"])
    assert done["status"] == "succeeded", done
    assert done["attempts"] >= 2
    assert count(api, user) == 1


def held_messages(stack: Any, job_id: str) -> int:
    """This job's messages still queued or delivered and unacknowledged. Other tests'
    messages may be held meanwhile (a forget schedules the compaction as a delayed task on
    the shared stack), so only this job's count."""
    r = stack.runtime.redis
    raw = [*r.lrange(QUEUE_OF[TaskName.SAVE].value, 0, -1), *r.hvals("unacked")]
    return sum(1 for message in raw if job_id.encode() in message)


def test_two_deliveries_at_once_make_one_memory_and_keep_the_whole_result(
    stack: Any, api: httpx.Client, user: str
) -> None:
    job_id = f"job-twice-{user}"
    command = command_for(user, "My bakery opens at six, 我的面包店六点开门")
    assert stack.runtime.jobs.create(job_id, "tenant-a", TaskName.SAVE.value, None)
    resend(stack, job_id, command)
    resend(stack, job_id, command)  # the broker's duplicate, before the first has run
    deadline = time.monotonic() + 30
    # Both deliveries handled: none queued, none held (the second waits for the first's
    # running lease, then finds the job done).
    while (stack.runtime.jobs.peek(job_id).status.value != "succeeded"
           or held_messages(stack, job_id)):
        assert time.monotonic() < deadline, "the second delivery was never handled"
        time.sleep(0.05)
    done = wait_job(api, job_id)
    assert done["status"] == "succeeded", done
    assert done["attempts"] == 1  # never two runs of one job at once
    # The job keeps its whole result (Celery's short form of it is for task events only).
    assert done["result"]["outcome"] == "added"
    assert done["result"]["memory"]["content"] == command["content"]
    assert count(api, user) == 1
