"""The Celery app's configuration from `Settings`. The process's app is built by its
composition root (`workers/celery_app.py`; Flower: `celery -A memoryd.workers.celery_app:app`)."""

from __future__ import annotations

from celery import Celery

from memoryd.jobs.names import QUEUE_OF, QueueName, TaskName
from memoryd.platform.settings import Settings


def configure(app: Celery, settings: Settings) -> None:
    app.conf.update(
        broker_url=settings.redis_url,
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


def create_app(settings: Settings) -> Celery:
    app = Celery("memoryd", set_as_current=False)
    configure(app, settings)
    return app

