"""Task and queue names. The gateway enqueues by these names without importing workers/."""

from __future__ import annotations

from enum import StrEnum


class QueueName(StrEnum):
    MEMORY = "memory"  # cheap writes: raw ingest, saves, edits, deletions
    LLM = "llm"  # LLM extraction, kept apart so slow model calls never hold up cheap writes


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
    ERASE = "memory.erase"  # forgotten text out of the files (shared/erasure.py; periodic)


QUEUE_OF: dict[TaskName, QueueName] = {
    TaskName.INGEST: QueueName.MEMORY,
    TaskName.SAVE: QueueName.MEMORY,
    TaskName.UPDATE: QueueName.MEMORY,
    TaskName.DELETE: QueueName.MEMORY,
    TaskName.FORGET: QueueName.MEMORY,
    TaskName.FLUSH_ACCESS: QueueName.MEMORY,
    TaskName.REINDEX: QueueName.MEMORY,
    TaskName.REINDEX_BATCH: QueueName.MEMORY,
    TaskName.REINDEX_SWITCH: QueueName.MEMORY,
    TaskName.IMPORT: QueueName.MEMORY,
    TaskName.PURGE_EXPIRED: QueueName.MEMORY,
    TaskName.EXTRACT_LLM: QueueName.LLM,
    TaskName.ERASE: QueueName.MEMORY,
}
