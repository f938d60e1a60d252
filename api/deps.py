"""Request-scoped dependencies, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import Depends, Header, Request

from shared.auth import KeyRing
from shared.models import Owner
from shared.runtime import Runtime


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _tenant(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> str:
    keyring: KeyRing = request.app.state.keyring
    tenant = keyring.tenant_for(authorization)
    structlog.contextvars.bind_contextvars(tenant_id=tenant)
    return tenant


def _request_id(request: Request) -> str | None:
    value = structlog.contextvars.get_contextvars().get("request_id")
    return str(value) if value else None


def require_admin(tenant: Annotated[str, Depends(_tenant)]) -> str:
    """The one place operator endpoints are guarded. Any valid key passes for now; key
    scopes plug in here (a key without the admin scope answers 403)."""
    return tenant


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
TenantDep = Annotated[str, Depends(_tenant)]
AdminDep = Annotated[str, Depends(require_admin)]
RequestIdDep = Annotated[str | None, Depends(_request_id)]


def owner_of(tenant: str, user_id: str) -> Owner:
    return Owner(tenant_id=tenant, user_id=user_id)
