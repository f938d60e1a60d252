"""POST /v1/search: the answer path of a chat turn. Reads only."""

from __future__ import annotations

from fastapi import APIRouter

from memoryd.api.deps import PrincipalDep, RuntimeDep, TenantDep
from memoryd.api.reading import answer_read
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.api.waits import WaitsDep
from memoryd.memories import reads
from memoryd.records.schemas import ErrorBody, SearchRequest, SearchResponse
from memoryd.tenancy.limits import check_search

router = APIRouter(prefix="/v1", tags=["search"], responses=ERROR_RESPONSES)


@router.post(
    "/search",
    response_model=SearchResponse,
    responses={401: {"model": ErrorBody}, 422: {"model": ErrorBody}, 503: {"model": ErrorBody}},
)
async def post_search(
    req: SearchRequest, rt: RuntimeDep, tenant: TenantDep, principal: PrincipalDep,
    waits: WaitsDep,
) -> SearchResponse:
    """The user's global memories plus the given project's, most relevant first.

    Scores are calibrated to [0, 1] in every mode (`hybrid` by default: dense and
    keyword relevance fused, then boosted by recency, importance and past access);
    `explain: true` returns each component.

    **Read-your-writes**: `after_jobs` (job ids from writes' 202 answers) and/or
    `consistency: "fresh"` (every write of this user accepted and not yet ended) make the
    search first wait for those jobs, at most `fresh_timeout_s` (default
    `MEMORYD_FRESH_WAIT_S`, capped by `MEMORYD_MAX_WAIT_S`), then answer as usual.
    `freshness.applied` says whether all had ended; `pending_jobs` lists those that had
    not. A failed job counts as ended (see `GET /v1/jobs/{id}`); an id that is not one of
    this tenant's jobs is reported pending at once, never waited for.
    """
    return await answer_read(req, rt, tenant, principal, waits, check_search, reads.search,
                             lambda answer: [h.memory.id for h in answer.results])
