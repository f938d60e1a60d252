"""Wire models of webhooks: endpoint registration, the endpoints and deliveries listed, and
the event a receiver gets. The API, the Python client and the delivery service share them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

URL_MAX_CHARS = 2048


class EventKind(StrEnum):
    JOB_SUCCEEDED = "job.succeeded"
    JOB_FAILED = "job.failed"
    MEMORY_ADDED = "memory.added"
    MEMORY_UPDATED = "memory.updated"
    MEMORY_DELETED = "memory.deleted"


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # enqueued, no attempt yet
    RETRYING = "retrying"  # an attempt failed; the next one is at `next_retry_at`
    DELIVERED = "delivered"  # the receiver answered 2xx
    FAILED = "failed"  # every attempt failed, or the endpoint is gone or now refused


class WebhookCreate(BaseModel):
    """`POST /v1/webhooks`. The URL is checked again at every delivery (DNS can change)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(..., min_length=1, max_length=URL_MAX_CHARS,
                     description="http(s) URL; no credentials; public hosts unless allowed")
    events: list[EventKind] = Field(..., min_length=1, max_length=len(EventKind))
    include_content: bool = Field(
        False, description="memory.added / memory.updated events carry the memory's text")
    description: str | None = Field(None, max_length=200)

    @field_validator("events")
    @classmethod
    def _distinct(cls, value: list[EventKind]) -> list[EventKind]:
        return list(dict.fromkeys(value))


class WebhookView(BaseModel):
    """An endpoint as listed: never its secret."""

    id: str
    url: str
    events: list[EventKind]
    include_content: bool
    description: str | None = None
    created_at: datetime
    secret_rotated_at: datetime | None = None


class WebhookCreated(WebhookView):
    """Registration (and secret rotation): the signing secret, shown this once."""

    secret: str


class WebhookList(BaseModel):
    items: list[WebhookView]


class DeliveryView(BaseModel):
    id: str
    endpoint_id: str
    event_id: str
    event: EventKind
    status: DeliveryStatus
    attempts: int
    last_status_code: int | None = None
    last_error: str | None = None
    next_retry_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None = None


class DeliveryList(BaseModel):
    items: list[DeliveryView]


class EventData(BaseModel):
    """What happened, by ids: never the tenant. `memories` (id and content) only for an
    endpoint registered with `include_content`."""

    user_id: str
    job_id: str
    job_kind: str
    memory_ids: list[str] = Field(default_factory=list)
    memories: list[dict[str, Any]] | None = None
    added: list[str] | None = None  # job.succeeded: what the job changed
    updated: list[str] | None = None
    deleted: list[str] | None = None
    deleted_count: int | None = None  # a range forget reports how many, not which
    error: dict[str, Any] | None = None  # job.failed: code and message


class WebhookEvent(BaseModel):
    """The JSON body POSTed to a receiver."""

    id: str
    type: EventKind
    created_at: datetime
    data: EventData
