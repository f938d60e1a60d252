"""A retry Celery cannot send must not drop its job.

Celery's `Task.retry` publishes the retry's message, and when that fails (the broker went
away under the worker: a Redis restart) it raises `Reject(requeue=False)`, and the
delivered message is acked and gone. The chaos drill `tests/faults/test_embedded_faults.py
::test_redis_restart_loses_no_queued_job` lost a job that way once. Here the
broker is one nothing listens on, so the publish fails for real, every time."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery.exceptions import Reject
from redis.exceptions import ConnectionError as RedisConnectionError

from memoryd.jobs.celery_app import create_app
from memoryd.jobs.names import TaskName
from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings


def test_a_retry_that_cannot_be_sent_puts_its_message_back(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path,
                              redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    app.conf.task_publish_retry = False  # fail at once, not after the publish's own retries
    app.conf.broker_connection_timeout = 1
    import memoryd.workers.tasks  # noqa: F401  (registers the tasks)

    task = app.tasks[TaskName.INGEST.value]
    kwargs = {"command": {"job_id": "job-1", "tenant_id": "t", "user_id": "u"}}
    task.push_request(id="job-1", kwargs=kwargs, retries=0, called_directly=False,
                      delivery_info={"routing_key": "memory", "exchange": ""})
    try:
        with pytest.raises(Reject) as rejected:
            task.retry(exc=RedisConnectionError("the broker went away"))
    finally:
        task.pop_request()
    # Back on its queue, not acked away; and the cause is the failed publish.
    assert rejected.value.requeue is True
    assert isinstance(rejected.value.__cause__, Reject)
    assert rejected.value.__cause__.requeue is False
