"""POST /v1/interactions: enqueue a finished interaction; the worker extracts and writes."""

from __future__ import annotations

from fastapi import APIRouter, status
from starlette.concurrency import run_in_threadpool

from memoryd.api.deps import ActorDep, RequestIdDep, RuntimeDep, TenantDep
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.extraction.interaction import with_episodes
from memoryd.jobs.enqueue import submit
from memoryd.jobs.names import TaskName
from memoryd.platform.errors import ExtractorUnavailable
from memoryd.records.commands import IngestCommand
from memoryd.records.models import ExtractMode, utcnow
from memoryd.records.schemas import ErrorBody, InteractionRequest, JobAccepted
from memoryd.tenancy.limits import check_interaction

router = APIRouter(prefix="/v1", tags=["interactions"], responses=ERROR_RESPONSES)


@router.post(
    "/interactions",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobAccepted,
    responses={401: {"model": ErrorBody}, 413: {"model": ErrorBody}, 422: {"model": ErrorBody},
               409: {"model": ErrorBody, "description": "idempotency_key was used for another "
                     "request of this user (code idempotency_conflict)"}},
)
async def post_interaction(
    req: InteractionRequest, rt: RuntimeDep, tenant: TenantDep, request_id: RequestIdDep,
    actor: ActorDep,
) -> JobAccepted:
    """Accept an interaction in milliseconds; memory work happens in a worker."""
    check_interaction(req, rt.settings)
    llm = rt.settings.llm_configured
    mode = req.extract or (ExtractMode.LLM if llm else ExtractMode.RULES)
    if mode is ExtractMode.LLM and not llm:
        raise ExtractorUnavailable(
            "extract 'llm' needs an LLM provider, and none is configured; use 'raw' or 'rules'",
            field="extract",
        )
    # No `extract`: the default extraction, turns kept as episodes beside the facts.
    default = req.extract is None
    command = IngestCommand(tenant_id=tenant, user_id=req.user_id, request_id=request_id,
                            received_at=utcnow(), request=with_episodes(req) if default else req,
                            extract=mode, episodes=default, actor=actor)
    # LLM work has its own queue: a slow model never holds up raw or rules ingestion.
    task = TaskName.EXTRACT_LLM if mode is ExtractMode.LLM else TaskName.INGEST
    # One worker-thread hop for the Redis calls; an `async def` route also keeps FastAPI from
    # validating the response in yet another thread (as the search route does).
    return await run_in_threadpool(submit, rt.jobs, rt.celery, task, command,
                                  req.idempotency_key, rt.lanes)
