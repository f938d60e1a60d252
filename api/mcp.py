"""Streamable HTTP MCP at `/mcp`: the tools of `shared/integrations/mcp_tools.py` on the gateway.

- **Who.** The same bearer keys as the REST API (`Authorization: Bearer <key>`), and the user
  from the `X-Memoryd-User` header, never from a tool argument. A request without a known key
  gets 401, one without a valid user header 422 naming the header, before any MCP message
  is read.
- **How.** Each tool call goes through the REST API in this process: an `AsyncMemorydClient`
  whose transport is `httpx.ASGITransport` into this very app, carrying the caller's key. So
  scopes (a read-only key can search but not add), rate limits, validation and error codes
  are exactly the REST API's, and there is no second path to the store.
- **Sessions.** Stateless, JSON answers: each POST is served on its own, so any gateway
  process of a deployment can answer any request, and nothing is kept per MCP session. The
  write jobs a caller has not seen end are kept per (key, user), for read-your-writes.
- **Hosts.** The SDK's DNS-rebinding check (a Host allow-list) is off: every request needs a
  bearer key, which a page in a browser does not have, and the gateway's address is a
  deployment's choice.
- **When.** The MCP SDK is imported, and the MCP server built, at the first admitted `/mcp`
  request of a gateway, in a worker thread: a gateway nobody reaches by MCP never pays for
  them (the start-up `python -m ops.bench` reports as "ready to serve"; decision 0056). The
  session manager then runs in a task of the lifespan's task group, and stops with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import httpx
from anyio.abc import TaskGroup, TaskStatus
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memoryd.api.deps import VIA_HEADER, identifier
from memoryd.client import AsyncMemorydClient
from memoryd.platform.errors import AppError, InvalidInput, QueueUnavailable
from memoryd.tenancy.api_keys import (
    KeyScope,
    Principal,
    authenticate,
    bearer_key,
    bootstrap_principal,
)
from memoryd.tenancy.auth import key_digest

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from memoryd.integrations.mcp_tools import Binding

PATH = "/mcp"
USER_HEADER = "X-Memoryd-User"
# The in-process client's base URL: requests never leave the process (ASGITransport).
_SELF = "http://memoryd.internal"


def user_of(headers: Mapping[str, str]) -> str:
    """The user every tool call acts for, or 422 naming the header."""
    value = headers.get(USER_HEADER.lower())
    if not value:
        raise InvalidInput(f"missing {USER_HEADER} header: the user id the MCP tools act for",
                           field=USER_HEADER)
    return identifier(value, USER_HEADER)


class McpEndpoint:
    """The ASGI app routed at `/mcp`; `running()` is entered in the gateway's lifespan."""

    def __init__(self, app: FastAPI, wait_s: float) -> None:
        self._app = app
        self._wait_s = wait_s
        self._server: MCPServer[Any] | None = None  # built at the first request, kept after
        # The lifespan's task group, its stop event and the lock that starts the manager
        # once: made in `running()`, on the lifespan's event loop.
        self._tasks: TaskGroup | None = None
        self._stop: anyio.Event | None = None
        self._starting: anyio.Lock | None = None
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The lifespan's part: a task group where the session manager runs once started,
        and stops with the gateway."""
        stop = self._stop = anyio.Event()
        self._starting = anyio.Lock()
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                stop.set()  # the manager's task leaves its run() and ends

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            await self._admit(headers)
            manager = await self._started()
        except AppError as exc:
            await JSONResponse({"error": exc.to_dict()}, status_code=exc.status)(
                scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)

    async def _started(self) -> StreamableHTTPSessionManager:
        """The running session manager, started by the first request of this lifespan."""
        if self._manager is not None:
            return self._manager
        if self._tasks is None or self._starting is None:
            raise QueueUnavailable("the MCP endpoint is not running (gateway starting or "
                                   "stopping)")
        async with self._starting:
            if self._manager is None:
                await self._tasks.start(self._serve)
        if self._manager is None:  # the lifespan ended while it started
            raise QueueUnavailable("the MCP endpoint is not running (gateway stopping)")
        return self._manager

    async def _serve(self, *, task_status: TaskStatus[None]) -> None:
        """Run a session manager until the lifespan ends. A session manager runs once: each
        lifespan (a test may run several) gets its own, from the server built once."""
        if self._server is None:
            self._server = await anyio.to_thread.run_sync(self._build)
        from mcp.server.transport_security import TransportSecuritySettings

        self._server.streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self._server.session_manager
        stop = self._stop
        assert stop is not None  # made by running(), whose task group runs this
        async with manager.run():
            self._manager = manager
            task_status.started()
            try:
                await stop.wait()
            finally:
                self._manager = None

    def _build(self) -> MCPServer[Any]:
        """The MCP server and its tools (importing the MCP SDK: run in a worker thread)."""
        from memoryd.integrations.mcp_tools import JobLedger, build_server

        return build_server(self._resolve, wait_s=self._wait_s, ledger=JobLedger(),
                            may_write=self._may_write)

    async def _principal(self, headers: Mapping[str, str]) -> Principal:
        state = self._app.state
        authorization = headers.get("authorization")
        principal = bootstrap_principal(state.keyring, authorization)  # else: a Redis call
        if principal is None:
            principal = await run_in_threadpool(authenticate, state.keyring, state.api_keys,
                                                authorization)
        return principal

    async def _admit(self, headers: Mapping[str, str]) -> None:
        """The REST API's authentication (401 for a missing or unknown key) and the user
        header, before the SDK reads the body; scopes are checked per tool call by the
        route it calls."""
        await self._principal(headers)
        user_of(headers)

    async def _may_write(self, ctx: Context[Any, Any]) -> bool:
        """Whether the caller's key holds `write`: `tools/list` shows the write tools only
        then (calling one without it is still the route's 403)."""
        headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
        return KeyScope.WRITE in (await self._principal(headers)).scopes

    @asynccontextmanager
    async def _resolve(self, ctx: Context[Any, Any]) -> AsyncIterator[Binding]:
        headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
        user = user_of(headers)
        key = bearer_key(headers.get("authorization"))
        from memoryd.integrations.mcp_tools import Binding

        transport = httpx.ASGITransport(app=self._app)
        async with AsyncMemorydClient(_SELF, key, transport=transport,
                                      headers={VIA_HEADER: "mcp"}) as client:
            yield Binding(client=client, user_id=user,
                          conversation=f"{key_digest(key)}:{user}")


def mount_mcp(app: FastAPI, wait_s: float) -> McpEndpoint:
    """Route `/mcp` to the MCP endpoint; the caller enters `running()` in its lifespan."""
    endpoint = McpEndpoint(app, wait_s)
    # A Route (not a Mount) so that `/mcp` itself matches, with no redirect to `/mcp/`; an
    # endpoint that is neither a function nor a method is called as an ASGI app.
    app.router.routes.append(Route(PATH, endpoint, include_in_schema=False))
    return endpoint
