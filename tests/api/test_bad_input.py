"""Bad input gets a 4xx with a stable code that names the field, and nothing stored changes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers import save


def error_of(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}, body
    return body["error"]  # type: ignore[no-any-return]


def message(content: str = "hello there", role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": content}


@pytest.fixture()
def stored(api: httpx.Client, user: str) -> dict[str, Any]:
    response = save(api, user, "I keep bees in my garden")
    assert response.status_code == 201, response.text
    memory: dict[str, Any] = response.json()["memory"]
    return memory


def assert_unchanged(api: httpx.Client, user: str, memory: dict[str, Any]) -> None:
    listed = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert listed == [memory]


CASES: list[tuple[str, str, dict[str, Any], int, str, str | None]] = [
    ("interaction without messages", "/v1/interactions", {"messages": []}, 422,
     "invalid_input", "messages"),
    # A message empty once normalised is dropped; an interaction with none left is refused.
    ("empty content", "/v1/interactions", {"messages": [message("   ")]}, 422,
     "invalid_input", "messages"),
    ("unknown role", "/v1/interactions", {"messages": [message(role="robot")]}, 422,
     "invalid_input", "messages[0].role"),
    ("unknown field", "/v1/interactions", {"messages": [message()], "colour": "red"}, 422,
     "unknown_field", "colour"),
    ("wrong type", "/v1/interactions", {"messages": "hello"}, 422, "invalid_input", "messages"),
    ("message over 8 KB", "/v1/interactions", {"messages": [message("x" * 8193)]}, 413,
     "payload_too_large", "messages[0].content"),
    ("too many messages", "/v1/interactions", {"messages": [message()] * 65}, 413,
     "payload_too_large", "messages"),
    ("llm without provider", "/v1/interactions", {"messages": [message()], "extract": "llm"},
     422, "extractor_unavailable", "extract"),
    ("project scope without project", "/v1/interactions",
     {"messages": [message()], "scope": "project"}, 422, "invalid_input", "project"),
    ("blank save", "/v1/memories", {"content": "\t \n"}, 422, "invalid_input", "content"),
    ("importance out of range", "/v1/memories", {"content": "x is y", "importance": 11}, 422,
     "invalid_input", "importance"),
    ("top_k too large", "/v1/search", {"query": "bees", "top_k": 101}, 422, "invalid_input",
     "top_k"),
    ("top_k zero", "/v1/search", {"query": "bees", "top_k": 0}, 422, "invalid_input", "top_k"),
    ("empty query", "/v1/search", {"query": ""}, 422, "invalid_input", "query"),
    ("missing user", "/v1/search", {"query": "bees", "user_id": None}, 422, "invalid_input",
     "user_id"),
]


@pytest.mark.parametrize(("name", "path", "body", "status", "code", "field"), CASES,
                         ids=[c[0] for c in CASES])
def test_bad_bodies(
    api: httpx.Client, user: str, stored: dict[str, Any], name: str, path: str,
    body: dict[str, Any], status: int, code: str, field: str | None,
) -> None:
    response = api.post(path, json={"user_id": user, **body})
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == code
    assert error.get("field") == field
    assert field is None or field in error["message"]
    assert_unchanged(api, user, stored)


def test_malformed_json(api: httpx.Client, user: str, stored: dict[str, Any]) -> None:
    response = api.post("/v1/memories", content=b'{"user_id": "x", "content": ',
                        headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert error_of(response)["code"] == "malformed_json"
    assert_unchanged(api, user, stored)


def test_auth_is_required(base_url: str, user: str) -> None:
    with httpx.Client(base_url=base_url) as anonymous:
        response = anonymous.post("/v1/search", json={"user_id": user, "query": "x"})
        assert response.status_code == 401
        assert error_of(response)["code"] == "unauthorized"
        wrong = anonymous.get("/v1/memories", params={"user_id": user},
                              headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401


def test_bad_patch_and_cursor(api: httpx.Client, user: str, stored: dict[str, Any]) -> None:
    path = f"/v1/memories/{stored['id']}"
    empty = api.patch(path, params={"user_id": user}, json={})
    assert empty.status_code == 422
    null = api.patch(path, params={"user_id": user}, json={"content": None})
    assert null.status_code == 422 and error_of(null)["field"] == "content"
    cursor = api.get("/v1/memories", params={"user_id": user, "cursor": "garbage!"})
    assert cursor.status_code == 422 and error_of(cursor)["field"] == "cursor"
    forget = api.delete("/v1/memories", params={"user_id": user})
    assert forget.status_code == 422 and error_of(forget)["field"] == "thread_id"
    assert_unchanged(api, user, stored)


def test_oversized_body_is_413(api: httpx.Client, user: str, stored: dict[str, Any]) -> None:
    huge = {"user_id": user, "messages": [message("y" * 8000)] * 200}
    response = api.post("/v1/interactions", json=huge)
    assert response.status_code == 413
    assert error_of(response)["code"] == "payload_too_large"
    assert_unchanged(api, user, stored)
