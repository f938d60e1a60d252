"""POST /v1/search: the answer path of a chat turn. Reads only."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks

from api.deps import RuntimeDep, TenantDep, owner_of
from api.responses import ERROR_RESPONSES
from shared import reads
from shared.access import note_access
from shared.limits import check_search
from shared.schemas import ErrorBody, SearchRequest, SearchResponse

router = APIRouter(prefix="/v1", tags=["search"], responses=ERROR_RESPONSES)


@router.post(
    "/search",
    response_model=SearchResponse,
    responses={401: {"model": ErrorBody}, 422: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
def post_search(
    req: SearchRequest, rt: RuntimeDep, tenant: TenantDep, background: BackgroundTasks,
) -> SearchResponse:
    """The user's global memories plus the given project's, most relevant first.

    Scores are calibrated to [0, 1] in every mode (`hybrid` by default: dense and
    keyword relevance fused, then boosted by recency, importance and past access);
    `explain: true` returns each component.
    """
    check_search(req, rt.settings)
    owner = owner_of(tenant, req.user_id)
    response = reads.search(rt, owner, req)
    if response.results and rt.settings.search_record_access:
        # After the answer is sent: the access statistics never cost the caller time.
        background.add_task(note_access, rt, owner, [h.memory.id for h in response.results])
    return response
