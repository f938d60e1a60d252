"""One base task sets the policy for every task (retries, time limits, acks, leases: the
Task policy of docs/architecture.md) and keeps job state current.

The numbers of that policy (retries, backoff ceiling, the LLM rate limit) are the Settings'
the task's app was configured with (`memoryd.jobs.celery_app.TaskPolicy`): a worker built
with other Settings (the embedded stack's, a test's) runs its tasks with those."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import structlog
from billiard.einfo import ExceptionInfo
from celery import Celery, Task
from celery.exceptions import Reject
from celery.utils.time import get_exponential_backoff_interval
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memoryd.index import reindex
from memoryd.jobs import time_limits
from memoryd.jobs.celery_app import TaskPolicy, task_policy
from memoryd.jobs.envelope import C, envelope, parse_command
from memoryd.jobs.leases import keeper
from memoryd.jobs.names import TaskName, queue_for
from memoryd.jobs.shown import arguments_shown, shown
from memoryd.memories.writes import MemoryWriter
from memoryd.platform import failpoints
from memoryd.platform.errors import AppError, JobRunning, TransientError
from memoryd.platform.logs import exception_summary, get_logger
from memoryd.platform.settings import Settings
from memoryd.webhooks.events import JobEnd
from memoryd.workers.bootstrap import get_runtime

__all__ = ["C", "MemoryTask", "ReindexTask", "error_body", "parse_command", "unavailable"]

log = get_logger("memoryd.task")

# The attribute of a task run's request (Celery's per-run context, still current in
# `on_success`) that carries the job's whole result from the task body to the job store.
_RESULT = "memoryd_result"

TRANSIENT = (TransientError, RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError)


def unavailable(exc: BaseException) -> bool:
    """A dependency is unreachable, as opposed to busy (a lock) or broken (bad input)."""
    if isinstance(exc, AppError):
        return exc.code.endswith("_unavailable")
    return isinstance(exc, TRANSIENT)


def error_body(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, AppError):
        return exc.to_dict()
    over = time_limits.as_time_limit(exc)
    if over is not None:
        return over.to_dict()
    # An unexpected exception's message may quote the text it failed on: the job record keeps
    # its type only (its traceback, equally without the text, is in the worker's log).
    return {"code": "internal_error", "message": exception_summary(exc)}


# How long a worker thread waits for Redis to record a job's final failure. Celery decides
# that a run failed for good after the run, so nothing retries it from here: the record is
# the job's last word (the failed-jobs list, `POST /v1/jobs/{id}/retry`'s arguments), and a
# Redis restart takes seconds.
FAILURE_RECORD_WAIT_S = 30.0


def _while_redis_returns(write: Callable[[], None], wait_s: float) -> bool:
    """`write()`, tried again every half second while Redis does not answer, for up to
    `wait_s`; False when it never went through."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            write()
            return True
        except RedisError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)


def _origin(task_id: str, kwargs: Any) -> dict[str, Any]:
    """Ids for the hooks Celery calls after the task's log context has been left."""
    return {"task_id": task_id, "job_id": task_id, "request_id": envelope(kwargs).request_id}


