"""The MCP server, driven by the MCP SDK's own client over both transports against the live
session stack: stdio (`python -m memoryd.workers.cli mcp --user ...` as a subprocess, talking to the
gateway through the Python client) and streamable HTTP (`/mcp` on the gateway)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from conftest import KEY_A, KEY_B
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from memoryd.tenancy.api_keys import ApiKeyStore, KeyScope

REPO = Path(__file__).resolve().parents[2]
READS = {"search_memories", "list_memories", "get_memory", "memory_history", "job_status"}
CHANGES = {"update_memory", "delete_memory", "delete_all_memories"}
TOOLS = READS | CHANGES | {"add_memory"}

@asynccontextmanager
async def stdio_session(base_url: str, key: str, user: str,
                        wait_s: float = 20) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memoryd.workers.cli", "mcp", "--user", user], cwd=REPO,
        env={"MEMORYD_URL": base_url, "MEMORYD_API_KEY": key, "PYTHONPATH": str(REPO),
             "MEMORYD_MCP_WAIT_S": str(wait_s)},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(base_url: str, key: str, user: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}", "X-Memoryd-User": user}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    parsed: dict[str, Any] = json.loads(text_of(result))
    return parsed


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    return data(await session.call_tool(tool, arguments))


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The memoryd part of a tool error: `<code> (field <name>): <message>`."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, text_of(result)
    prefix = f"Error executing tool {tool}: "  # the SDK's, on every ToolError
    assert text_of(result).startswith(prefix), text_of(result)
    return text_of(result).removeprefix(prefix)


async def settled(session: ClientSession, answer: dict[str, Any]) -> dict[str, Any]:
    """The outcome of a write tool's answer once its job ended (job_status while it runs)."""
    deadline = time.monotonic() + 30
    while not answer["done"]:
        assert time.monotonic() < deadline, answer
        await asyncio.sleep(0.1)
        answer = await call(session, "job_status", job_id=answer["job_id"])
    assert answer["status"] == "succeeded", answer
    outcome: dict[str, Any] = answer["outcome"]
    return outcome


async def check_tools(session: ClientSession) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None, name
        assert hints.read_only_hint is (name in READS), name
        assert hints.destructive_hint is (name in CHANGES), name
        assert not [p for p in tool.input_schema["properties"] if "user" in p.lower()], name
    assert "DELETE ALL MEMORIES" in (tools["delete_all_memories"].description or "")


