"""Accepted means durable, and restarts are quick (issue 19, item 10).

A graceful stop of `memoryd up` gives back every message its workers took and did not
finish (the one still running past the grace, the one held for a countdown), so the next
start runs them at once instead of after the broker's visibility timeout (600 s). And the
Redis that `memoryd up` starts fsyncs its AOF as `redis_appendfsync` says.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import redis

from memoryd.jobs.celery_app import create_app as create_celery_app
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.platform.failpoints import EMBED_DOCUMENTS
from memoryd.platform.redis_runtime import embedded_client_url, ensure_redis, free_port
from memoryd.platform.settings import Settings
from memoryd.records.commands import SaveCommand
from ops.chaos.common import wait_jobs
from ops.chaos.embedded import running
from ops.chaos.procs import UpStack
from ops.stack import wait_until

COUNTDOWN_S = 12.0


def test_a_graceful_stop_requeues_what_it_took_and_the_restart_runs_it(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    server = ensure_redis(url, tmp_path / "redis-data")
    (tmp_path / "fp").mkdir()
    # Two threads: the first job stalls for far longer than the grace of one second.
    stack = UpStack("stop", tmp_path / "data", tmp_path, redis_url=url, worker_concurrency=2,
                    worker_stop_grace_s=1, broker_visibility_timeout_s=600,
                    failpoints=EMBED_DOCUMENTS, failpoint_dir=tmp_path / "fp",
                    failpoint_pause_s=60)
    user = f"stop-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    app = create_celery_app(Settings(redis_url=url))
    try:
        with running(stack), stack.client() as api:
            stalled = api.post("/v1/memories", json={
                "user_id": user, "content": "I grow chillies on my balcony"}).json()["job_id"]
            wait_until(lambda: (tmp_path / "fp" / EMBED_DOCUMENTS).exists(), 30,
                       "the first job to stall")
            # The other thread still works.
            other = api.post("/v1/memories", json={
                "user_id": user, "content": "My brother lives in Porto"}).json()["job_id"]
            wait_jobs(api, [other], 30)
            # A job the worker holds for its countdown, as it holds a retry.
            held = str(uuid.uuid4())
            JobStore(client, 3600).create(held, "default", TaskName.SAVE.value, None)
            command = SaveCommand(
                tenant_id="default", user_id=user, received_at=datetime.now(UTC),
                content="My cat is called Mochi", type="semantic", scope="global", tags=[],
                importance=3,
            )
            app.send_task(TaskName.SAVE.value, kwargs={"command": command.model_dump(mode="json")},
                          task_id=held, queue=QUEUE_OF[TaskName.SAVE].value,
                          countdown=COUNTDOWN_S)
            sent = time.monotonic()
            wait_until(lambda: client.hlen("unacked") >= 2, 30,
                       "the worker to hold the stalled job and the counted-down one")
            stopping = time.monotonic()
            stack.stop()
            assert time.monotonic() - stopping < 30, "the stop waited for the stalled job"
        # Nothing is left invisible until the visibility timeout: all of it is queued again.
        assert client.hlen("unacked") == 0, client.hgetall("unacked")
        assert client.llen(QUEUE_OF[TaskName.SAVE].value) == 2
        with running(stack), stack.client() as api:
            restarted = time.monotonic()
            wait_jobs(api, [stalled, held], 90)
            assert time.monotonic() - restarted < 60, "the restart waited to run them"
            assert time.monotonic() - sent >= COUNTDOWN_S - 1, "the countdown was not kept"
            items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
            assert len(items) == 3
    finally:
        client.close()
        app.close()
        server.stop()


def test_the_started_redis_fsyncs_as_configured(tmp_path: Path) -> None:
    stack = UpStack("fsync", tmp_path / "data", tmp_path, redis_appendfsync="always")
    with running(stack):
        # The Redis that `memoryd up` started has the password kept in its data directory.
        client = redis.Redis.from_url(
            embedded_client_url(str(stack.settings.get("redis_url", "redis://127.0.0.1:6379/0")),
                                stack.data_dir))
        try:
            assert client.config_get("appendfsync") == {"appendfsync": "always"}
            assert client.config_get("appendonly") == {"appendonly": "yes"}
        finally:
            client.close()
