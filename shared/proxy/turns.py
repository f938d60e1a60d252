"""A chat turn through the proxy: the memory it reads before, the interaction it leaves after.

Both go through the services the REST API uses: `memoryd.memories.context.build_context`
(as POST /v1/context) and `memoryd.jobs.enqueue.submit` (as POST /v1/interactions).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery import Celery

from memoryd.extraction.interaction import EPISODE_ROLES
from memoryd.jobs.enqueue import submit
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.lanes import Lanes
from memoryd.jobs.names import TaskName
from memoryd.memories import context
from memoryd.memories.reads import ReadPath
from memoryd.platform.errors import IdempotencyConflict
from memoryd.platform.settings import Settings
from memoryd.records.commands import IngestCommand
from memoryd.records.identity import job_id_for
from memoryd.records.models import ExtractMode, Owner, Role
from memoryd.records.schemas import (
    ContextRequest,
    ContextResponse,
    InteractionRequest,
    JobAccepted,
    Message,
    normalize_text,
)
from memoryd.tenancy.limits import check_context, check_interaction


def proxy_context(
    rp: ReadPath, owner: Owner, query: str, recent: list[Message], token_budget: int,
    settings: Settings,
) -> ContextResponse:
    """The memory context for the latest user turn: the proxy's only read of memories.

    The same request as POST /v1/context with the conversation as `recent_messages`; the
    query is normalised as message content is and cut to the query limit (a long turn
    still gets its context).
    """
    req = ContextRequest(
        user_id=owner.user_id, query=str(normalize_text(query))[: settings.max_content_chars],
        recent_messages=recent or None, token_budget=token_budget)
    check_context(req, settings)
    return context.build_context(rp, owner, req)


def idempotency_key(tenant: str, user: str, thread: str | None,
                    messages: list[dict[str, Any]]) -> str:
    """The same conversation sent again (a client's retry) gives the same key, so its
    turn is stored once; the messages are the client's, before the memory block."""
    text = json.dumps([tenant, user, thread, messages], sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"), default=str)
    return "chat-proxy:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def extract_mode(settings: Settings) -> ExtractMode:
    """As POST /v1/interactions without `extract`: the LLM when configured, else rules."""
    return ExtractMode.LLM if settings.llm_configured else ExtractMode.RULES


def task_for(mode: ExtractMode) -> TaskName:
    return TaskName.EXTRACT_LLM if mode is ExtractMode.LLM else TaskName.INGEST


@dataclass(frozen=True)
class Turn:
    """A finished exchange to remember, with everything its job needs."""

    tenant: str
    user: str
    thread: str | None
    key: str
    user_text: str
    answer: str
    model: str | None
    mode: ExtractMode

    @property
    def job_id(self) -> str:
        """Known before the answer: the header the caller gets names the job it will be."""
        return job_id_for(self.tenant, self.user, task_for(self.mode).value, self.key)


def remember_turn(jobs: JobStore, celery: Celery, settings: Settings, turn: Turn,
                  request_id: str | None, received_at: datetime,
                  lanes: Lanes | None = None) -> JobAccepted | None:
    """Enqueue the turn as an interaction (the user's message, then the answer when there
    is one); None when a retry of the same request was answered differently (its first
    answer is the one stored). Raises what `submit` raises, and PayloadTooLarge beyond
    the interaction limits."""
    messages = [Message(role=Role.USER, content=turn.user_text)]
    if turn.answer.strip():
        messages.append(Message(role=Role.ASSISTANT, content=turn.answer))
    req = InteractionRequest(
        user_id=turn.user, thread_id=turn.thread, messages=messages,
        metadata={"source": "chat_completions_proxy", "model": turn.model},
        idempotency_key=turn.key, store_roles=list(EPISODE_ROLES))
    check_interaction(req, settings)
    command = IngestCommand(tenant_id=turn.tenant, user_id=turn.user, request_id=request_id,
                            received_at=received_at, request=req, extract=turn.mode,
                            episodes=True)
    try:
        return submit(jobs, celery, task_for(turn.mode), command, turn.key, lanes)
    except IdempotencyConflict:
        return None
