"""The gateway's only way to change memories: record a job, then enqueue its task by name."""

from __future__ import annotations

import uuid

from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from shared.commands import Command
from shared.errors import QueueUnavailable
from shared.identity import job_id_for
from shared.models import JobStatus
from shared.queue.names import TaskName
from shared.queue.send import send
from shared.runtime import Runtime
from shared.schemas import JobAccepted


def submit(
    rt: Runtime, task: TaskName, command: Command, idempotency_key: str | None = None
) -> JobAccepted:
    """Enqueue once per idempotency key within a tenant; a repeat gets the first job back."""
    tenant = command.tenant_id
    job_id = job_id_for(tenant, idempotency_key) if idempotency_key else str(uuid.uuid4())
    try:
        if not rt.jobs.create(job_id, tenant, task.value, command.request_id, command.user_id):
            return JobAccepted(job_id=job_id, status=rt.jobs.get(job_id, tenant).status)
    except RedisError as exc:
        raise QueueUnavailable(f"the queue is unreachable: {exc}") from exc
    try:
        send(rt.celery, task, {"command": command.model_dump(mode="json")}, job_id)
    except (OperationalError, RedisError, OSError) as exc:
        try:
            rt.jobs.discard(job_id)
        except RedisError:
            pass
        raise QueueUnavailable(f"the queue is unreachable: {exc}") from exc
    return JobAccepted(job_id=job_id, status=JobStatus.QUEUED)

