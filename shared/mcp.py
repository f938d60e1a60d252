"""`memoryd.mcp`: memoryd's MCP tools, for a program that serves them itself.

`memoryd mcp --user <id>` (stdio) and the gateway's `/mcp` (streamable HTTP) serve these
tools already (docs/integrations.md#mcp). From Python:

    import anyio
    from memoryd.mcp import serve_stdio
    anyio.run(lambda: serve_stdio("http://127.0.0.1:8420", api_key, "alice", wait_s=5.0))

or `build_server(resolve, wait_s=...)` for the MCP server object (the official `mcp` SDK's),
where `resolve` yields the `Binding` (client, user, conversation) each tool call acts for.
"""

from memoryd.integrations.mcp_stdio import serve_stdio
from memoryd.integrations.mcp_tools import (
    CONFIRM_DELETE_ALL,
    INSTRUCTIONS,
    Binding,
    JobLedger,
    Resolver,
    build_server,
)

__all__ = ["CONFIRM_DELETE_ALL", "INSTRUCTIONS", "Binding", "JobLedger", "Resolver",
           "build_server", "serve_stdio"]
