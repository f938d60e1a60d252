"""What an extractor proposes and the writer decides on."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.records.models import MemoryType, Source


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
    # Imports carry the original creation time and state; everything else starts now, enabled.
    created_at: datetime | None = None
    enabled: bool = True
    expires_at: datetime | None = None
