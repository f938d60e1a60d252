"""Operator endpoints: store-wide, so only operator keys reach them (a tenant's key gets
403 `forbidden`, see `memoryd.tenancy.api_keys.required_scopes`). Re-embedding the store with
another model, with no downtime; the index it serves from; the re-embedding's job."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from memoryd.api.deps import AdminDep, RequestIdDep, RuntimeDep
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.api.routers.jobs import job_id_checked
from memoryd.index import reindex
from memoryd.records.schemas import ErrorBody, IndexStatus, JobAccepted, JobView, ReindexRequest

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ERROR_RESPONSES)


@router.post(
    "/reindex", status_code=202, response_model=JobAccepted,
    responses={401: {"model": ErrorBody}, 403: {"model": ErrorBody}, 409: {"model": ErrorBody},
               422: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
def post_reindex(
    req: ReindexRequest, rt: RuntimeDep, operator: AdminDep, request_id: RequestIdDep,
) -> JSONResponse:
    """Re-embed every memory (all tenants) with `embedder`, then switch atomically.

    Needs an operator key. `embedder` must be one the deployment allows
    (`MEMORYD_REINDEX_EMBEDDERS`, default: only the configured embedder), else 422
    `embedder_not_allowed`. Follow the job: `GET /v1/admin/jobs/{job_id}` reports
    `progress` (`phase`, `done`, `total`, `reused`, `embedded`). Searches and writes keep
    working throughout. 409 `reindex_running` while another re-embedding runs.
    """
    accepted = reindex.start(rt.reindexing, operator, request_id, req.embedder, req.batch_size)
    return JSONResponse(accepted.model_dump(mode="json"), status_code=202)


@router.get("/index", response_model=IndexStatus,
            responses={401: {"model": ErrorBody}, 403: {"model": ErrorBody}})
def get_index(rt: RuntimeDep, operator: AdminDep) -> IndexStatus:
    """The active generation: its collection, embedder and dimension. Needs an operator key."""
    return IndexStatus.model_validate(reindex.status(rt.reindexing))


@router.get("/jobs/{job_id}", response_model=JobView,
            responses={401: {"model": ErrorBody}, 403: {"model": ErrorBody},
                       404: {"model": ErrorBody}})
async def get_operator_job(job_id: str, rt: RuntimeDep, operator: AdminDep) -> JobView:
    """A store-wide job (a re-embedding) started with an operator key. Needs an operator key;
    tenants' jobs are not here (`GET /v1/jobs/{job_id}` with the tenant's key)."""
    return await run_in_threadpool(rt.jobs.get, job_id_checked(job_id), operator)
