"""The FastAPI gateway: validates, authenticates, enqueues writes, serves reads."""

from __future__ import annotations

from fastapi import FastAPI

from api.errors import install_error_handlers
from api.middleware import BodyLimitMiddleware, RequestIdMiddleware
from api.routers import context, health, interactions, jobs, memories, search
from shared.api_keys import ApiKeyStore
from shared.auth import KeyRing
from shared.rate_limit import RateLimiter
from shared.runtime import Runtime

DESCRIPTION = """
Long-term memory for chat agents. Writes are asynchronous: `POST /v1/interactions`
and every change to a memory answer `202` with a job id, and a worker does the work
(`GET /v1/jobs/{job_id}`). Reads (`/v1/search`, listing) are synchronous.

Authenticate with `Authorization: Bearer <key>`; a key belongs to one tenant, and a
request acts for any `user_id` of that tenant. Errors have the body
`{"error": {"code", "message", "field"}}`.
"""


def create_app(runtime: Runtime, keyring: KeyRing) -> FastAPI:
    app = FastAPI(title="memoryd", version="0.1.0", description=DESCRIPTION)
    app.state.runtime = runtime
    app.state.keyring = keyring
    app.state.api_keys = ApiKeyStore(runtime.redis)
    app.state.rate_limiter = RateLimiter(
        runtime.redis, runtime.settings.rate_limit_per_s, runtime.settings.rate_limit_burst
    )
    app.add_middleware(BodyLimitMiddleware, max_bytes=runtime.settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    install_error_handlers(app)
    for module in (interactions, memories, search, context, jobs, health):
        app.include_router(module.router)
    return app
