"""POST /v1/search: the answer path of a chat turn. Reads only."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import RuntimeDep, TenantDep, owner_of
from shared import reads
from shared.limits import check_search
from shared.schemas import ErrorBody, SearchRequest, SearchResponse

router = APIRouter(prefix="/v1", tags=["search"])


@router.post(
    "/search",
    response_model=SearchResponse,
    responses={401: {"model": ErrorBody}, 422: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
def post_search(req: SearchRequest, rt: RuntimeDep, tenant: TenantDep) -> SearchResponse:
    """The user's global memories plus the given project's, most relevant first."""
    check_search(req, rt.settings)
    return reads.search(rt, owner_of(tenant, req.user_id), req)
