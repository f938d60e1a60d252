"""The gateway's only way to change memories: record a job, then enqueue its task by name."""

from __future__ import annotations

import uuid

from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from memoryd.jobs.job_store import JobStore
from memoryd.jobs.lanes import Lanes
from memoryd.jobs.names import SHARED_WRITES, QueueName, TaskName, queue_for
from memoryd.jobs.send import send
from memoryd.platform.errors import IdempotencyConflict, QueueUnavailable
from memoryd.records.commands import Command
from memoryd.records.identity import job_id_for, request_digest
from memoryd.records.models import JobStatus
from memoryd.records.schemas import JobAccepted


def submit(
    jobs: JobStore,
    celery: Celery,
    task: TaskName,
    command: Command,
    idempotency_key: str | None = None,
    lanes: Lanes | None = None,
) -> JobAccepted:
    """Enqueue once per idempotency key of one user and one operation (the task).

    The key's job records the digest of the command (without its request id and arrival
    time): the same key with the same request gets the first job back, in its current
    status; with another request it is refused (409 `idempotency_conflict`), so a reused
    key never silently drops a turn. Without a key every call is a new job.

    With `lanes`, a write bound for the memory queue takes a place in its tenant's and
    user's share of it, or overflows to the bulk queue when that share is full
    (shared/jobs/lanes.py): one tenant's flood never holds every memory-queue thread.
    """
    tenant = command.tenant_id
    digest = ""
    if idempotency_key:
        job_id = job_id_for(tenant, command.user_id, task.value, idempotency_key)
        digest = request_digest(
            command.model_dump(mode="json", exclude={"request_id", "received_at"}))
    else:
        job_id = str(uuid.uuid4())
    try:
        if not jobs.create(job_id, tenant, task.value, command.request_id,
                           command.user_id, digest):
            first = jobs.digest(job_id)
            if first is not None and first != digest:
                raise IdempotencyConflict(
                    f"idempotency_key {idempotency_key!r} was used for another request by "
                    "this user; use a new key for a new request", field="idempotency_key")
            return JobAccepted(job_id=job_id, status=jobs.get(job_id, tenant).status)
    except RedisError as exc:
        raise QueueUnavailable(f"the queue is unreachable: {exc}") from exc
    kwargs = {"command": command.model_dump(mode="json")}
    try:
        if (lanes is not None and task in SHARED_WRITES
                and queue_for(task, kwargs) is QueueName.MEMORY
                and not lanes.admit(job_id, tenant, command.user_id)):
            kwargs["command"]["overflow"] = True
        send(celery, task, kwargs, job_id)
    except (OperationalError, RedisError, OSError) as exc:
        try:
            jobs.discard(job_id)
        except RedisError:
            pass
        raise QueueUnavailable(f"the queue is unreachable: {exc}") from exc
    return JobAccepted(job_id=job_id, status=JobStatus.QUEUED)

