"""What an extractor proposes and the writer decides on."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memoryd.records.models import MemoryKind, MemorySource, MemoryType, Role, Source


@dataclass
class Candidate:
    content: str
    type: MemoryType
    occurred_at: datetime
    source: Source
    category: str | None = None
    importance: int = 5
    confidence: float | None = None
    tags: list[str] = field(default_factory=list)
    key: str | None = None
    thread_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Imports carry the original creation time and state. What an interaction brings was
    # created when the gateway accepted it (`received_at`): a thread's order follows that,
    # not when a worker got to it (`MemoryWriter.write`). Everything else starts now, enabled.
    created_at: datetime | None = None
    enabled: bool = True
    expires_at: datetime | None = None
    # Provenance: None means the kind follows from source and type (models.inferred_kind).
    kind: MemoryKind | None = None
    sources: list[MemorySource] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    # A turn kept by the default extraction: its identity is (thread, role, content), or
    # (role, content, occurred_at) without a thread (identity.turn_id), so the same turn
    # posted again is one memory; `role` is the turn's.
    turn_role: Role | None = None
    # Whether it takes a place in its thread's order (thread_seq): the default extraction's
    # facts do not, so a hit's neighbours in the thread are turns.
    sequenced: bool = True
