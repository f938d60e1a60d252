"""A real Celery worker (thread pool) running inside the embedded process."""

from __future__ import annotations

import threading
import time
from typing import Any

from celery import Celery, bootsteps
from celery.worker import WorkController
from celery.worker import state as worker_state
from kombu.asynchronous import set_event_loop
from redis.exceptions import RedisError

from memoryd.jobs.names import QueueName
from memoryd.jobs.recovery import requeue_orphans
from memoryd.platform.logs import get_logger
from memoryd.workers.thread_pool import TimeLimitedThreadPool

log = get_logger("memoryd.worker")


class RequeueDroppedOnReconnect(bootsteps.StartStopStep):
    """On every consumer restart (a lost broker connection), and at the first start of a
    worker that replaces a dead one, requeue what Celery dropped and kombu could not give
    back (`shared/jobs/recovery.py requeue_orphans`). It starts before the event loop, so
    nothing new has been fetched yet.

    Only messages delivered before this consumer stopped are its orphans: the process's
    other workers reconnect too, and one may already have fetched a requeued message again
    and be holding it for its countdown (a held countdown is in no request list until it
    is due). Requeueing that one again would run the job twice."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._starts = 0
        self._stopped_at: float | None = None

    def stop(self, parent: Any) -> None:
        self._stopped_at = time.time()

    def start(self, parent: Any) -> None:
        self._starts += 1
        if self._starts == 1 and not getattr(parent.controller, "replaces_dead", False):
            return
        delivered_before = self._stopped_at if self._stopped_at is not None else time.time()
        # Every worker of this process: the embedded LLM worker shares the broker database.
        held = {str(r.message.delivery_tag) for r in
                (*worker_state.active_requests, *worker_state.reserved_requests)
                if r.message is not None}
        try:
            count = requeue_orphans(parent.app, held, delivered_before)
        except RedisError as exc:  # gone again: the next restart tries again
            log.warning("requeue_after_reconnect_failed", error=str(exc))
            return
        log.warning("requeued_after_reconnect", count=count, held=len(held))


class _Controller(WorkController):
    def __init__(self, *args: Any, own_event_loop: bool = False, replaces_dead: bool = False,
                 **kwargs: Any) -> None:
        self.ready = threading.Event()
        self.replaces_dead = replaces_dead
        if own_event_loop:
            # Celery's Hub step reuses kombu's process-wide event loop when one exists; a
            # second worker sharing the first one's loop never fires its own timers (a
            # retry's countdown), so it gets a loop of its own.
            set_event_loop(None)
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


class InProcessWorker:
    """Consumes `queues` with `concurrency` threads, each job within the app's soft and hard
    time limits (workers/thread_pool.py); stop() gives running jobs `stop_grace_s`.

    A worker that dies on its own is replaced. Celery 5.7 with kombu 5.7 can end a worker
    with "Unrecoverable error" when Redis goes away while messages are delivered: the
    connection is collected and then closed, and kombu's restore of the delivered
    messages, or a finished task's ack on the old channel, meets a transport without its
    client (AttributeError). A `celery worker` process exits then and its supervisor starts
    another; in the embedded stack nothing would, and no job would run again.
    """

    RESTART_DELAY_S = 1.0

    def __init__(
        self, app: Celery, concurrency: int, hostname: str = "embedded@memoryd",
        queues: list[str] | None = None, own_event_loop: bool = False,
        stop_grace_s: float = 10.0,
    ) -> None:
        import memoryd.workers.tasks  # noqa: F401  (registers the tasks on the app)

        # Embedded only: this process is the broker database's one consumer.
        app.steps["consumer"].add(RequeueDroppedOnReconnect)
        self._options: dict[str, Any] = {
            "app": app, "concurrency": concurrency, "hostname": hostname,
            "pool_cls": type("TimeLimitedThreadPool", (TimeLimitedThreadPool,),
                             {"stop_grace_s": stop_grace_s}),
            "queues": queues or [q.value for q in QueueName], "without_heartbeat": True,
            "without_mingle": True, "without_gossip": True, "loglevel": "WARNING",
        }
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.restarts = 0
        self._controller = _Controller(**self._options, own_event_loop=own_event_loop)
        self._thread = threading.Thread(target=self._run, name="celery-worker", daemon=True)

    def start(self, timeout_s: float = 30.0) -> None:
        self._thread.start()
        if not self._controller.ready.wait(timeout_s):
            raise RuntimeError("the in-process Celery worker did not start")
        log.info("worker_started")

    def _run(self) -> None:
        while True:
            self._controller.start()  # returns when stopped, or when the worker died
            if self._stopping.wait(self.RESTART_DELAY_S):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self.restarts += 1
                log.error("worker_died_restarting", restarts=self.restarts)
                # Its own event loop: the dead worker's may hold its broken connection.
                self._controller = _Controller(**self._options, own_event_loop=True,
                                               replaces_dead=True)

    def stop(self, timeout_s: float = 30.0) -> None:
        with self._lock:
            self._stopping.set()
            controller = self._controller
        controller.stop(in_sighandler=False)
        self._thread.join(timeout_s)


def stop_workers(workers: list[InProcessWorker], timeout_s: float) -> None:
    """Stop every worker of this process together, each in its own thread.

    `WorkController.stop()` called from another thread closes a worker's connection while
    its event loop may be iterating that connection's channels ("Set changed size during
    iteration", then "Unrecoverable error"), a race that more workers per process made
    frequent. Celery's shutdown flag is process-wide and each event loop checks it on every
    pass, so every worker shuts itself down (warm: running jobs get their grace, see
    thread_pool.py) from its own loop. A worker still running after `timeout_s` is stopped
    from here."""
    for worker in workers:
        worker._stopping.set()
    worker_state.should_stop = 0  # type: ignore[assignment]  # EX_OK: a warm shutdown
    deadline = time.monotonic() + timeout_s
    try:
        for worker in workers:
            worker._thread.join(max(0.0, deadline - time.monotonic()))
    finally:
        worker_state.should_stop = None  # a later worker in this process must run
    for worker in workers:
        if worker._thread.is_alive():
            log.warning("worker_stop_forced", hostname=worker._options["hostname"])
            worker.stop()
