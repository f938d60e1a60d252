"""Memories: explicit save, list, get, edit, delete, bulk forget. Every write is a job."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from memoryd.api.deps import ActorDep, PrincipalDep, RequestIdDep, RuntimeDep, TenantDep, owner_of
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.api.waits import Waits, WaitsDep
from memoryd.jobs.enqueue import submit
from memoryd.jobs.names import TaskName
from memoryd.memories import reads
from memoryd.memories.history import memory_history
from memoryd.platform.errors import InvalidInput, error_from_body
from memoryd.records.commands import DeleteCommand, ForgetCommand, SaveCommand, UpdateCommand
from memoryd.records.models import (
    JobStatus,
    MemoryKind,
    MemoryType,
    SaveOutcome,
    Scope,
    Source,
    as_utc,
    utcnow,
)
from memoryd.records.schemas import (
    ErrorBody,
    Identifier,
    JobAccepted,
    MemoryHistory,
    MemoryPage,
    MemoryView,
    SaveRequest,
    SaveResult,
    UpdateRequest,
    WireDatetime,
)
from memoryd.tenancy.limits import check_page, check_save, check_update

router = APIRouter(prefix="/v1/memories", tags=["memories"], responses=ERROR_RESPONSES)

UserId = Annotated[Identifier, Query(description="whose memories")]
Wait = Annotated[float, Query(ge=0, le=30, description="seconds to wait for the job (max 30)")]
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody}, 404: {"model": ErrorBody}, 413: {"model": ErrorBody},
    422: {"model": ErrorBody}, 503: {"model": ErrorBody},
    409: {"model": ErrorBody, "description": "with ?wait=: `forgotten` (a later forget covers it)"},
}


async def _finish(
    waits: Waits, principal: PrincipalDep, accepted: JobAccepted, wait: float
) -> dict[str, Any] | None:
    """The job's result when it ended within `wait` seconds, else None (answer 202).

    The wait is awaited on the event loop (api/waits.py): it holds no worker thread.
    """
    if wait <= 0:
        return None
    view = await waits.wait(principal.key_id, accepted.job_id, principal.tenant, wait)
    if view.status is JobStatus.FAILED:
        raise error_from_body(view.error)
    return view.result if view.status is JobStatus.SUCCEEDED else None


def _accepted(accepted: JobAccepted) -> JSONResponse:
    return JSONResponse(accepted.model_dump(mode="json"), status_code=202)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={**ERRORS, 200: {"model": SaveResult}, 201: {"model": SaveResult}},
)
async def save_memory(
    req: SaveRequest, rt: RuntimeDep, tenant: TenantDep, request_id: RequestIdDep,
    principal: PrincipalDep, waits: WaitsDep, actor: ActorDep, wait: Wait = 0,
) -> Response:
    """Save a memory. With `?wait=`: 201 added, 200 duplicate (or updated, for a `key`)."""
    check_save(req, rt.settings)
    command = SaveCommand(tenant_id=tenant, user_id=req.user_id, request_id=request_id,
                          received_at=utcnow(), request=req, source=Source.EXPLICIT,
                          actor=actor)
    accepted = await run_in_threadpool(submit, rt.jobs, rt.celery, TaskName.SAVE, command,
                                       lanes=rt.lanes)
    result = await _finish(waits, principal, accepted, wait)
    if result is None:
        return _accepted(accepted)
    saved = SaveResult.model_validate(result)
    code = 201 if saved.outcome is SaveOutcome.ADDED else 200
    return JSONResponse(saved.to_json(), status_code=code)


@router.get("", response_model=MemoryPage, responses=ERRORS)
def list_memories(
    rt: RuntimeDep,
    tenant: TenantDep,
    user_id: UserId,
    type: MemoryType | None = None,
    tag: Annotated[str | None, Query(max_length=64)] = None,
    scope: Scope | None = None,
    project: Annotated[str | None, Query(max_length=128)] = None,
    sort: Annotated[str, Query(pattern="^(created_at|updated_at|importance)$")] = "created_at",
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
    key: Annotated[str | None, Query(max_length=128, description="the named slot")] = None,
    kind: Annotated[MemoryKind | None, Query(description="episode, fact or note")] = None,
    episode: Annotated[str | None, Query(
        max_length=128, description="an episode's id: the facts drawn from it")] = None,
) -> MemoryPage:
    """Newest (or most important) first; pass `next_cursor` back for the next page."""
    check_page(limit, rt.settings)
    return reads.list_memories(
        rt.read_path(), owner_of(tenant, user_id), type=type, tag=tag, scope=scope, project=project,
        sort=sort, limit=limit, cursor=cursor, key=key, kind=kind, episode=episode,
    )


@router.get("/{memory_id}", response_model=MemoryView, responses=ERRORS)
def get_memory(memory_id: str, rt: RuntimeDep, tenant: TenantDep, user_id: UserId) -> MemoryView:
    return MemoryView.of(reads.get_memory(rt.read_path(), owner_of(tenant, user_id), memory_id))


@router.get("/{memory_id}/history", response_model=MemoryHistory, responses=ERRORS)
def get_history(
    memory_id: str, rt: RuntimeDep, tenant: TenantDep, user_id: UserId
) -> MemoryHistory:
    """Every version: event (ADD, UPDATE, DELETE, NOOP), before and after, job, actor, time.
    A deleted memory's events remain, without their content."""
    view = rt.index.view()
    return memory_history(view.store, view.audit, owner_of(tenant, user_id), memory_id)


