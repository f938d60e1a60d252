"""Every kind of worker keeps a job's soft and hard time limit, and a job never runs twice at
once (issue 19, item 2).

The embedded stack (`memoryd up`, Celery's thread pool) runs for real; a job is made to take
too long by the `embed.documents` failpoint, which stops it in one `time.sleep` (a call into
C that no exception interrupts) for `failpoint_pause_s`.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from helpers import wait_job
from pydantic import ValidationError

from memoryd.jobs.celery_app import create_app as create_celery_app
from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.platform.failpoints import EMBED_DOCUMENTS
from memoryd.platform.redis_runtime import embedded_client_url
from memoryd.platform.settings import Settings
from ops.chaos.embedded import running
from ops.chaos.procs import UpStack


def _stack(tmp_path: Path, **settings: object) -> UpStack:
    (tmp_path / "fp").mkdir()
    return UpStack("limits", tmp_path / "data", tmp_path, failpoints=EMBED_DOCUMENTS,
                   failpoint_dir=tmp_path / "fp", **settings)


def _save(api: httpx.Client, user: str, content: str) -> str:
    answer = api.post("/v1/memories", json={"user_id": user, "content": content})
    assert answer.status_code == 202, answer.text
    return str(answer.json()["job_id"])


def _failed_ids(api: httpx.Client) -> list[str]:
    page = api.get("/v1/jobs", params={"status": "failed"})
    assert page.status_code == 200, page.text
    return [item["job_id"] for item in page.json()["items"]]


def _job(api: httpx.Client, job_id: str) -> dict[str, Any]:
    body: dict[str, Any] = api.get(f"/v1/jobs/{job_id}").json()
    return body


def test_a_job_past_its_soft_limit_fails_with_time_limit(tmp_path: Path) -> None:
    # The stall (3 s) ends before the hard limit (8 s): the soft limit's exception, raised
    # in the job's thread at 1 s, reaches the job as soon as the stall returns.
    stack = _stack(tmp_path, job_soft_time_limit_s=1, job_time_limit_s=8, failpoint_pause_s=3)
    user = f"soft-{uuid.uuid4().hex[:8]}"
    with running(stack), stack.client() as api:
        job_id = _save(api, user, "I keep bees on the roof of my building")
        done = wait_job(api, job_id, 30)
        assert done["status"] == "failed", done
        assert done["error"]["code"] == "time_limit", done
        assert job_id in _failed_ids(api)
        assert api.get("/v1/memories", params={"user_id": user}).json()["items"] == []


def test_a_stuck_job_fails_at_its_hard_limit_and_its_thread_is_replaced(
    tmp_path: Path,
) -> None:
    # One worker thread, stuck for 25 s in C, far past the hard limit of 3 s.
    stack = _stack(tmp_path, job_soft_time_limit_s=1, job_time_limit_s=3,
                   failpoint_pause_s=25, worker_concurrency=1)
    user = f"hard-{uuid.uuid4().hex[:8]}"
    with running(stack), stack.client() as api:
        started = time.monotonic()
        stuck = _save(api, user, "I play the cello in a community orchestra")
        failed = wait_job(api, stuck, 20)
        assert failed["status"] == "failed", failed
        assert failed["error"]["code"] == "time_limit", failed
        assert time.monotonic() - started < 15, "failed long after its hard limit"
        assert stuck in _failed_ids(api)
        # The stuck thread's place was given back: another job runs while it still sleeps.
        other = _save(api, f"{user}-b", "My favourite tea is genmaicha")
        assert wait_job(api, other, 15)["status"] == "succeeded"
        assert time.monotonic() - started < 20, "the other job waited for the stuck one"
        # Retried while the abandoned thread still runs it: the new delivery waits for the
        # first one's lease instead of running beside it, then runs once that one is out.
        assert api.post(f"/v1/jobs/{stuck}/retry").status_code == 202
        time.sleep(3.0)
        waiting = _job(api, stuck)
        assert waiting["status"] == "queued" and waiting["attempts"] == 1, waiting
        done = wait_job(api, stuck, 60)
        assert done["status"] == "succeeded", (done.get("error"), done)
        assert done["attempts"] == 2
        assert time.monotonic() - started >= 25, "the retry ran beside the stuck run"
        # Its failure is not recorded again when the abandoned run returns.
        assert stuck not in _failed_ids(api)
        contents = [m["content"] for m in
                    api.get("/v1/memories", params={"user_id": user}).json()["items"]]
        assert contents == ["I play the cello in a community orchestra"]


def test_a_redelivered_job_does_not_run_beside_the_first(tmp_path: Path) -> None:
    stack = _stack(tmp_path, failpoint_pause_s=6)
    user = f"twice-{uuid.uuid4().hex[:8]}"
    with running(stack), stack.client() as api:
        job_id = _save(api, user, "I am learning to sail on Lake Geneva")
        wait_until_reached = time.monotonic() + 30
        while not (tmp_path / "fp" / EMBED_DOCUMENTS).exists():
            assert time.monotonic() < wait_until_reached, "the job never reached the stall"
            time.sleep(0.05)
        # The broker delivers the same message again while the first run is stalled (as
        # after a visibility timeout or a requeue).
        # The stack's own Redis has the password kept in its data directory.
        url = embedded_client_url(str(stack.settings.get("redis_url", "redis://127.0.0.1:6379/0")),
                                  stack.data_dir)
        client = redis.Redis.from_url(url)
        app = create_celery_app(Settings(redis_url=url))
        try:
            payload = {"command": {
                "tenant_id": "default", "user_id": user, "received_at": "2024-06-01T00:00:00Z",
                "content": "I am learning to sail on Lake Geneva", "type": "semantic",
                "scope": "global", "tags": [], "importance": 5}}
            app.send_task(TaskName.SAVE.value, kwargs=payload, task_id=job_id,
                          queue=QUEUE_OF[TaskName.SAVE].value)
            time.sleep(2.0)
            assert _job(api, job_id)["attempts"] == 1, "the second delivery ran at once"
            done = wait_job(api, job_id, 30)
            assert done["status"] == "succeeded", (done.get("error"), done)
            deadline = time.monotonic() + 30
            while client.llen(QUEUE_OF[TaskName.SAVE].value) or client.hlen("unacked"):
                assert time.monotonic() < deadline, "the second delivery was never handled"
                time.sleep(0.1)
            assert _job(api, job_id)["attempts"] == 1
        finally:
            client.close()
            app.close()
        items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
        assert len(items) == 1


@pytest.mark.parametrize("soft, hard", [(5.0, 5.0), (6.0, 5.0)])
def test_the_soft_limit_is_below_the_hard_one(tmp_path: Path, soft: float, hard: float) -> None:
    with pytest.raises(ValidationError, match="job_soft_time_limit_s"):
        Settings(data_dir=tmp_path, job_soft_time_limit_s=soft, job_time_limit_s=hard)


def test_a_prefork_job_past_its_soft_limit_fails_with_time_limit(tmp_path: Path) -> None:
    # Server mode: `memoryd serve` and a prefork `memoryd worker`, where Celery's own signal
    # raises the soft limit's exception; it is reported with the same code.
    from ops.chaos.server import server_mode

    settings = {"job_soft_time_limit_s": 1, "job_time_limit_s": 20,
                "failpoints": EMBED_DOCUMENTS, "failpoint_pause_s": 15}
    with server_mode(tmp_path, settings) as ctx:
        job_id = _save(ctx.api, "prefork-user", "I restore old typewriters")
        done = wait_job(ctx.api, job_id, 30)
        assert done["status"] == "failed", done
        assert done["error"]["code"] == "time_limit", done
        assert job_id in _failed_ids(ctx.api)