class MemoryTask(Task[Any, dict[str, Any]]):
    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    autoretry_for = TRANSIENT
    # Exponential backoff with full jitter, capped at `retry_backoff_max`: computed in
    # `retry` from the policy current then, not by Celery's autoretry (which would keep the
    # ceiling the task had when it was built).
    retry_backoff = False
    retry_jitter = True
    # The app's `TaskPolicy` replaces these when the task is bound and whenever the app is
    # configured again (`on_bound`); until then, the Settings' defaults.
    max_retries: int | None = Settings.model_fields["task_max_retries"].default
    retry_backoff_max: int = Settings.model_fields["task_retry_backoff_max_s"].default
    unavailable_max_retries: int = Settings.model_fields["task_unavailable_max_retries"].default
    # No time limits here: the app's (`job_soft_time_limit_s`, `job_time_limit_s`, from the
    # Settings the worker was built with) reach every pool (shared/jobs/time_limits.py).
    # Bookkeeping tasks (access statistics) have no job a caller could ask about. A task
    # that tracks its job returns through `run_command`, which hands `on_success` its result.
    tracks_job = True

    @classmethod
    def on_bound(cls, app: Celery) -> None:
        policy = task_policy(app)
        if policy is not None:
            cls.apply_policy(policy)

    @classmethod
    def apply_policy(cls, policy: TaskPolicy) -> None:
        cls.max_retries = policy.max_retries
        cls.retry_backoff_max = policy.retry_backoff_max_s
        cls.unavailable_max_retries = policy.unavailable_max_retries

    def retry(
        self,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        exc: Exception | None = None,
        throw: bool = True,
        eta: datetime | None = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        # A dependency that is down (store, embedder, Redis, later the LLM) comes back on its
        # own: such jobs keep retrying far longer than other transient failures.
        if max_retries is None and exc is not None and unavailable(exc):
            max_retries = self.unavailable_max_retries
        if countdown is None and eta is None:  # autoretry: the exponential backoff
            countdown = get_exponential_backoff_interval(
                factor=1, retries=self.request.retries, maximum=self.retry_backoff_max,
                full_jitter=bool(self.retry_jitter))
        # The re-sent message shows what the first one showed: no content (queue/shown.py).
        sent = kwargs if kwargs is not None else self.request.kwargs or {}
        options.setdefault("argsrepr", "()")
        options.setdefault("kwargsrepr", arguments_shown(sent))
        # Back to the queue it was routed to (a backfill goes to the bulk queue).
        if self.name in TaskName.__members__.values():
            options.setdefault("queue", queue_for(TaskName(self.name), sent).value)
        try:
            return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries,
                                 **options)
        except Reject as rejected:
            # (celery-types does not declare Reject's two attributes)
            reason: Exception | str | None = getattr(rejected, "reason", None)
            if getattr(rejected, "requeue", False):
                raise
            # Celery rejects without requeue when it cannot send the retry: the broker went
            # away under it (a Redis restart). Acked, the message would be gone and the job
            # with it. It goes back to its queue instead: at once, or, with the broker still
            # down, when the consumer reconnects (workers/inprocess.py) or its visibility
            # timeout passes. Running the job again is safe: its writes are idempotent.
            log.warning("retry_not_sent_requeued",
                        error=exception_summary(reason) if isinstance(reason, Exception)
                        else str(reason), **_origin(str(self.request.id), sent))
            raise Reject(reason, requeue=True) from rejected

    def on_retry(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: ExceptionInfo
    ) -> None:
        if isinstance(exc, JobRunning):  # the running delivery keeps the job's state
            log.info("task_waits_for_running_copy", **_origin(task_id, kwargs))
            return
        log.warning("task_retrying", error=str(exc), **_origin(task_id, kwargs))
        if self.tracks_job:
            try:
                get_runtime().jobs.mark_retrying(task_id, error_body(exc))
            except RedisError as recording:
                # The retry is already sent, so this state is only shown. Raised, the
                # error would make Celery fail this run and record the job `failed`.
                log.warning("job_state_not_recorded", state="retrying",
                            error=str(recording), **_origin(task_id, kwargs))

    def on_success(self, retval: Any, task_id: str, args: Any, kwargs: Any) -> None:
        # The success itself is recorded by the run (`_succeeded`). None: the run tracks no
        # job (maintenance tasks).
        result = getattr(self.request, _RESULT, None)
        if self.tracks_job and result is not None and not time_limits.abandoned():
            self._emit_webhooks(task_id, kwargs, result=result)

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: ExceptionInfo
    ) -> None:
        if time_limits.abandoned():  # already failed for its hard limit (thread pool)
            return
        over = time_limits.as_time_limit(exc)
        log.error("task_failed", error=str(exc),
                  exc_info=not isinstance(exc, AppError) and over is None,
                  **_origin(task_id, kwargs))
        if self.tracks_job:
            # Drills take Redis away right here: the job failed, its failure not recorded.
            failpoints.reach(failpoints.JOB_FAIL)
            body, sent = error_body(exc), dict(kwargs or {})
            if not _while_redis_returns(
                    lambda: get_runtime().jobs.mark_failed(task_id, body, sent),
                    FAILURE_RECORD_WAIT_S):
                log.error("job_state_not_recorded", state="failed", **_origin(task_id, kwargs))
            self._emit_webhooks(task_id, kwargs, error=body)

    def _emit_webhooks(self, task_id: str, kwargs: Any, result: dict[str, Any] | None = None,
                       error: dict[str, Any] | None = None) -> None:
        """The job's webhook events, once its outcome is recorded: once per job (their ids
        come from the job's), and never failing it (`Webhooks.emit`)."""
        sent = envelope(kwargs)
        if sent.tenant_id is not None and sent.user_id is not None:
            get_runtime().webhooks.emit(
                JobEnd(sent.tenant_id, sent.user_id, task_id, self.name, result, error))

    def run_command(
        self,
        command: dict[str, Any],
        model: type[C],
        action: Callable[[MemoryWriter, C, str], dict[str, Any]],
    ) -> dict[str, Any]:
        with self.context(command) as job_id, self._lease(job_id):
            # A redelivered message of a job that already succeeded does nothing again.
            done = get_runtime().jobs.begin(job_id) if self.tracks_job else None
            if done is not None:
                return self._finished(job_id, done)
            rt = get_runtime()
            # One index generation for the whole run: a re-embedding switches between tasks.
            # The run is a session of the document model: while other jobs (or searches) are
            # between their model calls, e5 runs narrow instead of spinning a wide team.
            parsed = parse_command(model, command)
            with rt.index.writing() as view, view.embedder.session():
                result = action(rt.writer(view), parsed, job_id)
            return self._succeeded(job_id, result)

    @contextmanager
    def _lease(self, job_id: str) -> Iterator[None]:
        """Run only while holding the job's lease (shared/jobs/leases.py). Another delivery
        holds it: this one is sent again for when that lease would end unless renewed, and
        then finds the job done, or free to run if its holder died."""
        if not self.tracks_job:
            yield
            return
        rt = get_runtime()
        ttl_s = rt.settings.job_lease_s
        token = keeper.token()
        busy_for = keeper.take(rt.jobs, job_id, token, ttl_s)
        if busy_for is not None:
            raise self.retry(exc=JobRunning(f"job {job_id} is running in another delivery"),
                             countdown=min(busy_for, ttl_s) + 0.2,
                             max_retries=self.request.retries + 1)
        keeper.hold(rt.jobs, job_id, token, ttl_s)
        try:
            yield
        finally:
            keeper.drop(token)

    def _succeeded(self, job_id: str, result: dict[str, Any]) -> dict[str, Any]:
        """Record the job's success as part of its run, still under its lease and before
        its message is acknowledged. Celery calls `on_success` after the run, logs and
        swallows what it raises, then acknowledges: a success that Redis was not there to
        record then left the job `running` for good. Raised here, a Redis error is the
        run's, and the job is retried or its message given back like any other run's
        (its writes are idempotent; a later run that finds it done does nothing)."""
        if self.tracks_job and not time_limits.abandoned():
            # Drills take Redis away right here: the writes done, the success not recorded.
            failpoints.reach(failpoints.JOB_FINISH)
            get_runtime().jobs.mark_succeeded(job_id, result)
        log.info("task_succeeded")
        return self._finished(job_id, result)

    def _finished(self, job_id: str, result: dict[str, Any]) -> dict[str, Any]:
        """The job's whole result waits for `on_success` (its webhook events), and Celery
        gets only its ids and sizes: its return value goes into task events, so Flower
        (shared/jobs/shown.py)."""
        if self.tracks_job:
            setattr(self.request, _RESULT, result)
        return shown(result)

    @contextmanager
    def context(self, command: dict[str, Any]) -> Iterator[str]:
        """Bind the job's ids into every log line of this task run."""
        job_id = str(self.request.id)
        sent = envelope({"command": command})
        with structlog.contextvars.bound_contextvars(
            task=self.name, task_id=job_id, job_id=job_id,
            request_id=sent.request_id, tenant_id=sent.tenant_id,
            attempt=self.request.retries,
        ):
            yield job_id


class ReindexTask(MemoryTask):
    """Re-embedding steps keep their job's state themselves (progress, one job over many
    tasks); a step that fails for good fails that job and frees the re-embedding lock."""

    abstract = True
    tracks_job = False

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: ExceptionInfo
    ) -> None:
        super().on_failure(exc, task_id, args, kwargs, einfo)
        job_id = envelope(kwargs).job_id
        if job_id:
            reindex.fail(get_runtime().reindexing, job_id, error_body(exc))
