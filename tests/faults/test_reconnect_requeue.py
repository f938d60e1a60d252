"""Embedded mode: a job the worker holds for its countdown (as a retry is held) when the
broker goes away runs once Redis is back, not after the visibility timeout, and the worker
survives the outage.

With Redis stopped while a message is delivered, Celery 5.7 + kombu 5.7 ended the embedded
worker with "Unrecoverable error" (kombu's restore of the delivered messages meets a
transport without its client), and no job ran again; where the worker lived, the messages
it dropped ("the broker may redeliver these") sat in Redis's `unacked` hash for ten
minutes, and the Redis-restart drill timed out about once in ten runs. The embedded worker
is now replaced when it dies, and requeues what nobody holds when it (re)connects.
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
from memoryd.platform.redis_runtime import ensure_redis, free_port
from memoryd.platform.settings import Settings
from memoryd.records.commands import SaveCommand
from ops.chaos.common import wait_jobs
from ops.chaos.embedded import running
from ops.chaos.procs import UpStack
from ops.stack import wait_until

COUNTDOWN_S = 8.0


def test_a_held_job_runs_after_the_broker_connection_drops(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    server = ensure_redis(url, tmp_path / "redis-data")
    stack = UpStack("reconnect", tmp_path / "data", tmp_path, redis_url=url,
                    broker_visibility_timeout_s=600)
    user = f"reconnect-{uuid.uuid4().hex[:8]}"
    job_id = str(uuid.uuid4())
    client = redis.Redis.from_url(url)
    app = create_celery_app(Settings(redis_url=url))
    try:
        with running(stack), stack.client() as api:
            JobStore(client, 3600).create(job_id, "default", TaskName.SAVE.value, None)
            command = SaveCommand(
                tenant_id="default", user_id=user, received_at=datetime.now(UTC),
                content="我的猫叫 Mochi, she is three years old", type="semantic",
                scope="global", tags=[], importance=3,
            )
            app.send_task(TaskName.SAVE.value, kwargs={"command": command.model_dump(mode="json")},
                          task_id=job_id, queue=QUEUE_OF[TaskName.SAVE].value,
                          countdown=COUNTDOWN_S)
            sent = time.monotonic()
            # The worker has it (delivered: in `unacked`) and holds it for the countdown.
            wait_until(lambda: client.hlen("unacked") == 1, 30, "the worker to take the job")
            assert time.monotonic() - sent < COUNTDOWN_S - 2, "too slow to test the hold"
            # Down long enough for the worker to see it gone (kombu's own restore on closing
            # the channel then fails too), then back on the same AOF, as in the drill.
            server.stop()
            time.sleep(1.0)
            server = ensure_redis(url, tmp_path / "redis-data")
            wait_jobs(api, [job_id], 60)
            # Acknowledged once it ran: nothing is left in `unacked` for the visibility timeout.
            # (The job reads "succeeded" a moment before the ack, so wait for it.) A restore
            # keeps the message's delivery tag, so the tag itself cannot tell the copies
            # apart; the requeue shows in the log below.
            wait_until(lambda: client.hlen("unacked") == 0, 10, "the run to be acknowledged")
            found = api.get("/v1/memories", params={"user_id": user}).json()["items"]
            assert [m["content"] for m in found] == [command.content]
            assert time.monotonic() - sent >= COUNTDOWN_S - 1, "the countdown was not kept"
            log_text = stack.log_path.read_text()
            assert "requeued_after_reconnect" in log_text
    finally:
        client.close()
        app.close()
        server.stop()
