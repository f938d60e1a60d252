"""Task policy (retries, backoff ceiling, retries while a dependency is down, the LLM rate
limit) follows the Settings a worker is built with, not the process's environment: a real
in-process Celery worker on an app given a runtime's Settings runs its tasks with that
policy, which it reports over the broker (Celery's remote control) and enforces (its
consumer's rate-limit buckets). No subprocess: nothing here reads MEMORYD_* variables."""

from __future__ import annotations

import uuid
from pathlib import Path

from celery import Celery
from conftest import redis_db_url

from memoryd.jobs.celery_app import TaskPolicy, create_app, task_policy
from memoryd.jobs.names import TaskName
from memoryd.platform.settings import Settings
from memoryd.runtime import Runtime
from memoryd.workers.inprocess import InProcessWorker

DB = 2  # a database of its own (the suite runs files in parallel)
POLICY = {"task_max_retries": 2, "task_retry_backoff_max_s": 7,
          "task_unavailable_max_retries": 3, "llm_rate_limit": "12/m"}
SHOWN = ("max_retries", "retry_backoff_max", "unavailable_max_retries", "rate_limit")


def _registered(app: Celery, hostname: str) -> dict[str, str]:
    """Each task's policy as the running worker reports it: `name [field=value ...]`."""
    inspect = app.control.inspect(
        destination=[hostname], timeout=10.0, limit=1)
    replies = inspect.registered(*SHOWN) or {}
    rows = [row for worker in replies.values() for row in worker]
    return {row.split(" ", 1)[0]: row for row in rows}


def test_an_in_process_worker_runs_its_tasks_with_the_runtimes_policy(
    redis_server: str, tmp_path: Path
) -> None:
    url = redis_db_url(redis_server, DB)
    # The app as a worker process's composition root builds it, from other Settings (the
    # defaults here), its tasks already built; then the runtime with the test's Settings,
    # as the embedded stack gives its own to the process's app.
    app = create_app(Settings(data_dir=tmp_path, redis_url=url))
    import memoryd.workers.tasks  # noqa: F401  (registers the tasks)

    assert app.tasks[TaskName.SAVE.value].max_retries != POLICY["task_max_retries"]
    settings = Settings(data_dir=tmp_path, redis_url=url, **POLICY)
    runtime = Runtime(settings, celery=app)
    hostname = f"policy-{uuid.uuid4().hex[:8]}@test"
    # A queue of its own: this worker takes no one else's messages.
    worker = InProcessWorker(runtime.celery, 1, hostname=hostname,
                             queues=[f"policy-{uuid.uuid4().hex[:8]}"], own_event_loop=True,
                             stop_grace_s=1.0)
    worker.start()
    try:
        assert task_policy(app) == TaskPolicy.from_settings(settings)
        shown = _registered(app, hostname)
        assert shown[TaskName.SAVE.value] == (
            "memory.save [max_retries=2 retry_backoff_max=7 unavailable_max_retries=3]")
        assert shown[TaskName.INGEST.value] == shown[TaskName.SAVE.value].replace(
            "memory.save", "memory.ingest")
        assert shown[TaskName.EXTRACT_LLM.value] == (
            "memory.extract_llm [max_retries=2 retry_backoff_max=7 unavailable_max_retries=3 "
            "rate_limit=12/m]")
        # Webhook deliveries keep their own policy (bounded by webhook_max_attempts).
        assert shown[TaskName.WEBHOOK_DELIVER.value] == "webhook.deliver"
        # The rate limit the worker enforces: a token bucket of 12 a minute.
        bucket = worker._controller.consumer.task_buckets[TaskName.EXTRACT_LLM.value]
        assert bucket is not None and bucket.fill_rate == 12 / 60
        assert worker._controller.consumer.task_buckets[TaskName.SAVE.value] is None
    finally:
        worker.stop()
        runtime.close()
        app.close()


def test_each_app_keeps_the_policy_of_its_own_settings(tmp_path: Path) -> None:
    """The embedded stack runs several apps in one process (one per queue group): each one's
    tasks are its own, with its Settings' policy."""
    import memoryd.workers.tasks  # noqa: F401  (registers the tasks)

    first = create_app(Settings(data_dir=tmp_path, **POLICY))
    second = create_app(Settings(data_dir=tmp_path, task_max_retries=9, llm_rate_limit=None))
    try:
        assert (first.tasks[TaskName.SAVE.value].max_retries,
                second.tasks[TaskName.SAVE.value].max_retries) == (2, 9)
        assert (first.tasks[TaskName.EXTRACT_LLM.value].rate_limit,
                second.tasks[TaskName.EXTRACT_LLM.value].rate_limit) == ("12/m", None)
        assert second.tasks[TaskName.SAVE.value].retry_backoff_max == 60
    finally:
        first.close()
        second.close()