async def scenario(session: ClientSession, others: list[ClientSession], user: str) -> None:
    """`session` writes and reads one user's memories; each of `others` (another tenant's
    key, or the same key for another user) must see none of them."""
    await check_tools(session)

    saved = await settled(session, await call(
        session, "add_memory", text="I moved to Berlin in March 2024", tags=["home"]))
    assert saved["outcome"] == "added", saved
    memory_id = saved["memory"]["id"]
    hits = (await call(session, "search_memories", query="where do I live?", limit=3))["results"]
    assert memory_id in [h["memory"]["id"] for h in hits]
    assert 0 <= hits[0]["score"] <= 1

    turn_answer = await call(session, "add_memory", thread_id="t1", messages=[
        {"role": "user", "content": "My favourite food is hotpot"},
        {"role": "assistant", "content": "Noted!"}])
    turn_job = turn_answer["job_id"]
    turn = await settled(session, turn_answer)
    # The default extraction: both turns kept as episodes, and the fact drawn from the user's.
    kept = {m["content"]: m for m in turn["memories"]}
    assert {c: m["kind"] for c, m in kept.items()} == {
        "My favourite food is hotpot": "episode", "Noted!": "episode",
        "User's favourite food is hotpot": "fact"}
    fact = kept["User's favourite food is hotpot"]
    food = (await call(session, "search_memories", query="what food do I like?"))["results"]
    assert fact["id"] in [h["memory"]["id"] for h in food]
    listed = (await call(session, "list_memories", limit=10))["items"]
    assert memory_id in [m["id"] for m in listed]
    # Provenance: the fact names its message and episode, and the episode lists its facts.
    episode = kept["My favourite food is hotpot"]["id"]
    got = await call(session, "get_memory", memory_id=fact["id"])
    assert got["episodes"] == [episode]
    assert [(s["role"], s["message_index"], s["thread_id"]) for s in got["sources"]] == [
        ("user", 0, "t1")]
    drawn = (await call(session, "list_memories", episode=episode))["items"]
    assert [m["id"] for m in drawn] == [fact["id"]]

    await settled(session, await call(session, "update_memory", memory_id=memory_id,
                                      content="I moved to Munich in March 2024"))
    current = await call(session, "get_memory", memory_id=memory_id)
    history = await call(session, "memory_history", memory_id=current["id"])
    assert "Munich" in current["content"]
    assert [e["event"] for e in history["events"]][:1] == ["ADD"], history
    assert "UPDATE" in {e["event"] for e in history["events"]}
    # Tool writes are audited as the tool's key, not "system" (as on 204bae7).
    assert all(e["actor"].startswith("mcp:") for e in history["events"]), history

    # Bad arguments: memoryd's code and the tool's field name, and nothing changes.
    assert (await refused(session, "search_memories", query="x", limit=0)).startswith(
        "invalid_input (field limit):")
    assert (await refused(session, "get_memory", memory_id="not-a-memory-id")).startswith(
        "not_found (field memory_id):")
    assert (await refused(session, "add_memory")).startswith("invalid_input (field text):")
    assert (await refused(session, "add_memory", messages=[
        {"role": "robot", "content": "hi"}])).startswith("invalid_input (field messages[0].role):")
    for confirm in ({}, {"confirm": "yes"}, {"confirm": "delete all memories"}):
        assert (await refused(session, "delete_all_memories", **confirm)).startswith(
            "invalid_input (field confirm):")
    # A wrong type, and an argument the tool does not have, in the same form.
    assert (await refused(session, "search_memories", query="x", limit="many")).startswith(
        "invalid_input (field limit):")
    assert (await refused(session, "list_memories", user_id="someone")).startswith(
        "invalid_input (field user_id):")
    # Ids are ids: `..` never reaches another route (on 204bae7 `../webhooks/<id>` deleted
    # the tenant's webhook and `../users` listed the tenant's users).
    for tool, bad in (("delete_memory", "../webhooks/wh_0123456789abcdef"),
                      ("get_memory", "../users"), ("memory_history", "a/b"),
                      ("update_memory", "..")):
        assert (await refused(session, tool, memory_id=bad)).startswith(
            "invalid_input (field memory_id):"), tool
    assert (await refused(session, "job_status", job_id="../memories")).startswith(
        "invalid_input (field job_id):")
    assert len((await call(session, "list_memories", limit=10))["items"]) == len(listed)

    # Tenancy: neither another tenant's key nor another user of this key sees anything.
    for other in others:
        assert (await call(other, "search_memories", query="where do I live?"))["results"] == []
        # A model that names a user is refused: the user is the transport's, not an argument.
        assert (await refused(other, "search_memories", query="where do I live?",
                              user_id=user)).startswith("invalid_input (field user_id):")
        # Nor is another user's job readable (on 204bae7 it returned its content).
        assert (await refused(other, "job_status", job_id=turn_job)).startswith(
            "not_found (field job_id):")
        assert (await call(other, "list_memories"))["items"] == []
        assert (await refused(other, "get_memory", memory_id=current["id"])).startswith(
            "not_found")
        assert (await refused(other, "delete_memory", memory_id=current["id"])).startswith(
            "not_found")

    await settled(session, await call(session, "delete_memory", memory_id=current["id"]))
    assert (await refused(session, "get_memory", memory_id=current["id"])).startswith(
        "not_found")
    await settled(session, await call(session, "delete_all_memories",
                                      confirm="DELETE ALL MEMORIES"))
    assert (await call(session, "list_memories"))["items"] == []


def run(opener: Callable[[str, str], Any], user: str) -> None:
    """The scenario with three sessions opened at once (a stdio server starts in seconds):
    the user's, another tenant's key for the same user id, and another user of this key."""
    callers = ((KEY_A, user), (KEY_B, user), (KEY_A, f"{user}-other"))

    async def main() -> None:
        sessions: list[ClientSession | None] = [None] * len(callers)
        opened, finished = anyio.Event(), anyio.Event()

        async def hold(i: int, key: str, who: str) -> None:
            async with opener(key, who) as session:
                sessions[i] = session
                if all(sessions):
                    opened.set()
                await finished.wait()

        async with anyio.create_task_group() as tasks:
            for i, (key, who) in enumerate(callers):
                tasks.start_soon(hold, i, key, who)
            with anyio.fail_after(120):
                await opened.wait()
            try:
                session, *others = [s for s in sessions if s is not None]
                await scenario(session, others, user)
            finally:
                finished.set()

    asyncio.run(main())


