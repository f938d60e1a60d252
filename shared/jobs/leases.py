"""Running leases: one delivery of a job runs at a time, in any worker.

A message comes again while its first delivery still runs: after the broker's visibility
timeout, after a requeue at start or on reconnect, or when a job failed at its hard limit
is retried while its abandoned thread still works. Before running, a task takes the job's
lease in Redis (`JobStore.take_lease`); a keeper thread in each worker process renews every
lease the process holds, so a lease lasts as long as its run, and a process that dies
frees its leases within `job_lease_s`. A delivery that finds the lease taken waits
(workers/task_base.py re-sends it for later) instead of running beside the first.

A run that ends while Redis is away cannot drop its lease, and the lease comes back with
Redis (AOF). Its process remembers it, and the job's next run there frees it at once
instead of waiting out its time to live (`LeaseKeeper.take`): the Redis-restart drill's
recovery was 15 s, one lease's time to live, on most runs.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid

from redis.exceptions import RedisError

from memoryd.jobs.job_store import JobStore
from memoryd.platform.logs import get_logger

log = get_logger("memoryd.leases")


class LeaseKeeper:
    """Renews the leases this process holds every third of their time to live."""

    def __init__(self) -> None:
        self._reset()
        # A forked child (a prefork pool process) inherits the leases but not the thread.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._held: dict[str, tuple[JobStore, str, float]] = {}
        # job id -> (token, monotonic end of its time to live): leases of finished runs
        # that could not be dropped.
        self._abandoned: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._interval = math.inf
        self._thread: threading.Thread | None = None

    @staticmethod
    def token() -> str:
        return f"{os.getpid()}:{uuid.uuid4().hex}"

    def hold(self, jobs: JobStore, job_id: str, token: str, ttl_s: float) -> None:
        """Keep renewing the lease `token` holds on `job_id` until `drop`."""
        with self._lock:
            self._held[token] = (jobs, job_id, ttl_s)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="job-leases",
                                                daemon=True)
                self._thread.start()
            if ttl_s / 3 < self._interval:  # renew sooner than the keeper now plans to
                self._interval = ttl_s / 3
                self._wake.set()

    def take(self, jobs: JobStore, job_id: str, token: str, ttl_s: float) -> float | None:
        """`JobStore.take_lease` for `token`, first freeing the job's lease if a finished
        run of this process could not drop it: nobody runs under that one."""
        busy_for = jobs.take_lease(job_id, token, ttl_s)
        if busy_for is None:
            return None
        with self._lock:
            stale = self._abandoned.pop(job_id, None)
        if stale is None or stale[1] <= time.monotonic():
            return busy_for
        jobs.drop_lease(job_id, stale[0])  # compare-and-delete: that token's lease only
        return jobs.take_lease(job_id, token, ttl_s)

    def drop(self, token: str) -> None:
        with self._lock:
            held = self._held.pop(token, None)
        if held is not None:
            jobs, job_id, ttl_s = held
            try:
                jobs.drop_lease(job_id, token)
            except RedisError as exc:  # it ends on its own within its time to live
                log.warning("lease_not_dropped", job_id=job_id, error=str(exc))
                now = time.monotonic()
                with self._lock:
                    self._abandoned = {j: a for j, a in self._abandoned.items() if a[1] > now}
                    self._abandoned[job_id] = (token, now + ttl_s)

    def _run(self) -> None:
        while True:
            self._wake.wait(None if self._interval == math.inf else self._interval)
            self._wake.clear()
            with self._lock:
                held = dict(self._held)
                self._interval = min((t for _, _, t in held.values()), default=math.inf) / 3
            for token, (jobs, job_id, ttl_s) in held.items():
                try:
                    if not jobs.renew_lease(job_id, token, ttl_s) and token in self._held:
                        log.warning("lease_lost", job_id=job_id)
                except RedisError as exc:  # the next pass tries again
                    log.warning("lease_not_renewed", job_id=job_id, error=str(exc))


keeper = LeaseKeeper()
