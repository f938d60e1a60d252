"""Domain models: the stored memory record and the value types around it.

Wire schemas (what the HTTP API accepts and returns) live in `shared/records/schemas.py`;
these are what the services and the store exchange.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from shared.platform.script_share import cjk_share


class MemoryType(StrEnum):
    SEMANTIC = "semantic"
    EPISODIC = "episodic"
    PROCEDURAL = "procedural"


class Scope(StrEnum):
    GLOBAL = "global"
    PROJECT = "project"


class Source(StrEnum):
    INTERACTION = "interaction"
    EXPLICIT = "explicit"
    IMPORT = "import"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class ExtractMode(StrEnum):
    RAW = "raw"
    RULES = "rules"
    LLM = "llm"


class SaveOutcome(StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    DUPLICATE = "duplicate"


class DuplicateKind(StrEnum):
    EXACT = "exact"
    SEMANTIC = "semantic"


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """A time without a zone is taken as UTC; every stored time is UTC.

    `ValueError` (a 422 where it validates input) for a time whose offset takes it out of
    the years 1-9999 once in UTC, such as `0001-01-01T00:00:00+01:00`.
    """
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the years 1 to 9999 once converted to UTC") from None


UtcDatetime = Annotated[datetime, AfterValidator(as_utc)]


class Owner(BaseModel):
    """Whose memories: every store call carries one."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    user_id: str


class MemoryRecord(BaseModel):
    """A memory as stored (the Qdrant point payload plus its id)."""

    id: str
    tenant_id: str
    user_id: str
    content: str
    content_hash: str
    type: MemoryType = MemoryType.SEMANTIC
    category: str | None = None
    scope: Scope = Scope.GLOBAL
    project: str | None = None
    thread_id: str | None = None
    thread_seq: int | None = None  # position in the thread, for a hit's neighbours
    key: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: int = Field(5, ge=1, le=10)
    confidence: float | None = None
    source: Source = Source.EXPLICIT
    occurred_at: UtcDatetime
    created_at: UtcDatetime
    updated_at: UtcDatetime
    last_accessed_at: UtcDatetime | None = None
    access_count: int = 0
    expires_at: UtcDatetime | None = None
    enabled: bool = True
    embedding_model: str
    job_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Versions and conflicts (shared/memories/conflicts.py): a superseded memory leaves search.
    supersedes: str | None = None
    superseded_by: str | None = None
    conflicts_with: list[str] = Field(default_factory=list)

    def to_payload(self) -> dict[str, Any]:
        payload = self.model_dump(mode="json", exclude={"id"})
        # Numeric sort keys: keyset pagination and ordering need one range-indexed
        # float per sort order (ties on importance broken by recency).
        payload["created_ts"] = round(self.created_at.timestamp(), 3)
        payload["updated_ts"] = round(self.updated_at.timestamp(), 3)
        payload["importance_rank"] = self.importance * 1e11 + payload["created_ts"]
        # Searches filter on this keyword, not on the bool: Qdrant Edge 0.9 never matches
        # boolean payload values (a binding bug), and later states (superseded) fit here.
        payload["state"] = "active" if self.enabled else "disabled"
        # Search corrects the embedder's cosine for the two texts' languages.
        payload["cjk_share"] = round(cjk_share(self.content), 3)
        if self.expires_at is not None:
            # Reads hide what expired with a numeric range (shared/memories/retention.py).
            payload["expires_ts"] = round(self.expires_at.timestamp(), 3)
        if self.superseded_by is not None:
            payload["state"] = "superseded"
        return payload

    def payload_changes(self, **changes: Any) -> dict[str, Any]:
        """The payload fields that `changes` set, with the derived fields they move
        (`updated_ts` with `updated_at`, `state` with `superseded_by`): a partial write that
        keeps the stored payload what `to_payload` would give."""
        before = self.to_payload()
        after = self.model_copy(update=changes).to_payload()
        return {k: v for k, v in after.items() if k in changes or before.get(k) != v}

    @classmethod
    def from_payload(cls, point_id: str, payload: dict[str, Any]) -> MemoryRecord:
        known = cls.model_fields  # a computed class property: read once, not per key
        fields = {k: v for k, v in payload.items() if k in known}
        return cls.model_validate({**fields, "id": point_id})


class AuditKind(StrEnum):
    """What a decision did to a memory (NOOP: it was seen again, and kept as it was)."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    NOOP = "NOOP"


class AuditEvent(BaseModel):
    """One decision on one memory. A deletion keeps no content."""

    memory_id: str
    tenant_id: str
    user_id: str
    event: AuditKind
    before: str | None = None
    after: str | None = None
    job_id: str | None = None
    actor: str = "system"
    at: UtcDatetime = Field(default_factory=utcnow)
