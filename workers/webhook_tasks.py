"""The webhook delivery task: one attempt per run (shared/webhooks/service.py decides the
outcome and the backoff), on the `webhooks` queue, apart from every write."""

from __future__ import annotations

from typing import Any

from celery import Task
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memoryd.jobs.names import QueueName, TaskName
from memoryd.jobs.shown import arguments_shown
from memoryd.workers.bootstrap import get_runtime
from memoryd.workers.celery_app import app


class WebhookTask(Task[Any, dict[str, Any]]):
    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    # Redis away: the attempt is not counted yet, so it is simply tried again.
    autoretry_for = (RedisConnectionError, RedisTimeoutError)
    retry_backoff = 1
    retry_jitter = True
    # Attempts are bounded by `webhook_max_attempts`, counted on the delivery itself.
    max_retries = None


@app.task(name=TaskName.WEBHOOK_DELIVER.value, base=WebhookTask, bind=True)
def deliver_webhook(self: WebhookTask, delivery: dict[str, Any]) -> dict[str, Any]:
    outcome = get_runtime().webhooks.attempt(str(delivery["delivery_id"]))
    if outcome.retry_in_s is not None:
        shown: dict[str, Any] = {"queue": QueueName.WEBHOOKS.value, "argsrepr": "()",
                                 "kwargsrepr": arguments_shown({"delivery": delivery})}
        raise self.retry(countdown=outcome.retry_in_s, **shown)
    return {"status": outcome.status, "attempts": outcome.attempts,
            "status_code": outcome.status_code}
