"""Task and queue names. The gateway enqueues by these names without importing workers/."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from memoryd.jobs.envelope import envelope


class QueueName(StrEnum):
    MEMORY = "memory"  # cheap writes: raw ingest, saves, edits, deletions
    LLM = "llm"  # LLM extraction, kept apart so slow model calls never hold up cheap writes
    # Bulk work (imports, backfill interactions, re-embedding, retention purges), on worker
    # capacity of its own: one tenant's backlog never holds up another's saves.
    BULK = "bulk"
    # Webhook deliveries: a slow or failing receiver holds only this queue's capacity.
    WEBHOOKS = "webhooks"


class TaskName(StrEnum):
    INGEST = "memory.ingest"
    SAVE = "memory.save"
    UPDATE = "memory.update"
    DELETE = "memory.delete"
    FORGET = "memory.forget"
    FLUSH_ACCESS = "memory.flush_access"  # batched access statistics from searches
    REINDEX = "index.reindex"  # re-embedding: create the target, start copying
    REINDEX_BATCH = "index.reindex_batch"  # one batch of points; enqueues the next
    REINDEX_SWITCH = "index.reindex_switch"  # catch up with writes, switch atomically
    IMPORT = "memory.import"  # POST /v1/import: a batch of explicit saves, source=import
    PURGE_EXPIRED = "memory.purge_expired"  # retention: delete what expired (beat / timer)
    EXTRACT_LLM = "memory.extract_llm"  # an interaction through the LLM extractor
    ERASE = "memory.erase"  # forgotten text out of the files (shared/memories/erasure.py; periodic)
    WEBHOOK_DELIVER = "webhook.deliver"  # one attempt of one delivery (shared/webhooks/)


QUEUE_OF: dict[TaskName, QueueName] = {
    TaskName.INGEST: QueueName.MEMORY,
    TaskName.SAVE: QueueName.MEMORY,
    TaskName.UPDATE: QueueName.MEMORY,
    TaskName.DELETE: QueueName.MEMORY,
    TaskName.FORGET: QueueName.MEMORY,
    TaskName.FLUSH_ACCESS: QueueName.MEMORY,
    TaskName.REINDEX: QueueName.BULK,
    TaskName.REINDEX_BATCH: QueueName.BULK,
    TaskName.REINDEX_SWITCH: QueueName.BULK,
    TaskName.IMPORT: QueueName.BULK,
    TaskName.PURGE_EXPIRED: QueueName.BULK,
    TaskName.EXTRACT_LLM: QueueName.LLM,
    TaskName.ERASE: QueueName.MEMORY,
    TaskName.WEBHOOK_DELIVER: QueueName.WEBHOOKS,
}


# Writes that take a place in their owner's share of the memory queue at enqueue
# (shared/jobs/lanes.py). A forget is not among them: it is rare, bounded, and erasure's
# clock starts with it.
SHARED_WRITES = frozenset({TaskName.INGEST, TaskName.SAVE, TaskName.UPDATE, TaskName.DELETE})


def queue_for(task: TaskName, kwargs: Mapping[str, Any]) -> QueueName:
    """Where a task's message goes: its task's queue, or the bulk queue for a command the
    client marked as backfill (`"backfill": true` on an interaction) or one that overflowed
    its owner's share of the memory queue at enqueue (`"overflow": true`, set by
    `memoryd.jobs.enqueue.submit`). Retries and recovery call this too, so a job keeps its
    queue."""
    sent = envelope(kwargs)
    return QueueName.BULK if sent.backfill or sent.overflow else QUEUE_OF[task]
