"""Enqueue → worker → search, over HTTP against the embedded stack."""

from __future__ import annotations

import httpx
from helpers import save, search, wait_job


def test_interaction_raw_is_found_by_search(api: httpx.Client, user: str) -> None:
    response = api.post("/v1/interactions", json={
        "user_id": user, "thread_id": "t1", "extract": "raw",
        "messages": [
            {"role": "user", "content": "I adopted a golden retriever named Biscuit last spring",
             "created_at": "2024-04-02T10:00:00Z", "metadata": {"turn": "D1:3"}},
            {"role": "assistant", "content": "That is lovely! Golden retrievers are great."},
        ],
    })
    assert response.status_code == 202, response.text
    job = wait_job(api, response.json()["job_id"])
    assert job["status"] == "succeeded", job
    assert job["result"]["added"] == 1
    results = search(api, user, "what dog does the user have?")
    assert results[0]["memory"]["content"].startswith("I adopted a golden retriever")
    memory = results[0]["memory"]
    assert memory["type"] == "episodic"
    assert memory["occurred_at"] == "2024-04-02T10:00:00Z"
    assert memory["metadata"]["turn"] == "D1:3"
    assert all("That is lovely" not in r["memory"]["content"] for r in results)


def test_explicit_save_then_duplicate(api: httpx.Client, user: str) -> None:
    first = save(api, user, "My sister Lena lives in Lisbon")
    assert first.status_code == 201, first.text
    assert first.json()["outcome"] == "added"
    again = save(api, user, "my sister lena lives in Lisbon.")
    assert again.status_code == 200, again.text
    assert again.json() == {
        "outcome": "duplicate", "duplicate_of": first.json()["memory"]["id"],
        "duplicate_kind": "exact",
    }
