"""The Celery app's configuration from `Settings`. The process's app is built by its
composition root (`workers/celery_app.py`; Flower: `celery -A memoryd.workers.celery_app:app`).

Task policy (retries, backoff, the LLM rate limit) is part of that configuration: the
`TaskPolicy` of the Settings an app is configured with travels on the app, and its tasks
take it from there (workers/task_base.py), so every app follows its own Settings: the
worker's, or an embedded stack's given to its `Runtime`."""

from __future__ import annotations

import ssl
from dataclasses import asdict, dataclass
from typing import Any

from celery import Celery

from memoryd.jobs.broker import TRANSPORT, ReturnTakenMessages
from memoryd.jobs.names import QUEUE_OF, QueueName, TaskName
from memoryd.platform.settings import Settings

# The app's configuration key holding its `TaskPolicy` (as a plain dict: Flower and
# `celery inspect conf` show the configuration).
POLICY_KEY = "memoryd_task_policy"


@dataclass(frozen=True)
class TaskPolicy:
    """What the task base classes (workers/task_base.py, workers/llm_task.py) take from
    `Settings`: they read it when they are bound to an app, and again each time the app is
    configured (`Runtime.celery`), before a worker of that app starts."""

    max_retries: int
    retry_backoff_max_s: int
    # Retries while a dependency is unreachable (`*_unavailable`), instead of `max_retries`.
    unavailable_max_retries: int
    # Celery's rate limit of the LLM tasks, per worker process ("60/m"); None: unlimited.
    llm_rate_limit: str | None

    @classmethod
    def from_settings(cls, settings: Settings) -> TaskPolicy:
        return cls(
            max_retries=settings.task_max_retries,
            retry_backoff_max_s=settings.task_retry_backoff_max_s,
            unavailable_max_retries=settings.task_unavailable_max_retries,
            llm_rate_limit=settings.llm_rate_limit,
        )


def task_policy(app: Celery) -> TaskPolicy | None:
    """The policy `app` was configured with; None for an app `configure` never saw."""
    values: dict[str, Any] | None = app.conf.get(POLICY_KEY)
    return TaskPolicy(**values) if values is not None else None


def configure(app: Celery, settings: Settings) -> None:
    policy = TaskPolicy.from_settings(settings)
    changed = task_policy(app) != policy
    app.conf.update(
        broker_url=settings.redis_url,
        # kombu's Redis transport, keeping a message it took but could not record
        # (memoryd.jobs.broker); rediss:// verifies the server's certificate, as memoryd's
        # own Redis clients do.
        broker_transport=TRANSPORT,
        broker_use_ssl=({"ssl_cert_reqs": ssl.CERT_REQUIRED}
                        if settings.redis_url.startswith("rediss://") else False),
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=settings.redis_timeout_s,
        broker_transport_options={
            "visibility_timeout": settings.broker_visibility_timeout_s,
            "socket_timeout": settings.redis_timeout_s,
            "socket_connect_timeout": settings.redis_timeout_s,
            # A worker on several queues takes from the first non-empty one in the order
            # given (`memoryd worker --queues memory,llm,bulk`): bulk work comes last.
            "queue_order_strategy": "priority",
        },
        result_backend=None,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=QueueName.MEMORY.value,
        task_routes={name.value: {"queue": queue.value} for name, queue in QUEUE_OF.items()},
        task_soft_time_limit=settings.job_soft_time_limit_s,
        task_time_limit=settings.job_time_limit_s,
        # Task events cost three Redis publishes per task. Server-mode workers start with
        # them on (-E) unless MEMORYD_TASK_EVENTS=false; the embedded worker only with
        # MEMORYD_TASK_EVENTS=true or when Flower asks (enable_events).
        worker_send_task_events=bool(settings.task_events),
        task_send_sent_event=bool(settings.task_events),
        beat_schedule={
            "purge-expired": {
                "task": TaskName.PURGE_EXPIRED.value,
                "schedule": settings.retention_purge_interval_s,
                "options": {"queue": QUEUE_OF[TaskName.PURGE_EXPIRED].value},
            },
            **({"erase-forgotten": {
                "task": TaskName.ERASE.value,
                "schedule": settings.erasure_compaction_s,
                "options": {"queue": QUEUE_OF[TaskName.ERASE].value},
            }} if settings.erasure_compaction_s > 0 else {}),
        },
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        include=["memoryd.workers.tasks"],
    )
    app.conf[POLICY_KEY] = asdict(policy)
    # Tasks built before (at the app's finalization) take the new policy now; Celery calls
    # `on_bound` for the ones built later. Never finalizes the app itself.
    if changed and app.finalized:  # type: ignore[attr-defined]  # not in celery-types
        for task in list(app.tasks.values()):
            task.on_bound(app)


def create_app(settings: Settings) -> Celery:
    app = Celery("memoryd", set_as_current=False)
    configure(app, settings)
    app.steps["consumer"].add(ReturnTakenMessages)
    return app

