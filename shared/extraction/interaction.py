"""Interaction → candidates, by the mode the request chose."""

from __future__ import annotations

from datetime import datetime
from functools import partial

from shared.extraction.redaction import redact
from shared.extraction.rules import extract_rules
from shared.platform.errors import ExtractorUnavailable
from shared.platform.text_pace import TextPacer, default_pacer
from shared.records.candidate import Candidate
from shared.records.commands import IngestCommand
from shared.records.models import ExtractMode, MemoryType, Role, Source
from shared.records.schemas import Message


def _when(message: Message, fallback: datetime) -> datetime:
    return message.created_at or fallback


def raw_candidates(cmd: IngestCommand) -> list[Candidate]:
    """Each message of a stored role becomes an episodic memory, metadata kept."""
    roles = set(cmd.store_roles)
    return [
        Candidate(
            content=m.content.strip(),
            type=MemoryType.EPISODIC,
            occurred_at=_when(m, cmd.received_at),
            source=Source.INTERACTION,
            thread_id=cmd.thread_id,
            metadata={**(cmd.metadata or {}), **(m.metadata or {}), "role": m.role.value},
        )
        for m in cmd.messages
        if m.role in roles
    ]


def rule_candidates(cmd: IngestCommand, pacer: TextPacer | None = None) -> list[Candidate]:
    """Only the user's own words become facts about the user."""
    user_messages = [m for m in cmd.messages if m.role is Role.USER]
    if not user_messages:
        return []
    when = max(_when(m, cmd.received_at) for m in user_messages)
    return [
        Candidate(
            content=c.content,
            type=MemoryType(c.type),
            category=c.category,
            importance=c.importance,
            occurred_at=when,
            source=Source.INTERACTION,
            thread_id=cmd.thread_id,
            metadata=dict(cmd.metadata or {}),
        )
        for c in extract_rules([m.content for m in user_messages],
                               pace=None if pacer is None else pacer.run)
    ]


def candidates_for(cmd: IngestCommand, pacer: TextPacer | None = None) -> list[Candidate]:
    """`pacer` (default: the process's) paces the text passes, one message at a time."""
    pacer = pacer or default_pacer()
    # Secrets and identifiers never reach the store, whatever the mode.
    redacted = [m.model_copy(update={"content": pacer.run(partial(redact, m.content))})
                for m in cmd.messages]
    cmd = cmd.model_copy(update={"request": cmd.request.model_copy(update={"messages": redacted})})
    if cmd.extract is ExtractMode.RAW:
        return raw_candidates(cmd)
    if cmd.extract is ExtractMode.RULES:
        return rule_candidates(cmd, pacer)
    raise ExtractorUnavailable("LLM extraction is not configured", field="extract")
