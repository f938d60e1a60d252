"""Redis goes away while a job waits at a failpoint, at the places where it once took the
job, or its end, with it, and comes back; every job still ends as it should, each memory
stored once.

- `broker.taken`: the worker has taken the message off its queue and not yet recorded it as
  unacknowledged. kombu alone loses the message there (this test fails without the
  keeping); memoryd.jobs.broker keeps it and gives it back.
- `job.finish`: the job's writes are done and its success not yet recorded. Recorded by
  Celery's `on_success`, a failure to record was logged and the message acknowledged, the
  job left `running`; the run records it now (workers/task_base.py `_succeeded`).
- `job.fail` (server mode): a job failed for good and its failure is not yet recorded.
  Nothing retries a final failure, so the worker waits for Redis to record it
  (`FAILURE_RECORD_WAIT_S`) instead of leaving the job `running` and out of the
  failed-jobs list.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import redis

from memoryd.jobs.celery_app import create_app as create_celery_app
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.platform import failpoints
from memoryd.platform.settings import Settings
from ops.chaos.common import TENANT
from ops.chaos.embedded import redis_away_at
from ops.chaos.server import server_mode
from ops.stack import wait_until


@pytest.mark.parametrize("failpoint", [failpoints.BROKER_TAKEN, failpoints.JOB_FINISH])
def test_redis_gone_at_a_failpoint_loses_no_job(tmp_path: Path, failpoint: str) -> None:
    row = redis_away_at(tmp_path, failpoint, n=2, pause_s=2.0, outage_s=2.0)
    assert (row.expected, row.found, row.duplicates, row.lost) == (2, 2, 0, 0), row


def test_redis_gone_before_a_final_failure_is_recorded(tmp_path: Path) -> None:
    # Server mode (`memoryd serve` + a prefork `memoryd worker`): no reconnect requeue
    # there, so a failure not recorded stayed unrecorded until the visibility timeout ran
    # the job again (600 s). The embedded stack reruns it at its reconnect.
    with server_mode(tmp_path, {"failpoints": failpoints.JOB_FAIL,
                                "failpoint_pause_s": 2.0}) as ctx:
        job_id = str(uuid.uuid4())
        # Fails for good at its first run: a role this worker does not know.
        command = {"tenant_id": TENANT, "user_id": "u-fail",
                   "received_at": "2026-12-01T05:00:00Z", "scope": "global",
                   "extract": "raw", "store_roles": ["user"],
                   "messages": [{"role": "robot", "content": "hello"}]}
        JobStore(redis.Redis.from_url(ctx.redis.url), 3600).create(
            job_id, TENANT, TaskName.INGEST.value, None)
        create_celery_app(Settings(redis_url=ctx.redis.url)).send_task(
            TaskName.INGEST.value, kwargs={"command": command}, task_id=job_id,
            queue=QUEUE_OF[TaskName.INGEST].value)
        wait_until(lambda: failpoints.reached(ctx.failpoint_dir, failpoints.JOB_FAIL)
                   is not None, 60, "the job to fail")
        ctx.redis.stop()
        # Longer than redis-py's own retries and Celery's second call of on_failure ride
        # out together.
        time.sleep(2.0 + 15.0)
        ctx.redis.start()
        wait_until(lambda: ctx.status(job_id) == "failed", 60,
                   "the job's failure to be recorded")
        view = ctx.api.get(f"/v1/jobs/{job_id}").json()
        assert view["error"]["code"] == "command_invalid", view
        listed = ctx.api.get("/v1/jobs", params={"status": "failed"}).json()
        assert job_id in [j["job_id"] for j in listed["items"]], listed
