"""What every read route of memories does around its read: POST /v1/search and
POST /v1/context are this, each with its own check, read and accessed memories."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool

from memoryd.api.deps import owner_of
from memoryd.api.waits import Waits, read_your_writes
from memoryd.memories.reads import ReadPath
from memoryd.platform.settings import Settings
from memoryd.records.models import Owner
from memoryd.records.schemas import ContextRequest, ContextResponse, SearchRequest, SearchResponse
from memoryd.runtime import Runtime
from memoryd.tenancy.api_keys import Principal

Request = TypeVar("Request", SearchRequest, ContextRequest)
Answer = TypeVar("Answer", SearchResponse, ContextResponse)


async def answer_read(
    req: Request,
    rt: Runtime,
    tenant: str,
    principal: Principal,
    waits: Waits,
    check: Callable[[Request, Settings], None],
    read: Callable[[ReadPath, Owner, Request], Answer],
    accessed: Callable[[Answer], list[str]],
) -> Answer:
    """`check` the request against the limits, wait for the writes it asked to see, `read`,
    count the `accessed` memories, say how fresh the answer is.

    Read-your-writes: the awaited writes end (or the bound passes) before the read. The read
    takes one worker-thread hop for its blocking part; an `async def` route also keeps
    FastAPI from validating the response in yet another thread. Counting access is a dict
    update here; Redis and the store see the counts once per window."""
    check(req, rt.settings)
    owner = owner_of(tenant, req.user_id)
    freshness = await read_your_writes(waits, principal.key_id, tenant, req.user_id, req)
    answer = await run_in_threadpool(lambda: read(rt.read_path(), owner, req))
    ids = accessed(answer)
    if ids and rt.settings.search_record_access:
        rt.access.note(owner, ids)
    if freshness is not None:
        answer.freshness = freshness
    return answer
