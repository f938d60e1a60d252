"""Small HTTP helpers shared by the end-to-end tests."""

from __future__ import annotations

import time
from typing import Any

import httpx


def wait_job(client: httpx.Client, job_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        body: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if body.get("status") in ("succeeded", "failed") or time.monotonic() > deadline:
            return body
        time.sleep(0.02)


def save(client: httpx.Client, user_id: str, content: str, **fields: Any) -> httpx.Response:
    return client.post("/v1/memories", params={"wait": 20},
                       json={"user_id": user_id, "content": content, **fields})


def search(client: httpx.Client, user_id: str, query: str, **fields: Any) -> list[dict[str, Any]]:
    response = client.post("/v1/search", json={"user_id": user_id, "query": query, **fields})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results
