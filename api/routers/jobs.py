"""Jobs: the state of an enqueued write; the tenant's recent and failed jobs, and retrying
one."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import APIRouter, Query, status

from memoryd.api.deps import RuntimeDep, TenantDep, identifier
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.api.waits import WaitsDep
from memoryd.jobs import failed as failed_jobs
from memoryd.jobs import recent as recent_jobs
from memoryd.platform.errors import NotFound
from memoryd.records.schemas import (
    FailedJobPage,
    Identifier,
    JobAccepted,
    JobView,
    RecentJobPage,
)
from memoryd.tenancy.limits import check_page

router = APIRouter(prefix="/v1", tags=["jobs"], responses=ERROR_RESPONSES)

# A job id is a UUID as the API hands them out, or an id a caller's idempotency or a task
# of its own named (letters, digits, `-`, `_`): never a `:` or anything that could name a
# Redis key of another kind (`<id>:lease`, which would tell that another tenant's job runs).
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def job_id_checked(job_id: str) -> str:
    """An id of that form, else no job (404, as an unknown id) before any Redis read."""
    if not _JOB_ID.fullmatch(job_id):
        raise NotFound(f"no job {job_id}", field="job_id")
    return job_id


# Before `/jobs/{job_id}`, which would otherwise take `recent` for a job id.
@router.get("/jobs/recent", response_model=RecentJobPage)
def list_recent_jobs(
    rt: RuntimeDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    user_id: Annotated[Identifier | None, Query(description="only this user's jobs")] = None,
) -> RecentJobPage:
    """The tenant's most recent jobs in any state, newest first: kind, status, user,
    attempts and, for a job that failed or is retrying, the reason. The newest 1,000 per
    tenant are kept, as long as their job records (`MEMORYD_JOB_TTL_S`).

    Needs scope `admin`, as the failed-jobs listing.
    """
    check_page(limit, rt.settings)
    return recent_jobs.list_recent(rt.redis, tenant, limit, user_id)


@router.get("/jobs/{job_id}", response_model=JobView)
async def get_job(
    job_id: str, tenant: TenantDep, waits: WaitsDep,
    user_id: Annotated[str | None, Query(
        description="only this user's job: another user's job (or a job of no user) "
                    "answers 404, as an unknown id does; the MCP tools always pass it")] = None,
) -> JobView:
    """Needs scope `read`."""
    if user_id is not None:
        identifier(user_id, "user_id")
    # Polled while callers wait: read on the event loop, holding no worker thread.
    return await waits.get(job_id_checked(job_id), tenant, user_id)


@router.get("/jobs", response_model=FailedJobPage)
def list_jobs(
    rt: RuntimeDep,
    tenant: TenantDep,
    status: Annotated[Literal["failed"], Query(description="only 'failed' is listed")],
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=4096)] = None,
) -> FailedJobPage:
    """The tenant's failed jobs, newest first: reason, attempts, time, where the payload is.

    Needs scope `admin`. Pass `next_cursor` back as `cursor` for the next page.
    """
    check_page(limit, rt.settings)
    return failed_jobs.list_failed(rt.redis, rt.settings.job_ttl_s, tenant, limit, cursor)


@router.post("/jobs/{job_id}/retry", status_code=status.HTTP_202_ACCEPTED,
             response_model=JobAccepted)
def retry_job(job_id: str, rt: RuntimeDep, tenant: TenantDep) -> JobAccepted:
    """Run a failed job again with the same arguments under the same id (409 if not failed,
    or if a forget removed its arguments).

    Needs scopes `write` and `admin`. Safe: every write is idempotent.
    """
    return failed_jobs.retry(rt.redis, rt.celery, tenant, job_id_checked(job_id),
                             rt.settings.pending_job_ttl_s)
