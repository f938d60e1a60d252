"""The events of a finished job, built from the result the job store records for it.

One `job.succeeded` or `job.failed` per job, and for a job that changed memories one
`memory.added`, `memory.updated` and `memory.deleted` each at most, listing the ids. Event ids
are UUIDv5 of (tenant, job, kind): a job that is recorded finished twice (a redelivered
message, a retry) produces the same events, which the delivery log then sends once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from memoryd.records.models import utcnow
from memoryd.records.webhooks import EventData, EventKind, WebhookEvent

_NAMESPACE = uuid.UUID("6f1c1d0e-3a5b-5c42-9d7e-2b8f4e6a9c01")
_OUTCOMES = {"added": EventKind.MEMORY_ADDED, "updated": EventKind.MEMORY_UPDATED,
             "deleted": EventKind.MEMORY_DELETED}


def event_id(tenant_id: str, job_id: str, kind: EventKind) -> str:
    return "evt_" + uuid.uuid5(_NAMESPACE, f"{tenant_id}\x1f{job_id}\x1f{kind.value}").hex


@dataclass
class Changes:
    """What a job did to memories: ids per outcome, and the texts its result holds."""

    ids: dict[EventKind, list[str]] = field(default_factory=dict)
    contents: dict[str, str] = field(default_factory=dict)
    deleted_count: int | None = None

    def note(self, outcome: object, memory_id: object, content: object = None) -> None:
        kind = _OUTCOMES.get(str(outcome))
        if kind is None or not isinstance(memory_id, str) or not memory_id:
            return  # duplicates, no-ops and skips changed nothing
        found = self.ids.setdefault(kind, [])
        if memory_id not in found:
            found.append(memory_id)
        if isinstance(content, str) and kind is not EventKind.MEMORY_DELETED:
            self.contents[memory_id] = content


def changes_of(result: dict[str, Any]) -> Changes:
    """Read every result shape the write tasks return (shared/memories/writes.py, the LLM
    extraction, imports): lists of items with an outcome, one memory with an outcome, or a
    deletion's ids (a range forget reports only its count)."""
    changes = Changes()
    for group in ("memories", "applied", "records"):
        for item in result.get(group) or []:
            if isinstance(item, dict):
                changes.note(item.get("outcome"), item.get("id") or item.get("memory_id"),
                             item.get("content"))
    memory = result.get("memory")
    if isinstance(memory, dict):
        changes.note(result.get("outcome"), memory.get("id"), memory.get("content"))
    elif "outcome" in result and "memory_id" in result:
        changes.note(result.get("outcome"), result.get("memory_id"), result.get("content"))
    if "deleted" in result and not any(g in result for g in ("memories", "applied")):
        ids = result.get("ids")
        if isinstance(ids, list):
            # A forgotten episode's facts drawn only from it are forgotten with it.
            for memory_id in [*ids, *(result.get("facts_forgotten") or [])]:
                changes.note("deleted", memory_id)
        elif isinstance(result.get("deleted"), int):
            changes.deleted_count = int(result["deleted"])
            if changes.deleted_count:
                changes.ids.setdefault(EventKind.MEMORY_DELETED, [])
    return changes


@dataclass(frozen=True)
class JobEnd:
    """A job as it ended: who it was for, what kind, and its result or its error."""

    tenant_id: str
    user_id: str
    job_id: str
    job_kind: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def events_of(end: JobEnd) -> list[tuple[WebhookEvent, WebhookEvent]]:
    """Each event twice: as sent to endpoints without `include_content`, and with it."""
    now = utcnow()
    base = {"user_id": end.user_id, "job_id": end.job_id, "job_kind": end.job_kind}
    out: list[tuple[WebhookEvent, WebhookEvent]] = []

    def add(kind: EventKind, data: dict[str, Any], texts: list[dict[str, Any]] | None) -> None:
        plain = WebhookEvent(id=event_id(end.tenant_id, end.job_id, kind), type=kind,
                             created_at=now, data=EventData(**base, **data))
        full = plain if texts is None else plain.model_copy(
            update={"data": plain.data.model_copy(update={"memories": texts})})
        out.append((plain, full))

    if end.error is not None or end.result is None:
        error = end.error or {}
        add(EventKind.JOB_FAILED, {"error": {"code": error.get("code", "internal_error"),
                                            "message": error.get("message", "")}}, None)
        return out
    changes = changes_of(end.result)
    summary = {name: changes.ids.get(kind, []) for name, kind in _OUTCOMES.items()}
    add(EventKind.JOB_SUCCEEDED, {**summary, "deleted_count": changes.deleted_count}, None)
    for kind in (EventKind.MEMORY_ADDED, EventKind.MEMORY_UPDATED, EventKind.MEMORY_DELETED):
        if kind not in changes.ids:
            continue
        ids = changes.ids[kind]
        data: dict[str, Any] = {"memory_ids": ids}
        if kind is EventKind.MEMORY_DELETED:
            data["deleted_count"] = (changes.deleted_count if changes.deleted_count is not None
                                     else len(ids))
            add(kind, data, None)
        else:
            add(kind, data, [{"id": i, "content": changes.contents.get(i)} for i in ids])
    return out
