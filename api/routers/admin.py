"""Operator endpoints: re-embedding the store with another model, with no downtime."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import AdminDep, RequestIdDep, RuntimeDep
from api.responses import ERROR_RESPONSES
from shared import reindex
from shared.schemas import ErrorBody, IndexStatus, JobAccepted, ReindexRequest

router = APIRouter(prefix="/v1/admin", tags=["admin"], responses=ERROR_RESPONSES)


@router.post(
    "/reindex", status_code=202, response_model=JobAccepted,
    responses={401: {"model": ErrorBody}, 403: {"model": ErrorBody}, 409: {"model": ErrorBody},
               422: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
def post_reindex(
    req: ReindexRequest, rt: RuntimeDep, tenant: AdminDep, request_id: RequestIdDep,
) -> JSONResponse:
    """Re-embed every memory (all tenants) with `embedder`, then switch atomically.

    Follow the job: `GET /v1/jobs/{job_id}` reports `progress` (`phase`, `done`, `total`,
    `reused`, `embedded`). Searches and writes keep working throughout. 409
    `reindex_running` while another re-embedding runs.
    """
    accepted = reindex.start(rt, tenant, request_id, req.embedder, req.batch_size)
    return JSONResponse(accepted.model_dump(mode="json"), status_code=202)


@router.get("/index", response_model=IndexStatus, responses={401: {"model": ErrorBody}})
def get_index(rt: RuntimeDep, tenant: AdminDep) -> IndexStatus:
    """The active generation: its collection, embedder and dimension."""
    return IndexStatus.model_validate(reindex.status(rt))
