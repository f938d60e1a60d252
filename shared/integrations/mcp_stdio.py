"""`memoryd mcp --user <id>`: the MCP tools over stdio, for one user, talking to a running
stack through the Python client (the key and URL come from the command line or the
environment, never from the model)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context

from memoryd.client import AsyncMemorydClient
from memoryd.integrations.mcp_tools import Binding, build_server


async def serve_stdio(base_url: str, api_key: str | None, user_id: str, *,
                      wait_s: float) -> None:
    """Serve until stdin closes. A stack that is down is not fatal here: each tool call
    answers `unreachable` until it is up, which an MCP host shows to the model."""
    # Writes are audited as `mcp:<key id>` (api/deps.py reads the header).
    async with AsyncMemorydClient(base_url, api_key, timeout=60.0,
                                  headers={"X-Memoryd-Via": "mcp"}) as client:
        # One process, one user, one conversation: every write's job is recorded under it.
        binding = Binding(client=client, user_id=user_id, conversation="stdio")

        @asynccontextmanager
        async def resolve(ctx: Context[Any, Any]) -> AsyncIterator[Binding]:
            yield binding

        await build_server(resolve, wait_s=wait_s).run_stdio_async()
