"""Every input limit is a setting: lowered, the gateway refuses at the new bound with
413 or 422 naming the field, and nothing is stored or enqueued."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import KEY_A
from live_gateway import gateway, settings_with

LOW = {"max_body_bytes": 2048, "max_messages": 2, "max_message_bytes": 32,
       "max_content_chars": 20, "max_tags": 2, "max_top_k": 3, "max_page_size": 4}


@pytest.fixture(scope="module")
def low(stack: Any) -> Iterator[httpx.Client]:
    with gateway(settings_with(stack, **LOW), stack.runtime.index) as url, httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30
    ) as client:
        yield client


def msg(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


CASES: list[tuple[str, str, str, dict[str, Any], dict[str, Any], int, str]] = [
    ("body", "POST", "/v1/memories", {}, {"content": "x" * 3000}, 413, ""),
    ("messages", "POST", "/v1/interactions", {}, {"messages": [msg("hi")] * 3}, 413, "messages"),
    ("message bytes", "POST", "/v1/interactions", {}, {"messages": [msg("记" * 11)]}, 413,
     "messages[0].content"),
    ("save content", "POST", "/v1/memories", {}, {"content": "My cat is called Mimi!!"}, 413,
     "content"),
    ("patch content", "PATCH", "/v1/memories/00000000-0000-0000-0000-000000000000", {},
     {"content": "我的猫叫咪咪, and she is nine years old"}, 413, "content"),
    ("search query", "POST", "/v1/search", {}, {"query": "where does my sister live now?"},
     413, "query"),
    ("save tags", "POST", "/v1/memories", {}, {"content": "tea", "tags": ["a", "b", "c"]}, 422,
     "tags"),
    ("patch tags", "PATCH", "/v1/memories/00000000-0000-0000-0000-000000000000", {},
     {"tags": ["a", "b", "c"]}, 422, "tags"),
    ("search tags", "POST", "/v1/search", {}, {"query": "tea", "tags": ["a", "b", "c"]}, 422,
     "tags"),
    ("search top_k", "POST", "/v1/search", {}, {"query": "tea", "top_k": 4}, 422, "top_k"),
    ("context top_k", "POST", "/v1/context", {}, {"query": "tea", "top_k": 4}, 422, "top_k"),
    ("context messages", "POST", "/v1/context", {},
     {"query": "tea", "top_k": 1, "recent_messages": [msg("x" * 40)]}, 413,
     "recent_messages[0].content"),
    ("list page", "GET", "/v1/memories", {"limit": 5}, {}, 422, "limit"),
    ("failed jobs page", "GET", "/v1/jobs", {"status": "failed", "limit": 5}, {}, 422, "limit"),
]


@pytest.mark.parametrize(("name", "method", "path", "params", "body", "status", "field"), CASES,
                         ids=[c[0] for c in CASES])
def test_each_limit_is_a_setting(
    low: httpx.Client, stack: Any, user: str, name: str, method: str, path: str,
    params: dict[str, Any], body: dict[str, Any], status: int, field: str,
) -> None:
    queued_before = stack.runtime.redis.llen("memory")
    kwargs: dict[str, Any] = {"params": {"user_id": user, **params}}
    if method != "GET":
        kwargs["json"] = {"user_id": user, **body} if method == "POST" else body
    response = low.request(method, path, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == ("payload_too_large" if status == 413 else "invalid_input")
    if field:
        assert error["field"] == field
        assert field in error["message"]
    # Refused before anything was enqueued or stored.
    assert stack.runtime.redis.llen("memory") <= queued_before
    assert stack.runtime.index.view().store.count(owner(user)) == 0


def owner(user: str) -> Any:
    from memoryd.records.models import Owner

    return Owner(tenant_id="tenant-a", user_id=user)


def test_at_the_limit_is_accepted(low: httpx.Client, user: str) -> None:
    ok = low.post("/v1/interactions", json={"user_id": user, "messages": [msg("记" * 10)] * 2,
                                            "extract": "raw"})
    assert ok.status_code == 202, ok.text
    assert low.get("/v1/memories", params={"user_id": user, "limit": 4}).status_code == 200
