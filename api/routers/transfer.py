"""Export (streamed JSONL) and import (JSONL or a JSON array, enqueued as one job)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from memoryd.api.deps import RequestIdDep, RuntimeDep, TenantDep, owner_of
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.jobs.enqueue import submit
from memoryd.jobs.names import TaskName
from memoryd.memories.transfer import ImportCommand, export_lines, parse_import
from memoryd.records.models import utcnow
from memoryd.records.schemas import ErrorBody, Identifier, JobAccepted

router = APIRouter(prefix="/v1", tags=["transfer"], responses=ERROR_RESPONSES)

UserId = Annotated[Identifier, Query(description="whose memories")]


@router.get("/export", response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}}},
                       401: {"model": ErrorBody}, 422: {"model": ErrorBody}})
def export_memories(rt: RuntimeDep, tenant: TenantDep, user_id: UserId) -> StreamingResponse:
    """Every memory of the user, one JSON document per line, with metadata and times."""
    return StreamingResponse(export_lines(rt.read_path(), owner_of(tenant, user_id)),
                             media_type="application/x-ndjson")


@router.post(
    "/import",
    status_code=202,
    response_model=JobAccepted,
    responses={401: {"model": ErrorBody}, 413: {"model": ErrorBody}, 422: {"model": ErrorBody},
               409: {"model": ErrorBody, "description": "idempotency_key was used for another "
                     "request of this user (code idempotency_conflict)"}},
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/x-ndjson": {"schema": {"type": "string"}},
        "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
    }}},
)
async def import_memories(
    request: Request, rt: RuntimeDep, tenant: TenantDep, request_id: RequestIdDep,
    user_id: UserId,
    idempotency_key: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> JobAccepted:
    """Validate every record, then enqueue them as saves with `source=import` (one job)."""
    body = await request.body()

    def enqueue() -> JobAccepted:
        records = parse_import(body, user_id, rt.settings)
        command = ImportCommand(tenant_id=tenant, user_id=user_id, request_id=request_id,
                                received_at=utcnow(), records=records)
        return submit(rt.jobs, rt.celery, TaskName.IMPORT, command, idempotency_key)

    # Validation and the Redis round trips are blocking: keep them off the event loop.
    return await run_in_threadpool(enqueue)
