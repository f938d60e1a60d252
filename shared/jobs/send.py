"""Sending a task: its queue, the publish retry policy, and a form of its arguments without
content for Celery to show (shared/jobs/shown.py)."""

from __future__ import annotations

from typing import Any

from celery import Celery

from memoryd.jobs.names import TaskName, queue_for
from memoryd.jobs.shown import arguments_shown

# Publishing to Redis again, briefly, before the caller gives up (the gateway answers 503).
PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2,
                 "interval_max": 0.5}


def send(app: Celery, task: TaskName, kwargs: dict[str, Any], task_id: str | None = None) -> None:
    """Publish `task` on its queue (`queue_for`); raises what kombu raises when Redis cannot
    take it."""
    app.send_task(
        task.value, kwargs=kwargs, task_id=task_id, queue=queue_for(task, kwargs).value,
        retry=True, retry_policy=PUBLISH_RETRY,
        argsrepr="()", kwargsrepr=arguments_shown(kwargs),
    )
