"""The embedded worker's thread pool: Celery's thread pool with the time limits it lacks.

Celery's `threads` pool ignores `task_soft_time_limit` / `task_time_limit` (prefork enforces
them with signals): a stuck job ran until the broker's visibility timeout, and then a second
copy of it started. Here a watchdog thread keeps each job's limits
(shared/jobs/time_limits.py): at the soft limit it raises `SoftTimeLimitExceeded` in the
job's thread; at the hard limit it calls Celery's own `Request.on_timeout` (the job fails
with `time_limit`, is listed with the failed jobs, and its message is acknowledged, so it is
not delivered again) and starts a thread in place of the stuck one, which leaves the pool
when its job finally returns.

On stop, jobs handed to the pool but not started are cancelled (their messages stay
unacknowledged, and the embedded stack requeues them at once: workers/stack.py); running
ones get `stop_grace_s` to finish.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from celery.concurrency.base import BasePool, apply_target
from celery.exceptions import SoftTimeLimitExceeded

from memoryd.jobs import time_limits
from memoryd.platform.logs import get_logger

log = get_logger("memoryd.worker")


@dataclass(eq=False)
class _Job:
    target: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    callback: Callable[..., Any] | None
    accept_callback: Callable[..., Any] | None
    timeout_callback: Callable[[bool, float], Any] | None
    soft_s: float | None
    hard_s: float | None
    future: Future[Any] = field(default_factory=Future)
    thread: int = 0
    started: float = 0.0
    soft_fired: bool = False
    abandoned: bool = False
    done: bool = False


class ApplyResult:
    def __init__(self, future: Future[Any]) -> None:
        self.f = future
        self.get = future.result

    def wait(self, timeout: float | None = None) -> None:
        try:
            self.f.exception(timeout)
        except Exception:  # noqa: BLE001  (a timeout or a cancelled job: nothing to wait for)
            return


class TimeLimitedThreadPool(BasePool):
    """`limit` threads that run Celery jobs, each within its soft and hard time limit."""

    body_can_be_buffer = True
    signal_safe = False
    stop_grace_s = 10.0  # set per stack (Settings.worker_stop_grace_s) on a subclass
    TICK_S = 0.05

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._soft_default: float | None = self.options.get("soft_timeout")
        self._hard_default: float | None = self.options.get("timeout")
        self._cond = threading.Condition()
        self._pending: deque[_Job] = deque()
        self._running: dict[int, _Job] = {}
        self._threads: set[threading.Thread] = set()
        self._stopping = False
        self._started_threads = 0

    # --- Celery's pool interface --------------------------------------------------------

    def on_start(self) -> None:
        with self._cond:
            self._stopping = False
            for _ in range(int(self.limit or 1)):
                self._spawn()
        threading.Thread(target=self._watch, name="job-watchdog", daemon=True).start()

    def on_apply(  # type: ignore[override]
        self, target: Callable[..., Any], args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None, callback: Callable[..., Any] | None = None,
        accept_callback: Callable[..., Any] | None = None,
        timeout_callback: Callable[[bool, float], Any] | None = None,
        timeout: float | None = None, soft_timeout: float | None = None, **_: Any,
    ) -> ApplyResult:
        job = _Job(target, tuple(args or ()), dict(kwargs or {}), callback, accept_callback,
                   timeout_callback, soft_timeout or self._soft_default,
                   timeout or self._hard_default)
        with self._cond:
            self._pending.append(job)
            self._cond.notify()
        return ApplyResult(job.future)

    def on_stop(self) -> None:
        """Cancel what has not started; give running jobs `stop_grace_s` to finish."""
        with self._cond:
            self._stopping = True
            while self._pending:
                self._pending.popleft().future.cancel()
            self._cond.notify_all()
        deadline = time.monotonic() + self.stop_grace_s
        with self._cond:
            while any(not job.abandoned for job in self._running.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("stopped_with_jobs_running", running=len(self._running))
                    break
                self._cond.wait(left)
        super().on_stop()

    @property
    def num_processes(self) -> int:
        return int(self.limit or 1)

    # --- threads ------------------------------------------------------------------------

    def _spawn(self) -> None:
        """Start one thread (the condition held)."""
        self._started_threads += 1
        thread = threading.Thread(target=self._serve, daemon=True,
                                  name=f"celery-job-{self._started_threads}")
        self._threads.add(thread)
        thread.start()

    def _serve(self) -> None:
        me = threading.current_thread()
        ident = threading.get_ident()
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if self._stopping and not self._pending:
                    self._threads.discard(me)
                    return
                job = self._pending.popleft()
                if not job.future.set_running_or_notify_cancel():
                    continue
                job.thread, job.started = ident, time.monotonic()
                self._running[ident] = job
            try:
                apply_target(job.target, job.args, job.kwargs, job.callback,
                             job.accept_callback)
            except BaseException as exc:  # noqa: BLE001  (a job's end, whatever it is)
                job.future.set_exception(exc)
            if self._finish(job, ident):
                self._threads.discard(me)
                return  # abandoned: another thread has taken this one's place

    def _finish(self, job: _Job, ident: int) -> bool:
        """Take the job off the running list; True when it had been abandoned. A soft limit
        the watchdog raised just as the job returned may arrive here: it is dropped."""
        while True:
            try:
                with self._cond:
                    job.done = True  # from here on the watchdog raises nothing in this thread
                    self._running.pop(ident, None)
                    self._cond.notify_all()
                time_limits.clear_pending(ident)
                break
            except SoftTimeLimitExceeded:
                continue
        if not job.future.done():
            job.future.set_result(None)
        if job.abandoned:
            time_limits.release(ident)
            log.warning("abandoned_job_returned", seconds=round(time.monotonic() - job.started, 1))
        return job.abandoned

    # --- limits ---------------------------------------------------------------------------

    def _watch(self) -> None:
        while True:
            time.sleep(self.TICK_S)
            now = time.monotonic()
            soft: list[_Job] = []
            hard: list[_Job] = []
            with self._cond:
                if self._stopping and not self._running:
                    return
                for job in self._running.values():
                    if job.abandoned:
                        continue
                    if job.hard_s and now - job.started >= job.hard_s:
                        job.abandoned = True
                        time_limits.abandon(job.thread)
                        hard.append(job)
                        if not self._stopping:
                            self._spawn()  # the stuck thread's capacity, given back
                    elif job.soft_s and not job.soft_fired and now - job.started >= job.soft_s:
                        job.soft_fired = True
                        soft.append(job)
                for late in soft:  # under the lock, so never once the job is done
                    time_limits.raise_in_thread(late.thread, SoftTimeLimitExceeded)
            for job in soft:
                self._timed_out(job, soft=True)
            for job in hard:
                self._timed_out(job, soft=False)

    def _timed_out(self, job: _Job, soft: bool) -> None:
        limit = job.soft_s if soft else job.hard_s
        if job.timeout_callback is None or limit is None:
            return
        try:
            # Celery's Request.on_timeout: a warning for the soft limit; for the hard one the
            # task's on_failure (TimeLimitExceeded: the job fails with `time_limit`) and the ack.
            job.timeout_callback(soft, limit)
        except Exception as exc:  # noqa: BLE001  (the watchdog must keep watching)
            log.error("time_limit_handling_failed", error=str(exc), soft=soft)
