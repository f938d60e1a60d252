"""A body over `max_body_bytes` is refused with 413 however it is sent: with a
Content-Length, or chunked with none (the limit is counted as the body arrives)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import KEY_A
from live_gateway import gateway, settings_with

LIMIT = 4096


@pytest.fixture(scope="module")
def small(stack: Any) -> Iterator[httpx.Client]:
    with gateway(settings_with(stack, max_body_bytes=LIMIT), stack.runtime.index) as url, \
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY_A}"},
                         timeout=30) as client:
        yield client


def chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


def save_body(content: str) -> bytes:
    return json.dumps({"user_id": "chunky", "content": content}).encode()


def interaction_body(content: str) -> bytes:
    return json.dumps({"user_id": "chunky", "extract": "raw",
                       "messages": [{"role": "user", "content": content}]}).encode()


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/memories", save_body("x" * 3 * LIMIT)),
    ("/v1/interactions", interaction_body("y" * 3 * LIMIT)),
    ("/v1/search", json.dumps({"user_id": "chunky", "query": "z" * 3 * LIMIT}).encode()),
    ("/v1/import?user_id=chunky", b'{"content": "w"}\n' * LIMIT),
])
def test_oversized_chunked_body_is_413(small: httpx.Client, path: str, body: bytes) -> None:
    request = small.build_request("POST", path, content=chunks(body),
                                  headers={"Content-Type": "application/json"})
    assert "content-length" not in request.headers
    assert request.headers["transfer-encoding"] == "chunked"
    response = small.send(request)
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == "payload_too_large" and str(LIMIT) in error["message"]


def test_declared_oversized_body_is_413(small: httpx.Client) -> None:
    response = small.post("/v1/memories", content=save_body("x" * 3 * LIMIT),
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_chunked_body_under_the_limit_is_read(small: httpx.Client) -> None:
    request = small.build_request("POST", "/v1/interactions",
                                  content=chunks(interaction_body("I like chunked tea"), 7),
                                  headers={"Content-Type": "application/json"})
    response = small.send(request)
    assert response.status_code == 202, response.text
