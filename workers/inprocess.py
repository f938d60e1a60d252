"""A real Celery worker (thread pool) running inside the embedded process."""

from __future__ import annotations

import threading
from typing import Any

from celery import Celery
from celery.worker import WorkController
from kombu.asynchronous import set_event_loop

from shared.logs import get_logger
from shared.queue.names import QueueName

log = get_logger("memoryd.worker")


class _Controller(WorkController):
    def __init__(self, *args: Any, own_event_loop: bool = False, **kwargs: Any) -> None:
        self.ready = threading.Event()
        if own_event_loop:
            # Celery's Hub step reuses kombu's process-wide event loop when one exists; a
            # second worker sharing the first one's loop never fires its own timers (a
            # retry's countdown), so it gets a loop of its own.
            set_event_loop(None)
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


class InProcessWorker:
    """Consumes every queue with `concurrency` threads; stop() waits for running tasks.

    Thread-pool workers ignore Celery's time limits (they need signals); the
    embedded mode relies on explicit timeouts on every network call instead.
    """

    def __init__(
        self, app: Celery, concurrency: int, hostname: str = "embedded@memoryd",
        queues: list[str] | None = None, own_event_loop: bool = False,
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
            own_event_loop=own_event_loop,
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
