"""A real Celery worker (thread pool) running inside the embedded process."""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery
from celery.worker import WorkController

from shared.logs import get_logger
from shared.queue.names import QueueName

log = get_logger("memoryd.worker")


class _Controller(WorkController):
    def __init__(self, *args: Any, event_loop: bool = True, **kwargs: Any) -> None:
        self.ready = threading.Event()
        self._event_loop = event_loop
        super().__init__(*args, **kwargs)

    def should_use_eventloop(self) -> bool:
        # kombu's event loop is one per process (a module global): a second worker in the
        # process must poll without it, or its delayed retries (ETA) never run.
        return self._event_loop and bool(super().should_use_eventloop())

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


class InProcessWorker:
    """Consumes every queue with `concurrency` threads; stop() waits for running tasks.

    Thread-pool workers ignore Celery's time limits (they need signals); the
    embedded mode relies on explicit timeouts on every network call instead.
    """

    def __init__(
        self, app: Celery, concurrency: int, hostname: str = "embedded@memoryd",
        queues: list[str] | None = None, event_loop: bool = True,
    ) -> None:
        import workers.tasks  # noqa: F401  (registers the tasks on the app)

        self._controller = _Controller(
            app=app,
            pool="threads",
            concurrency=concurrency,
            hostname=hostname,
            queues=queues or [q.value for q in QueueName],
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
            event_loop=event_loop,
        )
        self._thread = threading.Thread(
            target=self._controller.start, name="celery-worker", daemon=True
        )

    def start(self, timeout_s: float = 30.0) -> None:
        self._thread.start()
        if not self._controller.ready.wait(timeout_s):
            raise RuntimeError("the in-process Celery worker did not start")
        log.info("worker_started")

    def stop(self, timeout_s: float = 30.0) -> None:
        self._controller.stop(in_sighandler=False)
        self._thread.join(timeout_s)
