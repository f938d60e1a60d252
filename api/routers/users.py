"""GET /v1/users: the user ids of the caller's tenant (the admin page picks one)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from memoryd.api.deps import RuntimeDep, TenantDep
from memoryd.api.responses import ERROR_RESPONSES
from memoryd.memories.users import list_users
from memoryd.records.schemas import ErrorBody, UserPage

router = APIRouter(prefix="/v1", tags=["users"], responses=ERROR_RESPONSES)


@router.get("/users", response_model=UserPage,
            responses={401: {"model": ErrorBody}, 422: {"model": ErrorBody}})
def get_users(
    rt: RuntimeDep,
    tenant: TenantDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=128, description="next_cursor")] = None,
    prefix: Annotated[str | None, Query(max_length=128)] = None,
) -> UserPage:
    """Users with at least one memory, by id, with how many memories each has."""
    return list_users(rt.index.view().store, tenant, limit, cursor, prefix)
