"""Idempotency keys belong to one user, one operation and one request body."""

from __future__ import annotations

import uuid

import httpx
from helpers import wait_job


def turn(user: str, key: str, content: str) -> dict[str, object]:
    return {"user_id": user, "extract": "raw", "idempotency_key": key,
            "messages": [{"role": "user", "content": content}]}


def contents(api: httpx.Client, user: str) -> list[str]:
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    return sorted(m["content"] for m in items)


def test_two_users_of_one_tenant_never_share_a_key(api: httpx.Client) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    first = api.post("/v1/interactions", json=turn(alice, "turn-1", "I keep bees in Lyon"))
    second = api.post("/v1/interactions", json=turn(bob, "turn-1", "I restore old clocks"))
    assert first.status_code == second.status_code == 202, (first.text, second.text)
    assert first.json()["job_id"] != second.json()["job_id"]
    assert wait_job(api, first.json()["job_id"])["status"] == "succeeded"
    assert wait_job(api, second.json()["job_id"])["status"] == "succeeded"
    # Bob's turn was written for bob, and neither reads the other's memory.
    assert contents(api, alice) == ["I keep bees in Lyon"]
    assert contents(api, bob) == ["I restore old clocks"]


def test_same_key_same_body_returns_the_first_job(api: httpx.Client, user: str) -> None:
    body = turn(user, "turn-7", "My sister moved to Porto")
    first = api.post("/v1/interactions", json=body).json()
    # A retry carries another request id: the digest leaves it out.
    again = api.post("/v1/interactions", json=body, headers={"X-Request-ID": "retry-2"})
    assert again.status_code == 202 and again.json()["job_id"] == first["job_id"]
    done = wait_job(api, first["job_id"])
    assert done["status"] == "succeeded"
    assert api.post("/v1/interactions", json=body).json() == {
        "job_id": first["job_id"], "status": "succeeded"}


def test_same_key_other_body_is_409_naming_the_key(api: httpx.Client, user: str) -> None:
    first = api.post("/v1/interactions", json=turn(user, "turn-9", "I play the oboe"))
    assert first.status_code == 202
    other = api.post("/v1/interactions", json=turn(user, "turn-9", "I play the cello"))
    assert other.status_code == 409, other.text
    error = other.json()["error"]
    assert error["code"] == "idempotency_conflict"
    assert error["field"] == "idempotency_key" and "idempotency_key" in error["message"]
    assert wait_job(api, first.json()["job_id"])["status"] == "succeeded"
    assert contents(api, user) == ["I play the oboe"]


def test_tenants_and_operations_have_their_own_keys(
    api: httpx.Client, api_b: httpx.Client, user: str
) -> None:
    body = turn(user, "shared-key", "I grow chillies on the balcony")
    a = api.post("/v1/interactions", json=body).json()["job_id"]
    b = api_b.post("/v1/interactions", json=body).json()["job_id"]
    imported = api.post("/v1/import", params={"user_id": user, "idempotency_key": "shared-key"},
                        json=[{"content": "Allergic to peanuts"}])
    assert imported.status_code == 202, imported.text
    assert len({a, b, imported.json()["job_id"]}) == 3
    assert api_b.get(f"/v1/jobs/{a}").status_code == 404


def test_import_key_is_bound_to_its_records(api: httpx.Client, user: str) -> None:
    params = {"user_id": user, "idempotency_key": "batch-x"}
    first = api.post("/v1/import", params=params, json=[{"content": "Speaks Welsh"}])
    same = api.post("/v1/import", params=params, json=[{"content": "Speaks Welsh"}])
    assert same.json()["job_id"] == first.json()["job_id"]
    other = api.post("/v1/import", params=params, json=[{"content": "Speaks Basque"}])
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"
    assert wait_job(api, first.json()["job_id"])["result"]["added"] == 1
