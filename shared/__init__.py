"""memoryd: long-term memory for AI chat agents.

The one import root of the installed package (the repository's shared/; the gateway is
`memoryd.api`, the workers and the CLI `memoryd.workers`). The public imports:
`memoryd.client` (the Python client), `memoryd.langgraph` (LangGraph's store) and
`memoryd.mcp` (the MCP tools); docs/usage.md#import-paths lists them.
"""
