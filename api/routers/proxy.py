"""POST /v1/chat/completions: an OpenAI-compatible chat endpoint that adds the user's
memories and remembers the turn. Thin over shared/proxy."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Annotated, Any

import anyio
import httpx
from fastapi import APIRouter, Header, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from memoryd.api.deps import PrincipalDep, RequestIdDep, RuntimeDep, identifier, owner_of
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.api.waits import WaitsDep
from memoryd.platform.errors import AppError
from memoryd.platform.logs import get_logger
from memoryd.proxy.chat import (
    ChatRequest,
    answer_of,
    latest_user_text,
    recent_messages,
    with_memory,
)
from memoryd.proxy.errors import UpstreamTimeout, UpstreamUnreachable
from memoryd.proxy.sse import StreamWatch
from memoryd.proxy.turns import Turn, extract_mode, idempotency_key, proxy_context, remember_turn
from memoryd.proxy.upstream import passed_headers
from memoryd.records.models import utcnow
from memoryd.records.schemas import ErrorBody
from memoryd.runtime import Runtime
from memoryd.tenancy.api_keys import KeyScope

log = get_logger("memoryd.proxy")
router = APIRouter(prefix="/v1", tags=["proxy"], responses=ERROR_RESPONSES)

MEMORY_HEADER = "X-Memoryd-Memory"  # none | empty | used
JOB_HEADER = "X-Memoryd-Job"  # the job the turn is stored by, once the answer is complete
FRESH_HEADER = "X-Memoryd-Fresh"  # applied | pending: were the user's earlier writes seen to end


def _store_after(rt: Runtime, turn: Turn, request_id: str | None, answer: str) -> None:
    """Runs once the upstream's answer is complete, before its end reaches the caller: a
    failure here is logged, never seen (the caller still gets the answer)."""
    try:
        accepted = remember_turn(rt.jobs, rt.celery, rt.settings,
                                 replace(turn, answer=answer),
                                 request_id, utcnow(), rt.lanes)
    except AppError as exc:
        log.warning("proxy_turn_not_stored", user_id=turn.user, code=exc.code,
                    reason=exc.message)
        return
    except Exception:  # an unforeseen failure must not cost the caller the answer
        log.exception("proxy_turn_not_stored", user_id=turn.user)
        return
    if accepted is None:
        log.info("proxy_turn_already_stored", user_id=turn.user, job_id=turn.job_id)


@router.post(
    "/chat/completions",
    responses={
        200: {"description": "the upstream's answer, as JSON or as server-sent events "
                             "(`stream: true`), passed through unchanged"},
        401: {"model": ErrorBody}, 403: {"model": ErrorBody}, 422: {"model": ErrorBody},
        404: {"model": ErrorBody, "description": "this gateway has no upstream "
                                                 "(code proxy_not_configured)"},
        502: {"model": ErrorBody, "description": "the upstream is unreachable "
                                                 "(code upstream_unreachable)"},
        504: {"model": ErrorBody, "description": "the upstream did not answer in time "
                                                 "(code upstream_timeout)"},
    },
)
async def chat_completions(
    body: ChatRequest,
    request: Request,
    rt: RuntimeDep,
    principal: PrincipalDep,
    request_id: RequestIdDep,
    waits: WaitsDep,
    x_memoryd_user: Annotated[str | None, Header()] = None,
    x_memoryd_thread: Annotated[str | None, Header()] = None,
    x_memoryd_token_budget: Annotated[int | None, Header(ge=16, le=8000)] = None,
) -> Response:
    """OpenAI chat completions through memoryd, to the upstream `MEMORYD_PROXY_UPSTREAM_URL`.

    - **User**: the `X-Memoryd-User` header, else the body's `user` field (the header wins:
      a deployment sets it on purpose, while `user` is often an opaque id an app sends for
      the provider's abuse tracking). Neither: the request goes upstream unchanged,
      nothing is stored, and the answer carries `X-Memoryd-Memory: none`.
    - **Before**: the memory context for the latest user message (as POST /v1/context,
      with the request's messages as the conversation) goes in as a system message after
      the leading system and developer messages, within `X-Memoryd-Token-Budget` tokens
      (default `MEMORYD_PROXY_TOKEN_BUDGET`). `X-Memoryd-Memory` says `used` (a block went
      in) or `empty` (nothing relevant); `Server-Timing: memoryd-context;dur=<ms>` how long
      the lookup took. Every other field goes upstream as sent.
    - **Read-your-writes**: the lookup first waits for the user's pending writes (an
      earlier turn still being stored), up to `MEMORYD_PROXY_FRESH_WAIT_S`;
      `X-Memoryd-Fresh` says `applied` (all had ended) or `pending` (the wait ran out
      first), and `Server-Timing: memoryd-fresh;dur=<ms>` how long it waited (part of
      `memoryd-context`).
    - **After**: once the upstream's answer is complete, the latest user message and the
      answer are enqueued as an interaction of the `X-Memoryd-Thread` thread, with an
      idempotency key derived from the tenant, user, thread and messages: a retry of the
      same request stores the turn once. `X-Memoryd-Job` names that job. It is enqueued
      before the end of the answer reaches the client (a JSON answer: before it is sent;
      a stream: after every delta, before `data: [DONE]`), so the client's next turn
      always finds it among the user's pending writes. A client that disconnects before
      the last delta of a stream stores nothing (it never saw the whole answer), and the
      upstream stream is closed.
    - **Upstream errors** (any status >= 400, e.g. 429 with `Retry-After`) come back with
      their status, body and rate-limit headers; unreachable: 502 `upstream_unreachable`.
    - **Scopes**: `read` and `write` (it reads memories and stores the turn).
    - No upstream configured: 404 `proxy_not_configured`.
    """
    principal.require({KeyScope.READ})  # the route's own rule already required `write`
    rt.upstream.require_configured()  # before any memory work
    raw: dict[str, Any] = await request.json()
    settings = rt.settings
    user: str | None = None
    if x_memoryd_user is not None:
        user = identifier(x_memoryd_user, "X-Memoryd-User")
    elif body.user is not None:
        user = identifier(body.user, "user")
    thread = (identifier(x_memoryd_thread, "X-Memoryd-Thread")
              if x_memoryd_thread is not None else None)
    latest = latest_user_text(body.messages)
    headers = {MEMORY_HEADER: "none"}
    turn: Turn | None = None
    forwarded = raw
    if user is not None and latest:
        owner = owner_of(principal.tenant, user)
        recent = recent_messages(body.messages, settings.max_message_bytes)
        budget = x_memoryd_token_budget or settings.proxy_token_budget
        started = time.perf_counter()
        fresh = await waits.await_writes(principal.key_id, principal.tenant, user, [],
                                         "fresh", settings.proxy_fresh_wait_s)
        # `applied` only when the wait saw every write end within its bound: a wait that ran
        # out says so, whatever the re-read just after it found.
        headers[FRESH_HEADER] = "applied" if fresh.applied and not fresh.timed_out else "pending"
        ctx = await run_in_threadpool(
            proxy_context, rt.read_path(), owner, latest, recent, budget, settings)
        lookup_ms = (time.perf_counter() - started) * 1000
        headers["Server-Timing"] = (f"memoryd-context;dur={lookup_ms:.2f}, "
                                    f"memoryd-fresh;dur={fresh.waited_ms:.2f}")
        if ctx.items and settings.search_record_access:
            rt.access.note(owner, [item.memory.id for item in ctx.items])
        forwarded = {**raw, "messages": with_memory(raw["messages"], ctx.block)}
        headers[MEMORY_HEADER] = "used" if ctx.block else "empty"
        model = raw.get("model")
        turn = Turn(tenant=principal.tenant, user=user, thread=thread,
                    key=idempotency_key(principal.tenant, user, thread, raw["messages"]),
                    user_text=latest, answer="", model=model if isinstance(model, str) else None,
                    mode=extract_mode(settings))
    upstream = await rt.upstream.open(forwarded)
    headers.update(passed_headers(upstream.headers))
    if upstream.status_code >= 400 or not body.stream:
        try:
            content = await upstream.aread()
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(f"the upstream's answer stalled: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(f"the upstream broke off its answer: {exc!r}") from exc
        finally:
            await upstream.aclose()
        if turn is not None and upstream.status_code < 400:
            headers[JOB_HEADER] = turn.job_id
            await run_in_threadpool(_store_after_json, rt, turn, request_id, content)
        return Response(content, status_code=upstream.status_code, headers=headers)
    return _stream(rt, upstream, headers, turn, request_id)


@router.get(
    "/models",
    responses={
        200: {"description": "the upstream's model list (`{\"object\": \"list\", \"data\": "
                             "[...]}`), passed through unchanged"},
        404: {"model": ErrorBody, "description": "this gateway has no upstream "
                                                 "(code proxy_not_configured)"},
        502: {"model": ErrorBody, "description": "the upstream is unreachable "
                                                 "(code upstream_unreachable)"},
        504: {"model": ErrorBody, "description": "the upstream did not answer in time "
                                                 "(code upstream_timeout)"},
    },
)
async def list_models(rt: RuntimeDep, principal: PrincipalDep) -> Response:
    """The upstream's `GET /models`, for OpenAI-compatible UIs and frameworks that ask for
    the model list before the first chat.

    The body, status and rate-limit headers are the upstream's, as for chat completions
    (an upstream error comes back with its own status); memoryd adds nothing and stores
    nothing. Scope `read`. No upstream configured: 404 `proxy_not_configured`.
    """
    upstream = await rt.upstream.models()
    return Response(upstream.content, status_code=upstream.status_code,
                    headers=passed_headers(upstream.headers))


def _store_after_json(rt: Runtime, turn: Turn, request_id: str | None, content: bytes) -> None:
    try:
        completion = json.loads(content)
    except ValueError:
        completion = {}
    answer = answer_of(completion) if isinstance(completion, dict) else ""
    _store_after(rt, turn, request_id, answer)


def _stream(rt: Runtime, upstream: httpx.Response, headers: dict[str, str], turn: Turn | None,
            request_id: str | None) -> StreamingResponse:
    """The upstream's bytes as they come. The turn is stored once the upstream's stream has
    ended (`data: [DONE]`, or its end after a finish_reason) and the client took every
    earlier chunk; it is enqueued before the chunk that ends the stream is relayed, so a
    client that starts its next turn on reading the end finds this one pending."""
    watch = StreamWatch()
    stored = False

    async def store() -> None:
        nonlocal stored
        if turn is not None and not stored:
            stored = True
            await run_in_threadpool(_store_after, rt, turn, request_id, watch.text)

    async def relay() -> Any:
        try:
            async for chunk in upstream.aiter_raw():
                watch.feed(chunk)
                if watch.done:
                    await store()
                yield chunk
            watch.close()
            if watch.done or watch.finished:
                await store()
        finally:
            # Also on a client's disconnect, whose cancellation must not cut this short.
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
            if turn is not None and not stored:
                log.info("proxy_turn_not_stored", user_id=turn.user,
                         reason="the stream did not reach its end")

    if turn is not None:
        headers[JOB_HEADER] = turn.job_id
    headers.setdefault("content-type", "text/event-stream")
    return StreamingResponse(relay(), headers=headers)
