"""GET /v1/export and POST /v1/import: a round trip keeps what matters; bad files change
nothing and say which line is wrong."""

from __future__ import annotations

import json
from typing import Any

import httpx
from helpers import save, wait_job


def export(api: httpx.Client, user: str) -> list[dict[str, Any]]:
    response = api.get("/v1/export", params={"user_id": user})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def listing(api: httpx.Client, user: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get(
        "/v1/memories", params={"user_id": user, "limit": 200}).json()["items"]
    return items


def import_lines(api: httpx.Client, user: str, body: bytes, **params: Any) -> httpx.Response:
    return api.post("/v1/import", params={"user_id": user, **params}, content=body,
                    headers={"content-type": "application/x-ndjson"})


def test_export_then_import_round_trip(api: httpx.Client, user: str) -> None:
    save(api, user, "我对花生过敏 (peanut allergy)", tags=["health", "饮食"], importance=9,
         metadata={"note": "told the nurse"})
    save(api, user, "Trip to Kyoto with Mia", type="episodic",
         occurred_at="2023-04-05T10:00:00Z", thread_id="travel")
    save(api, user, "Prefers tea over coffee", key="drink", expires_at="2099-01-01T00:00:00Z")
    hidden = save(api, user, "An old address on Elm Street").json()["memory"]
    assert api.patch(f"/v1/memories/{hidden['id']}", params={"user_id": user, "wait": 10},
                     json={"enabled": False}).status_code == 200
    exported = export(api, user)
    assert len(exported) == 4
    assert all("dense" not in r and "vector" not in r for r in exported)
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in exported).encode()

    target = f"{user}-copy"
    accepted = import_lines(api, target, body)
    assert accepted.status_code == 202, accepted.text
    job = wait_job(api, accepted.json()["job_id"])
    assert job["status"] == "succeeded", job
    assert (job["result"]["imported"], job["result"]["added"]) == (4, 4)

    copied = {m["content"]: m for m in listing(api, target)}
    for original in exported:
        copy = copied[original["content"]]
        for name in ("type", "tags", "importance", "key", "thread_id", "occurred_at",
                     "created_at", "enabled", "metadata", "scope", "expires_at"):
            assert copy[name] == original[name], name
        assert copy["source"] == "import"
    assert copied["An old address on Elm Street"]["enabled"] is False
    assert copied["Prefers tea over coffee"]["expires_at"].startswith("2099-01-01")

    # Importing the same file again adds nothing: the ids are deterministic.
    again = wait_job(api, import_lines(api, target, body).json()["job_id"])
    assert again["result"]["added"] == 0 and again["result"]["imported"] == 4
    assert len(listing(api, target)) == 4


def test_json_array_body_and_idempotency_key(api: httpx.Client, user: str) -> None:
    records = [{"content": "Likes hiking in the Alps", "tags": ["outdoors"]},
               {"content": "会说一点日语", "importance": 7}]
    first = api.post("/v1/import", params={"user_id": user, "idempotency_key": "batch-1"},
                     json=records)
    assert first.status_code == 202, first.text
    second = api.post("/v1/import", params={"user_id": user, "idempotency_key": "batch-1"},
                      json=records)
    assert second.json()["job_id"] == first.json()["job_id"]
    assert wait_job(api, first.json()["job_id"])["result"]["added"] == 2
    assert sorted(m["content"] for m in listing(api, user)) == sorted(
        r["content"] for r in records)


def test_a_bad_record_rejects_the_body_and_names_its_line(api: httpx.Client, user: str) -> None:
    body = (b'{"content": "fine"}\n'
            b'{"content": "too important", "importance": 11}\n')
    refused = import_lines(api, user, body)
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "invalid_input" and error["field"] == "records[1].importance"
    assert error["message"].startswith("line 2: importance")

    broken = import_lines(api, user, b'{"content": "ok"}\n\n{"content": oops}\n')
    assert broken.status_code == 422
    assert broken.json()["error"]["message"].startswith("line 3: not valid JSON")

    unknown = import_lines(api, user, b'{"content": "ok", "colour": "red"}\n')
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "records[0].colour"

    empty = import_lines(api, user, b"\n\n")
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "body"
    assert listing(api, user) == []


def test_import_is_bounded(api: httpx.Client, user: str, stack: Any) -> None:
    limit = stack.settings.import_max_records
    body = b"".join(b'{"content": "memory %d"}\n' % i for i in range(limit + 1))
    refused = import_lines(api, user, body)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "payload_too_large"
    assert listing(api, user) == []
