"""Task arguments: small JSON documents, validated on both sides of the queue."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, field_serializer

from shared.records.models import ExtractMode, MemoryType, Owner, Role, Scope, Source
from shared.records.schemas import Message, UpdateRequest


class Command(BaseModel):
    tenant_id: str
    user_id: str
    request_id: str | None = None
    received_at: datetime

    @property
    def owner(self) -> Owner:
        return Owner(tenant_id=self.tenant_id, user_id=self.user_id)


class IngestCommand(Command):
    thread_id: str | None = None
    scope: Scope
    project: str | None = None
    messages: list[Message]
    metadata: dict[str, Any] | None = None
    extract: ExtractMode
    store_roles: list[Role]
    backfill: bool = False  # routed to the bulk queue (shared/jobs/names.py queue_for)


class SaveCommand(Command):
    content: str
    key: str | None = None
    type: MemoryType
    scope: Scope
    project: str | None = None
    thread_id: str | None = None
    tags: list[str]
    importance: int
    occurred_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    source: Source = Source.EXPLICIT
    expires_at: datetime | None = None


class UpdateCommand(Command):
    memory_id: str
    changes: UpdateRequest

    @field_serializer("changes")
    def _only_given(self, changes: UpdateRequest) -> dict[str, Any]:
        # Only the fields the caller set travel: a null would mean "clear it".
        return changes.model_dump(mode="json", exclude_unset=True)


class DeleteCommand(Command):
    memory_id: str


class ForgetCommand(Command):
    thread_id: str | None = None
    before: datetime | None = None
    after: datetime | None = None
