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
    EXTRACT_LLM = "memory.extract_llm"  # an interaction through the LLM extractor


QUEUE_OF: dict[TaskName, QueueName] = {
    TaskName.INGEST: QueueName.MEMORY,
    TaskName.SAVE: QueueName.MEMORY,
    TaskName.UPDATE: QueueName.MEMORY,
    TaskName.DELETE: QueueName.MEMORY,
    TaskName.FORGET: QueueName.MEMORY,
    TaskName.FLUSH_ACCESS: QueueName.MEMORY,
    TaskName.EXTRACT_LLM: QueueName.LLM,
}