@router.patch("/{memory_id}", status_code=202, response_model=JobAccepted,
              responses={**ERRORS, 200: {"description": "the edited memory (with ?wait=)"}})
async def patch_memory(
    memory_id: str, req: UpdateRequest, rt: RuntimeDep, tenant: TenantDep,
    request_id: RequestIdDep, user_id: UserId, principal: PrincipalDep, waits: WaitsDep,
    actor: ActorDep, wait: Wait = 0,
) -> Response:
    """Edit content, type, tags, importance or enabled (a disabled memory is never searched)."""
    check_update(req, rt.settings)
    owner = owner_of(tenant, user_id)
    await run_in_threadpool(lambda: reads.get_memory(rt.read_path(), owner, memory_id))
    command = UpdateCommand(
        tenant_id=tenant, user_id=user_id, request_id=request_id, received_at=utcnow(),
        memory_id=memory_id, changes=req, actor=actor,
    )
    accepted = await run_in_threadpool(submit, rt.jobs, rt.celery, TaskName.UPDATE, command,
                                         lanes=rt.lanes)
    result = await _finish(waits, principal, accepted, wait)
    return _accepted(accepted) if result is None else JSONResponse(result, status_code=200)


@router.delete("/{memory_id}", status_code=202, response_model=JobAccepted,
               responses={**ERRORS, 200: {"description": "deleted (with ?wait=)"}})
async def delete_memory(
    memory_id: str, rt: RuntimeDep, tenant: TenantDep, request_id: RequestIdDep,
    user_id: UserId, principal: PrincipalDep, waits: WaitsDep, actor: ActorDep, wait: Wait = 0,
) -> Response:
    """Forget one memory: its point is removed and its history keeps no content. An
    episode takes with it the facts drawn only from it; a fact drawn from other episodes
    too stays, without its link to this one (docs/usage.md#provenance)."""
    owner = owner_of(tenant, user_id)
    await run_in_threadpool(lambda: reads.get_memory(rt.read_path(), owner, memory_id))
    command = DeleteCommand(
        tenant_id=tenant, user_id=user_id, request_id=request_id, received_at=utcnow(),
        memory_id=memory_id, actor=actor,
    )
    accepted = await run_in_threadpool(submit, rt.jobs, rt.celery, TaskName.DELETE, command,
                                         lanes=rt.lanes)
    result = await _finish(waits, principal, accepted, wait)
    return _accepted(accepted) if result is None else JSONResponse(result, status_code=200)


@router.delete("", status_code=202, response_model=JobAccepted,
               responses={**ERRORS, 200: {"description": "forgotten (with ?wait=)"}})
async def forget_memories(
    rt: RuntimeDep, tenant: TenantDep, request_id: RequestIdDep, user_id: UserId,
    principal: PrincipalDep, waits: WaitsDep,
    thread_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    before: WireDatetime | None = None,
    after: WireDatetime | None = None,
    all: Annotated[bool, Query(description="forget every memory of the user")] = False,
    wait: Wait = 0,
) -> Response:
    """Bulk forget by thread and/or occurred_at range; `all=true` forgets everything.

    The text also leaves the user's job results and the failed jobs' kept arguments at
    once, and every file on disk within `MEMORYD_ERASURE_COMPACTION_S` (docs/erasure.md)."""
    if thread_id is None and before is None and after is None and not all:
        raise InvalidInput("give thread_id, before or after (or all=true)", field="thread_id")
    before = as_utc(before) if before is not None else None
    after = as_utc(after) if after is not None else None
    if before is not None and after is not None and after >= before:
        raise InvalidInput("after must be earlier than before", field="after")
    command = ForgetCommand(
        tenant_id=tenant, user_id=user_id, request_id=request_id, received_at=utcnow(),
        thread_id=thread_id, before=before, after=after,
    )
    accepted = await run_in_threadpool(submit, rt.jobs, rt.celery, TaskName.FORGET, command)
    result = await _finish(waits, principal, accepted, wait)
    return _accepted(accepted) if result is None else JSONResponse(result, status_code=200)
