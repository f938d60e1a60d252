"""GET /v1/jobs/{job_id}: the state of an enqueued write."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import RuntimeDep, TenantDep
from shared.schemas import ErrorBody, JobView

router = APIRouter(prefix="/v1", tags=["jobs"])


@router.get(
    "/jobs/{job_id}",
    response_model=JobView,
    responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody}},
)
def get_job(job_id: str, rt: RuntimeDep, tenant: TenantDep) -> JobView:
    return rt.jobs.get(job_id, tenant)
