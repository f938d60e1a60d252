"""Hypothesis-generated arguments to every MCP tool, through the real MCP server (`/mcp` on the
live session stack, the MCP SDK's own client over streamable HTTP): arguments drawn from each
tool's own input schema, mixed with hostile ones (wrong types, path-like and invisible ids,
deep nesting, out-of-range numbers, unknown arguments). Whatever the arguments, a tool answers
a result or a tool error in memoryd's form; nothing it calls answers a 5xx, and the session
survives every call."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any, TypeVar

import anyio
from conftest import KEY_A
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult
from test_mcp import TOOLS, http_session, text_of

T = TypeVar("T")
EXAMPLES = 20  # per tool; bounded so the whole run takes about a minute

def _nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = {"a": value}
    return value


ids = st.one_of(
    st.uuids().map(str),
    st.sampled_from(["../users", "../webhooks/wh_1", "..", ".", "a/../b", "%2e%2e/users",
                     "x?user_id=other", "x#frag", "\u202eadmin\u200b", "", " ", "a" * 300,
                     "00000000-0000-0000-0000-000000000000:lease"]),
    st.text(max_size=12),
)
hostile: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), ids,
    st.lists(st.text(max_size=5), max_size=3),
    st.recursive(st.text(max_size=3), lambda inner: st.dictionaries(st.text(max_size=3), inner,
                                                                    max_size=2), max_leaves=8),
    st.builds(_nested, st.sampled_from([2, 9, 50, 200])),  # the SDK sends up to ~250
)



def of_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of one JSON-schema property, as FastMCP describes a tool's argument."""
    if "anyOf" in schema:
        return st.one_of([of_schema(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return st.one_of(st.text(max_size=40), ids,
                         st.sampled_from(["semantic", "episodic", "created_at", "I like tea"]))
    if kind == "integer":
        return st.one_of(st.integers(-5, 250), st.integers())
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = schema.get("items", {})
        element = (st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "x"]),
                                          "content": st.text(max_size=30)},
                                         optional={"metadata": hostile})
                   if items.get("type") == "object" else of_schema(items))
        return st.lists(element, max_size=4)
    if kind == "object":
        return st.dictionaries(st.text(max_size=5), hostile, max_size=3)
    return hostile


def arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = {name: st.one_of(of_schema(spec), hostile) if name not in ("text", "query")
              else of_schema(spec) for name, spec in properties.items()}
    return st.fixed_dictionaries(
        {n: s for n, s in fields.items() if n in required},
        optional={**{n: s for n, s in fields.items() if n not in required},
                  "user_id": ids, "unknown": hostile},
    )


# Known holes (issue 31), besides what hypothesis draws.
EXPLICIT: dict[str, list[dict[str, Any]]] = {
    "add_memory": [
        {"messages": [{"role": "user", "content": "My favourite food is hotpot",
                       "metadata": _nested(127)}]},
        {"text": "My favourite food is hotpot", "thread_id": "a/../b"},
        {"text": "My favourite food is hotpot", "tags": ["\u202eadmin\u200b"]},
        {"messages": [{"role": "user", "content": "My favourite food is hotpot"},
                      {"role": "user", "content": "\u200b"}]},
    ],
    "job_status": [{"job_id": "00000000-0000-0000-0000-000000000000:lease"}],
}


def drawn(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """`count` examples of `strategy`, deterministic: hypothesis draws them (generation
    only, no shrinking), and the calls then run over one MCP session."""
    found: list[T] = []

    @given(strategy)
    @settings(max_examples=count, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def collect(value: T) -> None:
        found.append(value)

    collect()
    return found


# JSON-RPC: parse error, invalid request, invalid params.
CLIENT_ERRORS = (-32700, -32600, -32602)
SERVER_ERRORS = ("internal_error", "queue_unavailable", "store_unavailable")
# A tool error in memoryd's form: the SDK's prefix, then memoryd's error code.
TOOL_ERROR = re.compile(r"Error executing tool \w+: ([a-z_0-9]+)\b")


def server_failure(result: CallToolResult) -> str | None:
    """Why `result` is a server failure, or None. Only an error result can be one: a
    result's own data (a memory id such as `…-503a-…`) is never read for markers, which
    once failed this test on a random id."""
    if not result.is_error:
        return None
    text = text_of(result)
    found = TOOL_ERROR.match(text)
    if found is None:
        return f"not a tool error in memoryd's form: {text[:300]!r}"
    code = found.group(1)
    if code in SERVER_ERRORS or re.fullmatch(r"http_5\d\d", code):  # a 5xx without a body
        return text[:300]
    return None


def test_tool_arguments_never_reach_a_server_error(base_url: str) -> None:
    user = f"mcp-prop-{uuid.uuid4().hex[:8]}"
    failures: list[str] = []
    calls = 0

    async def main() -> None:
        nonlocal calls
        async with http_session(base_url, KEY_A, user) as session:
            await session.call_tool("add_memory", {"text": "I keep bees in my garden"})
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            for name in sorted(tools):
                cases = [*EXPLICIT.get(name, []),
                         *drawn(arguments(tools[name].input_schema), EXAMPLES)]
                for args in cases:
                    if name == "delete_all_memories":
                        args.pop("confirm", None)  # never the real confirmation
                    try:
                        with anyio.fail_after(90):
                            result = await session.call_tool(name, args)
                    except MCPError as exc:
                        # The SDK refused the request itself (JSON nested past its parser's
                        # limit): a client error of the protocol, not a server failure.
                        calls += 1
                        if exc.error.code not in CLIENT_ERRORS:
                            failures.append(f"{name}({args!r}): {exc.error}")
                        continue
                    calls += 1
                    why = server_failure(result)
                    if why is not None:
                        failures.append(f"{name}({args!r}): {why}")
            # The session, and the user's memories, are still good after every hostile call
            # (metadata nested 127 deep was accepted, then failed every read of the user).
            for name, args in (("list_memories", {}), ("search_memories", {"query": "food"})):
                answer = await session.call_tool(name, args)
                assert not answer.is_error, text_of(answer)

    asyncio.run(main())
    assert not failures, "\n".join(failures)
    assert calls == EXAMPLES * len(TOOLS) + sum(len(c) for c in EXPLICIT.values())
