"""Task arguments: small JSON documents, validated on both sides of the queue.

A command carries the validated request it came from (`request`), plus what the gateway
decided (owner, request id, arrival time, the extraction mode): the fields are not copied
a second time. Commands queued by an earlier version, with the request's fields at the top
level, are read too (`_from_flat`), so an upgrade does not fail the jobs waiting in Redis.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, field_serializer, model_validator

from memoryd.records.models import ExtractMode, MemoryType, Owner, Role, Scope, Source
from memoryd.records.schemas import InteractionRequest, Message, SaveRequest, UpdateRequest


class Command(BaseModel):
    tenant_id: str
    user_id: str
    request_id: str | None = None
    received_at: datetime
    # Who asked, for the audit trail: `api:<key id>` or `mcp:<key id>` (api/deps.py);
    # None for commands queued by an earlier version (audited as "system").
    actor: str | None = None

    @property
    def owner(self) -> Owner:
        return Owner(tenant_id=self.tenant_id, user_id=self.user_id)


def _from_flat(data: Any, fields: tuple[str, ...], keep: tuple[str, ...]) -> Any:
    """An earlier version's command (the request's `fields` at the top level) in today's
    form; `keep` stay at the top level. Today's form passes unchanged."""
    if not isinstance(data, dict) or "request" in data:
        return data
    request = {k: data[k] for k in fields if k in data}
    request["user_id"] = data.get("user_id")
    return {**{k: v for k, v in data.items() if k not in fields or k in keep},
            "request": request}


class IngestCommand(Command):
    request: InteractionRequest
    extract: ExtractMode  # the request's, or the deployment's default
    # The default extraction (no `extract` in the request): every user and assistant turn is
    # kept as an episode beside the facts `extract` draws. False for a caller's explicit
    # mode, and for commands queued before it existed.
    episodes: bool = False

    @model_validator(mode="before")
    @classmethod
    def _earlier_form(cls, data: Any) -> Any:
        return _from_flat(data, ("thread_id", "scope", "project", "messages", "metadata",
                                 "store_roles", "backfill", "extract"), ("extract",))

    @property
    def thread_id(self) -> str | None:
        return self.request.thread_id

    @property
    def scope(self) -> Scope:
        return self.request.resolved_scope()

    @property
    def project(self) -> str | None:
        return self.request.project

    @property
    def messages(self) -> list[Message]:
        """The messages that say something: one left empty by normalisation (a turn of only
        a zero-width space) is dropped here, for every extraction mode, and reported in the
        job result (`dropped_messages`); the request refuses an interaction with none left."""
        return [m for m in self.request.messages if m.says_something()]

    def request_index(self, position: int) -> int:
        """Where `messages[position]` stands in the request (provenance names the message as
        the caller posted it, counting any dropped before it)."""
        return [i for i, m in enumerate(self.request.messages) if m.says_something()][position]

    @property
    def dropped_messages(self) -> list[int]:
        """Positions in the request of the messages `messages` leaves out."""
        return [i for i, m in enumerate(self.request.messages) if not m.says_something()]

    @property
    def metadata(self) -> dict[str, Any] | None:
        return self.request.metadata

    @property
    def store_roles(self) -> list[Role]:
        return self.request.store_roles

    @property
    def backfill(self) -> bool:  # routed to the bulk queue (shared/jobs/names.py queue_for)
        return self.request.backfill


class SaveCommand(Command):
    request: SaveRequest
    source: Source = Source.EXPLICIT

    @model_validator(mode="before")
    @classmethod
    def _earlier_form(cls, data: Any) -> Any:
        return _from_flat(data, ("content", "key", "type", "scope", "project", "thread_id",
                                 "tags", "importance", "occurred_at", "metadata",
                                 "expires_at"), ())

    @property
    def content(self) -> str:
        return self.request.content

    @property
    def key(self) -> str | None:
        return self.request.key

    @property
    def type(self) -> MemoryType:
        return self.request.type

    @property
    def scope(self) -> Scope:
        return self.request.resolved_scope()

    @property
    def project(self) -> str | None:
        return self.request.project

    @property
    def thread_id(self) -> str | None:
        return self.request.thread_id

    @property
    def tags(self) -> list[str]:
        return list(self.request.tags)

    @property
    def importance(self) -> int:
        return self.request.importance

    @property
    def occurred_at(self) -> datetime | None:
        return self.request.occurred_at

    @property
    def metadata(self) -> dict[str, Any] | None:
        return self.request.metadata

    @property
    def expires_at(self) -> datetime | None:
        return self.request.expires_at


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
