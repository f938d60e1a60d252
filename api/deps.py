"""Request-scoped dependencies, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import Depends, Header, Request
from pydantic import TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from memoryd.platform.errors import InvalidInput
from memoryd.records.models import Owner
from memoryd.records.schemas import Identifier
from memoryd.runtime import Runtime
from memoryd.tenancy.api_keys import Principal, authenticate, bootstrap_principal, required_scopes
from memoryd.tenancy.auth import KeyRing
from memoryd.tenancy.rate_limit import RateLimiter


# The trivial dependencies are `async def`: FastAPI runs a plain `def` dependency in a worker
# thread, and on 2 cores every such hop showed in search latency.
async def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def _principal(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    """Authenticate, check the route's scopes, spend a rate-limit token: for every route.

    The scopes come from the matched route's method and path template
    (`memoryd.tenancy.api_keys.required_scopes`), so a new route is covered without a change here.
    A bootstrap key with a leased rate-limit token left (`shared/tenancy/rate_limit.py`) needs no
    Redis call, so most requests take no worker-thread hop here; the rest do their Redis
    work in one.
    """
    keyring: KeyRing = request.app.state.keyring
    limiter: RateLimiter = request.app.state.rate_limiter
    principal = bootstrap_principal(keyring, authorization)
    if principal is None:
        principal = await run_in_threadpool(
            authenticate, keyring, request.app.state.api_keys, authorization)
    structlog.contextvars.bind_contextvars(tenant_id=principal.tenant, key_id=principal.key_id)
    route = request.scope.get("route")
    template = getattr(route, "path", request.url.path)
    principal.require(required_scopes(request.method, template))
    if not limiter.take_leased(principal.key_id):
        await run_in_threadpool(limiter.take, principal.key_id)
    return principal


async def _tenant(principal: Annotated[Principal, Depends(_principal)]) -> str:
    return principal.tenant


async def _request_id(request: Request) -> str | None:
    value = structlog.contextvars.get_contextvars().get("request_id")
    return str(value) if value else None


async def require_admin(tenant: Annotated[str, Depends(_tenant)]) -> str:
    """Operator endpoints: `_principal` already refused any key but an operator key
    (`/v1/admin/*` needs the scope `operator`, see `memoryd.tenancy.api_keys.required_scopes`); the
    value is the operator pseudo-tenant that store-wide jobs are recorded under."""
    return tenant


# Set by the MCP endpoint's in-process client (and the stdio server's), so the audit trail
# tells a tool's write from a REST call's. A label of the caller's own writes, not a
# credential: the key id next to it is the authenticated part.
VIA_HEADER = "X-Memoryd-Via"


async def _actor(request: Request, principal: Annotated[Principal, Depends(_principal)]) -> str:
    """Who a write is recorded as: the channel and the authenticated key's id."""
    via = "mcp" if request.headers.get(VIA_HEADER, "").lower() == "mcp" else "api"
    return f"{via}:{principal.key_id}"


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
TenantDep = Annotated[str, Depends(_tenant)]
AdminDep = Annotated[str, Depends(require_admin)]
PrincipalDep = Annotated[Principal, Depends(_principal)]
RequestIdDep = Annotated[str | None, Depends(_request_id)]
ActorDep = Annotated[str, Depends(_actor)]


def owner_of(tenant: str, user_id: str) -> Owner:
    return Owner(tenant_id=tenant, user_id=user_id)


_IDENTIFIER: TypeAdapter[str] = TypeAdapter(Identifier)


def identifier(value: str, field: str) -> str:
    """`value` checked as a user or thread id from outside a request body (a header, the
    proxy's `user` field), or 422 `invalid_input` naming `field`."""
    try:
        return _IDENTIFIER.validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
        raise InvalidInput(f"{field}: {reason}", field=field) from exc
