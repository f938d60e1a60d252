"""A memory's history: every version's audit events, oldest first (read path)."""

from __future__ import annotations

import uuid

from memoryd.index.generations import AuditTrail
from memoryd.memories.conflicts import version_chain
from memoryd.platform.errors import NotFound
from memoryd.records.models import Owner
from memoryd.records.schemas import HistoryEvent, MemoryHistory
from memoryd.store import Store


def memory_history(store: Store, audit: AuditTrail, owner: Owner, memory_id: str) -> MemoryHistory:
    try:
        uuid.UUID(memory_id)
    except ValueError:
        raise NotFound(f"no memory {memory_id}", field="memory_id") from None
    # A deleted memory has no point left, only its trail (without content).
    versions = version_chain(store, owner, memory_id) or [memory_id]
    events = [e for mid in versions for e in audit.audit_of(owner, mid)]
    if not events:
        raise NotFound(f"no memory {memory_id}", field="memory_id")
    events.sort(key=lambda e: e.at)
    return MemoryHistory(
        memory_id=memory_id, versions=versions,
        events=[HistoryEvent.model_validate(e.model_dump(include=set(HistoryEvent.model_fields)))
                for e in events],
    )
