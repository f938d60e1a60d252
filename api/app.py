"""The FastAPI gateway: validates, authenticates, enqueues writes, serves reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from memoryd.api.docs_assets import install_docs
from memoryd.api.errors import install_error_handlers
from memoryd.api.index_pin import PinIndexMiddleware
from memoryd.api.json_body import JsonBodyMiddleware
from memoryd.api.mcp import mount_mcp
from memoryd.api.middleware import BodyLimitMiddleware, RequestIdMiddleware
from memoryd.api.routers import (
    admin,
    context,
    health,
    interactions,
    jobs,
    memories,
    proxy,
    search,
    transfer,
    users,
    webhooks,
    whoami,
)
from memoryd.api.routers import metrics as metrics_router
from memoryd.api.ui import AdminPage
from memoryd.api.waits import Waits
from memoryd.jobs import task_metrics
from memoryd.jobs.names import QueueName
from memoryd.platform.metrics import RequestMetricsMiddleware, StackCollector
from memoryd.platform.version import package_version
from memoryd.runtime import Runtime
from memoryd.tenancy.api_keys import ApiKeyStore
from memoryd.tenancy.auth import KeyRing
from memoryd.tenancy.rate_limit import RateLimiter

DESCRIPTION = """
Long-term memory for chat agents. Writes are asynchronous: `POST /v1/interactions`
and every change to a memory answer `202` with a job id, and a worker does the work
(`GET /v1/jobs/{job_id}`). Reads (`/v1/search`, listing) are synchronous.

Request bodies are JSON, and are read as JSON whatever `Content-Type` says (`curl -d`
needs no `-H 'Content-Type: application/json'`).

Authenticate with `Authorization: Bearer <key>`; a key belongs to one tenant, and a
request acts for any `user_id` of that tenant. The store-wide routes under `/v1/admin/`
take an operator key instead (403 `forbidden` for a tenant's key). Errors have the body
`{"error": {"code", "message", "field"}}`.
"""


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The job-end subscription starts with the gateway, not at the first wait (api/waits.py).
    await app.state.waits.start()
    async with app.state.mcp.running():
        yield
    await app.state.waits.close()  # its Redis connections belong to this event loop
    await app.state.runtime.upstream.aclose()  # the proxy's upstream connections, too


def create_app(runtime: Runtime, keyring: KeyRing, *, server_mode: bool = False) -> FastAPI:
    """`server_mode`: the gateway of `memoryd serve` (listening for a network), where
    /metrics needs its token unless `metrics_open` says otherwise."""
    app = FastAPI(title="memoryd", version=package_version(), description=DESCRIPTION,
                  lifespan=_lifespan, docs_url=None, redoc_url=None)
    install_docs(app)  # /docs and /redoc with local assets: they work offline
    app.state.runtime = runtime
    app.state.waits = Waits(runtime.settings)
    app.state.keyring = keyring
    app.state.server_mode = server_mode
    app.state.api_keys = ApiKeyStore(runtime.redis)
    app.state.rate_limiter = RateLimiter(
        runtime.redis, runtime.settings.rate_limit_per_s, runtime.settings.rate_limit_burst
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=runtime.settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    install_error_handlers(app)
    app.add_middleware(JsonBodyMiddleware)
    for module in (interactions, memories, search, context, jobs, health):
        app.include_router(module.router)
    app.include_router(proxy.router)
    runtime.upstream  # noqa: B018 (built here, closed by the lifespan)
    app.add_middleware(PinIndexMiddleware, runtime=runtime)
    for module in (users, admin, webhooks, whoami):
        app.include_router(module.router)
    app.mount("/ui", AdminPage(), name="ui")
    # Operations: /metrics, export and import (outermost middleware, so 413s are timed too).
    app.state.metrics = StackCollector(
        runtime.redis, lambda: runtime.index.view().store.count_all(), [q.value for q in QueueName],
        runtime.settings.metrics_count_ttl_s,
    )
    task_metrics.connect(lambda: runtime.redis)
    app.add_middleware(RequestMetricsMiddleware)
    for module in (metrics_router, transfer):
        app.include_router(module.router)
    app.state.mcp = mount_mcp(app, runtime.settings.mcp_wait_s)  # /mcp (api/mcp.py)
    return app
