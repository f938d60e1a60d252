"""Interaction → candidates, by the mode the request chose.

Without `extract` (the default, `IngestCommand.episodes`), every user and assistant
message is kept verbatim as an episode, and the facts the rules (or the LLM, in
`shared/memories/llm_extraction.py`) draw from the user's messages are kept beside them,
each naming the messages it came from (`sources`) and, once written, their episodes.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from memoryd.extraction.redaction import redact
from memoryd.extraction.rules import extract_rules_sourced
from memoryd.platform.errors import ExtractorUnavailable
from memoryd.platform.text_pace import TextPacer
from memoryd.records.candidate import Candidate
from memoryd.records.commands import IngestCommand
from memoryd.records.models import (
    ExtractMode,
    MemoryKind,
    MemorySource,
    MemoryType,
    Role,
    Source,
)
from memoryd.records.schemas import InteractionRequest, Message

# The roles the default extraction keeps as episodes: users ask what they said, and what
# they were told ("what did you recommend last time?").
EPISODE_ROLES = (Role.USER, Role.ASSISTANT)


def _when(message: Message, fallback: datetime) -> datetime:
    return message.created_at or fallback


def message_source(cmd: IngestCommand, index: int, job_id: str | None) -> MemorySource:
    """The provenance of message `index` of the interaction."""
    m = cmd.messages[index]
    return MemorySource(thread_id=cmd.thread_id, message_index=cmd.request_index(index),
                        role=m.role,
                        metadata=dict(m.metadata or {}), job_id=job_id,
                        at=_when(m, cmd.received_at))


def verbatim(
    cmd: IngestCommand, index: int, job_id: str | None, turn_role: Role | None = None,
) -> Candidate:
    """Message `index` kept as it was said: an episodic memory with the message's metadata,
    its role, and its source. With `turn_role`, its identity is the turn's
    (`identity.turn_id`), so the same turn posted again is one memory."""
    m = cmd.messages[index]
    return Candidate(
        content=m.content.strip(),
        type=MemoryType.EPISODIC,
        occurred_at=_when(m, cmd.received_at),
        source=Source.INTERACTION,
        thread_id=cmd.thread_id,
        metadata={**(cmd.metadata or {}), **(m.metadata or {}), "role": m.role.value},
        kind=MemoryKind.EPISODE,
        sources=[message_source(cmd, index, job_id)],
        turn_role=turn_role,
        created_at=cmd.received_at,
    )


def raw_candidates(cmd: IngestCommand, job_id: str | None = None) -> list[Candidate]:
    """Each message of a stored role becomes an episodic memory, metadata kept."""
    roles = set(cmd.store_roles)
    return [verbatim(cmd, i, job_id) for i, m in enumerate(cmd.messages) if m.role in roles]


def episode_candidates(cmd: IngestCommand, job_id: str | None = None) -> list[Candidate]:
    """The default extraction's episodes: each message of an episode role, verbatim, with
    its role in its source and in `metadata.role`, one memory per turn."""
    roles = set(cmd.store_roles)  # user and assistant unless the caller chose (with_episodes)
    return [verbatim(cmd, i, job_id, m.role) for i, m in enumerate(cmd.messages)
            if m.role in roles and m.content.strip()]


def rule_candidates(
    cmd: IngestCommand, pacer: TextPacer | None = None, job_id: str | None = None
) -> list[Candidate]:
    """Only the user's own words become facts about the user; each names its messages."""
    users = [i for i, m in enumerate(cmd.messages) if m.role is Role.USER]
    if not users:
        return []
    when = max(_when(cmd.messages[i], cmd.received_at) for i in users)
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
            kind=MemoryKind.FACT,
            sources=[message_source(cmd, users[p], job_id) for p in positions],
            # Beside episodes, the thread's order is the turns' (a hit's neighbours).
            sequenced=not cmd.episodes,
            created_at=cmd.received_at,
        )
        for c, positions in extract_rules_sourced(
            [cmd.messages[i].content for i in users],
            pace=None if pacer is None else pacer.run)
    ]


def with_episodes(req: InteractionRequest) -> InteractionRequest:
    """The request as the default extraction runs it (the gateway decides, before the
    queue): the roles kept as episodes are user and assistant, unless `store_roles` was
    given."""
    if "store_roles" in req.model_fields_set:
        return req
    return req.model_copy(update={"store_roles": list(EPISODE_ROLES)})


def redacted(cmd: IngestCommand, pacer: TextPacer) -> IngestCommand:
    """The command with every message redacted: secrets and identifiers never reach the
    store or a model, whatever the mode."""
    messages = [m.model_copy(update={"content": pacer.run(partial(redact, m.content))})
                for m in cmd.messages]
    return cmd.model_copy(update={"request": cmd.request.model_copy(
        update={"messages": messages})})


def candidates_for(
    cmd: IngestCommand, pacer: TextPacer, job_id: str | None = None
) -> list[Candidate]:
    """`pacer` (the process's, `Runtime.text_pacer`) paces the text passes, one message at
    a time.

    The default extraction gives the episodes first, then the facts: the writer links
    each fact to the episodes of its messages as it goes."""
    cmd = redacted(cmd, pacer)
    if cmd.extract is ExtractMode.RAW:
        return raw_candidates(cmd, job_id)
    if cmd.extract is ExtractMode.RULES:
        facts = rule_candidates(cmd, pacer, job_id)
        return [*episode_candidates(cmd, job_id), *facts] if cmd.episodes else facts
    raise ExtractorUnavailable("LLM extraction is not configured", field="extract")
