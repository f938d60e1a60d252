"""An imported `created_at` in the future is clamped to the import's arrival, so a
memory cannot be imported to outlive its tenant's retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from helpers import wait_job


def imported(api: httpx.Client, user: str, records: list[dict[str, str]]) -> dict[str, str]:
    response = api.post("/v1/import", params={"user_id": user}, json=records)
    assert response.status_code == 202, response.text
    assert wait_job(api, response.json()["job_id"])["status"] == "succeeded"
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    return {m["content"]: m["created_at"] for m in items}


def test_future_created_at_is_clamped_and_a_past_one_kept(api: httpx.Client, user: str) -> None:
    before = datetime.now(UTC)
    created = imported(api, user, [
        {"content": "Will live forever", "created_at": "2999-01-01T00:00:00Z"},
        {"content": "Moved to Oslo in 2019", "created_at": "2019-06-01T08:00:00Z"},
    ])
    after = datetime.now(UTC)
    clamped = datetime.fromisoformat(created["Will live forever"])
    assert before - timedelta(seconds=1) <= clamped <= after
    assert datetime.fromisoformat(created["Moved to Oslo in 2019"]) == datetime(
        2019, 6, 1, 8, tzinfo=UTC)
