"""Celery task events follow MEMORYD_TASK_EVENTS (on for server-mode workers by default);
beat schedules the retention purge."""

from __future__ import annotations

from celery import Celery

from memoryd.jobs.celery_app import configure
from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.platform.settings import Settings
from memoryd.workers.process import worker_argv


def conf(**values: object) -> Celery:
    app = Celery("probe", set_as_current=False)
    configure(app, Settings(**values))  # type: ignore[arg-type]
    return app


def test_events_follow_the_setting() -> None:
    assert worker_argv(2, "memory", "INFO", Settings())[-1] == "--task-events"
    assert "--task-events" not in worker_argv(2, "memory", "INFO", Settings(task_events=False))
    # The embedded worker reads the app's configuration: off unless asked for.
    assert conf().conf.worker_send_task_events is False
    assert conf(task_events=True).conf.worker_send_task_events is True
    assert conf(task_events=True).conf.task_send_sent_event is True


def test_beat_schedules_the_purge() -> None:
    entry = conf(retention_purge_interval_s=600).conf.beat_schedule["purge-expired"]
    assert entry["task"] == TaskName.PURGE_EXPIRED.value == "memory.purge_expired"
    assert entry["schedule"] == 600
    assert entry["options"]["queue"] == QUEUE_OF[TaskName.PURGE_EXPIRED].value
