"""Domain models: the stored memory record and the value types around it.

Wire schemas (what the HTTP API accepts and returns) live in `shared/records/schemas.py`;
these are what the services and the store exchange.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from memoryd.platform.script_share import cjk_share


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
    """Who wrote a message. `developer` (OpenAI's chat API's name for the instructions a
    `system` message holds) is handled as `system`: not kept as an episode unless
    `store_roles` names it, never read for facts."""

    # Accepted so that a chat server can post its conversation as it sends it to the model.

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    DEVELOPER = "developer"
    TOOL = "tool"


class MemoryKind(StrEnum):
    """What a memory is: a posted message kept verbatim, a fact drawn from such messages,
    or a note (an explicit save or an import)."""

    EPISODE = "episode"
    FACT = "fact"
    NOTE = "note"


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


class MemorySource(BaseModel):
    """Where a memory came from: one message of one job (or, for a note, the job itself).

    An episode has one source per time its message was posted; a fact one per message it
    was drawn from, so an extraction can be audited against the words it came from.
    """

    thread_id: str | None = None
    message_index: int | None = Field(None, description="index in the interaction's messages")
    role: Role | None = None
    metadata: dict[str, Any] = Field(default_factory=dict,
                                     description="that message's own metadata")
    job_id: str | None = None
    at: UtcDatetime = Field(description="the message's created_at, else the job's arrival")

    def same_message(self, other: MemorySource) -> bool:
        """Both name one message of one job (a redelivered job's source is not added twice)."""
        return (self.job_id, self.message_index, self.role, self.thread_id) == (
            other.job_id, other.message_index, other.role, other.thread_id)


def merge_sources(
    have: list[MemorySource], new: list[MemorySource]
) -> list[MemorySource]:
    """`have` plus those of `new` naming another message, in order."""
    merged = list(have)
    for source in new:
        if not any(source.same_message(s) for s in merged):
            merged.append(source)
    return merged


def inferred_kind(source: Any, type_: Any) -> MemoryKind:
    """The kind of a point stored before kinds existed (SOURCES_CONTRACT): an episode when
    it came from an interaction as an episodic memory, a fact from an interaction
    otherwise, else a note."""
    if str(source or Source.EXPLICIT.value) != Source.INTERACTION.value:
        return MemoryKind.NOTE
    if str(type_ or MemoryType.SEMANTIC.value) == MemoryType.EPISODIC.value:
        return MemoryKind.EPISODE
    return MemoryKind.FACT


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
    # Provenance (docs/usage.md#provenance): what the memory is, the messages it came from,
    # and for a fact the episodes it was drawn from.
    kind: MemoryKind = MemoryKind.NOTE
    sources: list[MemorySource] = Field(default_factory=list)
    episodes: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _earlier_points(cls, data: Any) -> Any:
        """A point written before kinds and sources existed reads with its kind inferred
        and one source made of what it kept: its thread, job, time and metadata (a raw
        memory's metadata holds its message's)."""
        if not isinstance(data, dict) or ("kind" in data and "sources" in data):
            return data
        data = dict(data)
        if "kind" not in data:
            data["kind"] = inferred_kind(data.get("source"), data.get("type"))
        if "sources" not in data and data.get("occurred_at") is not None:
            metadata = data.get("metadata") or {}
            role = metadata.get("role") if isinstance(metadata, dict) else None
            data["sources"] = [{
                "thread_id": data.get("thread_id"), "job_id": data.get("job_id"),
                "role": role if role in Role._value2member_map_ else None,
                "metadata": metadata if isinstance(metadata, dict) else {},
                "at": data["occurred_at"],
            }]
        return data

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
