"""POST /v1/search: the answer path of a chat turn. Reads only."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks

from api.deps import RequestIdDep, RuntimeDep, TenantDep, owner_of
from shared import reads
from shared.commands import TouchCommand
from shared.enqueue import submit_untracked
from shared.limits import check_search
from shared.models import utcnow
from shared.queue.names import TaskName
from shared.schemas import ErrorBody, SearchRequest, SearchResponse

router = APIRouter(prefix="/v1", tags=["search"])


@router.post(
    "/search",
    response_model=SearchResponse,
    responses={401: {"model": ErrorBody}, 422: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
def post_search(
    req: SearchRequest, rt: RuntimeDep, tenant: TenantDep, request_id: RequestIdDep,
    background: BackgroundTasks,
) -> SearchResponse:
    """The user's global memories plus the given project's, most relevant first.

    Scores are calibrated to [0, 1] in every mode (`hybrid` by default: dense and
    keyword relevance fused, then boosted by recency, importance and past access);
    `explain: true` returns each component.
    """
    check_search(req, rt.settings)
    response = reads.search(rt, owner_of(tenant, req.user_id), req)
    if response.results:
        # After the answer is sent: the access statistics never cost the caller time.
        background.add_task(submit_untracked, rt, TaskName.TOUCH, TouchCommand(
            tenant_id=tenant, user_id=req.user_id, request_id=request_id,
            received_at=utcnow(), memory_ids=[h.memory.id for h in response.results],
        ))
    return response