def test_stdio_transport(base_url: str) -> None:
    run(lambda key, who: stdio_session(base_url, key, who), f"u1-{uuid.uuid4().hex[:8]}")


def test_a_search_sees_the_conversations_own_writes(base_url: str) -> None:
    """Write tools that answer at once (no wait): the next search still finds each write,
    since it waits for the conversation's pending jobs (`after_jobs`)."""
    user = f"u3-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with stdio_session(base_url, KEY_A, user, wait_s=0) as session:
            for fact, question, word in (
                    ("I moved to Berlin in March 2024", "where do I live?", "Berlin"),
                    ("My sister is called Ines", "what is my sister's name?", "Ines")):
                answer = await call(session, "add_memory", messages=[
                    {"role": "user", "content": f"Remember that {fact}"}], thread_id="t")
                assert answer["done"] is False and answer["job_id"], answer
                found = await call(session, "search_memories", query=question, limit=3)
                assert found["freshness"]["applied"] is True, found
                assert found["freshness"]["pending_jobs"] == []
                assert any(word in h["memory"]["content"]
                           for h in found["results"]), found

    asyncio.run(main())


def test_http_transport(base_url: str) -> None:
    run(lambda key, who: http_session(base_url, key, who), f"u1-{uuid.uuid4().hex[:8]}")


def test_a_gateway_imports_the_mcp_sdk_at_its_first_mcp_request() -> None:
    """`memoryd up` and `memoryd serve` start without the MCP SDK (a quarter of the
    gateway's imports); the first admitted `/mcp` request imports it (the tests above run
    that request on the session stack's gateway)."""
    code = ("import sys\nimport memoryd.workers.stack, memoryd.api.app\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'mcp', 'mcp_types'}))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "[]"


def test_both_transports_send_the_package_version(base_url: str) -> None:
    """`serverInfo.version` is the installed package's version (hosts show and log it)."""
    async def versions() -> list[str]:
        got = []
        for session in (stdio_session(base_url, KEY_A, "u-version"),
                        http_session(base_url, KEY_A, "u-version")):
            async with session as s:
                assert s.server_info is not None
                got.append(s.server_info.version)
        return got

    assert asyncio.run(versions()) == [metadata.version("memoryd")] * 2


def test_http_refuses_without_key_or_user(base_url: str) -> None:
    """Before any MCP message is read: the REST API's 401, and 422 naming the user header."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=base_url, headers=accept, timeout=30) as http:
        for headers in ({"X-Memoryd-User": "u1"},
                        {"X-Memoryd-User": "u1", "Authorization": "Bearer not-a-key"}):
            answer = http.post("/mcp", json=initialize, headers=headers)
            assert answer.status_code == 401, answer.text
            assert answer.json()["error"]["code"] == "unauthorized"
        for user in (None, "bad\tuser"):
            headers = {"Authorization": f"Bearer {KEY_A}"}
            if user is not None:
                headers["X-Memoryd-User"] = user
            answer = http.post("/mcp", json=initialize, headers=headers)
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["field"] == "X-Memoryd-User"
        ok = http.post("/mcp", json=initialize,
                       headers={"Authorization": f"Bearer {KEY_A}", "X-Memoryd-User": "u1"})
        assert ok.status_code == 200, ok.text
        info = ok.json()["result"]["serverInfo"]
        assert info == {"name": "memoryd", "version": metadata.version("memoryd")}


def test_http_scopes_are_the_rest_apis(stack: Any, base_url: str) -> None:
    """A read-only key made with `memoryd keys` searches through /mcp but cannot write."""
    keys = ApiKeyStore(stack.runtime.redis)
    key, info = keys.create("tenant-a", frozenset({KeyScope.READ}), name="test-mcp-read")
    user = f"u1-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with http_session(base_url, key, user) as session:
            # Only the tools this key may call are listed.
            listed = {t.name for t in (await session.list_tools()).tools}
            assert listed == READS
            assert (await call(session, "search_memories", query="anything"))["results"] == []
            assert (await refused(session, "add_memory", text="I like tea")).startswith(
                "forbidden (field scope):")
            assert (await refused(session, "delete_all_memories",
                                  confirm="DELETE ALL MEMORIES")).startswith(
                "forbidden (field scope):")

    try:
        asyncio.run(main())
    finally:
        keys.revoke(info.id)
