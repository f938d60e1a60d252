"""Periodic tasks inside the embedded stack, which has no separate beat process."""

from __future__ import annotations

import threading

from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.platform.logs import get_logger

log = get_logger("memoryd.periodic")


class PeriodicSender:
    """Enqueues a task every `interval_s` (first after `first_s`), like a one-entry beat.

    The task goes through the queue to the in-process worker, so it runs exactly as
    beat's would in server mode.
    """

    def __init__(self, app: Celery, task: TaskName, interval_s: float, first_s: float) -> None:
        self._app = app
        self._task = task
        self._interval_s = interval_s
        self._first_s = first_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"periodic-{task.value}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        wait = self._first_s
        while not self._stop.wait(wait):
            wait = self._interval_s
            try:
                self._app.send_task(self._task.value, queue=QUEUE_OF[self._task].value,
                                    retry=False)
            except (OperationalError, RedisError, OSError) as exc:
                log.warning("periodic_task_not_sent", task=self._task.value, error=str(exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
