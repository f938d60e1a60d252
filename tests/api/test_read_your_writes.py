"""Read-your-writes on the session stack: a write's memory is found by the very next read
that asks for it (`consistency: "fresh"` or `after_jobs`), and the answer says whether the
awaited writes had all ended.

A job is held "running" for real by taking its user's write lock (the worker waits on it,
`MEMORYD_USER_LOCK_WAIT_S` = 2 s in the test settings), released before that runs out."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import redis
from conftest import KEY_A

from memoryd.client import MemorydClient
from memoryd.jobs.enqueue import submit
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.names import TaskName
from memoryd.jobs.pending import pending_key
from memoryd.memories.locks import user_lock
from memoryd.records.commands import UpdateCommand
from memoryd.records.models import Owner, utcnow
from memoryd.records.schemas import UpdateRequest


@pytest.fixture(scope="module")
def rclient(stack: Any) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(stack.settings.redis_url)
    yield client
    client.close()


@contextmanager
def holding(client: redis.Redis, tenant: str, user_id: str) -> Iterator[None]:
    """The user's write lock, as a worker holds it: their jobs wait until it is released."""
    with user_lock(client, Owner(tenant_id=tenant, user_id=user_id), 10.0, 5.0):
        yield


def token() -> str:
    return f"zq{uuid.uuid4().hex[:10]}"


def interaction(api: httpx.Client, user: str, text: str, extract: str) -> str:
    response = api.post("/v1/interactions", json={
        "user_id": user, "extract": extract,
        "messages": [{"role": "user", "content": text}],
    })
    assert response.status_code == 202, response.text
    job_id: str = response.json()["job_id"]
    return job_id


# The bound of a wait that is expected to see its jobs end: generous, as the machine may be
# loaded; a wait ends as soon as its jobs do.
BOUND = 30.0


def fresh_search(api: httpx.Client, user: str, query: str, **fields: Any) -> dict[str, Any]:
    if "after_jobs" in fields or "consistency" in fields:
        fields.setdefault("fresh_timeout_s", BOUND)
    response = api.post("/v1/search", json={"user_id": user, "query": query, **fields})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def contents(body: dict[str, Any]) -> list[str]:
    return [hit["memory"]["content"] for hit in body["results"]]


@pytest.mark.parametrize("extract", ["raw", "rules"])
def test_fresh_search_right_after_a_write_finds_it(
    api: httpx.Client, user: str, extract: str, rclient: redis.Redis,
) -> None:
    tag = token()
    text = f"Remember that I moved to Berlin, my locker code is {tag}"
    job = interaction(api, user, text, extract)
    body = fresh_search(api, user, f"locker code {tag}", consistency="fresh")
    assert body["freshness"]["applied"] is True, body["freshness"]
    assert body["freshness"]["pending_jobs"] == []
    assert any(tag in c for c in contents(body)), body
    assert api.get(f"/v1/jobs/{job}").json()["status"] == "succeeded"
    # The job's end took it off the user's pending list.
    assert rclient.zcard(pending_key("tenant-a", user)) == 0
    # Without the options nothing is awaited and nothing is reported.
    assert fresh_search(api, user, f"locker code {tag}")["freshness"] is None


def test_after_jobs_waits_for_the_named_job(api: httpx.Client, user: str) -> None:
    tag = token()
    job = interaction(api, user, f"My bike is a green {tag} with a basket", "rules")
    body = fresh_search(api, user, f"bike {tag}", after_jobs=[job])
    assert body["freshness"]["applied"] is True
    assert any(tag in c for c in contents(body)), body
    context = api.post("/v1/context", json={"user_id": user, "query": f"bike {tag}",
                                            "after_jobs": [job], "min_score": 0,
                                            "fresh_timeout_s": BOUND})
    assert context.status_code == 200, context.text
    assert context.json()["freshness"]["applied"] is True
    assert tag in context.json()["block"]


def test_saves_and_deletes_are_awaited_too(api: httpx.Client, user: str) -> None:
    tag = token()
    saved = api.post("/v1/memories", json={"user_id": user, "content": f"Allergic to {tag}"})
    assert saved.status_code == 202, saved.text
    found = fresh_search(api, user, f"allergic {tag}", consistency="fresh")
    assert found["freshness"]["applied"] is True
    hits = [h for h in found["results"] if tag in h["memory"]["content"]]
    assert hits, found
    gone = api.delete(f"/v1/memories/{hits[0]['memory']['id']}", params={"user_id": user})
    assert gone.status_code == 202, gone.text
    after = fresh_search(api, user, f"allergic {tag}", consistency="fresh")
    assert after["freshness"]["applied"] is True
    assert not any(tag in c for c in contents(after)), after


def test_a_short_wait_on_a_running_job_reports_it_pending(
    api: httpx.Client, user: str, rclient: redis.Redis,
) -> None:
    tag = token()
    with holding(rclient, "tenant-a", user):
        job = interaction(api, user, f"My new flat is on {tag} street", "raw")
        body = fresh_search(api, user, f"flat {tag}", consistency="fresh",
                            after_jobs=[job], fresh_timeout_s=0.2)
        assert body["freshness"]["applied"] is False
        assert body["freshness"]["pending_jobs"] == [job]  # named once though asked twice
        assert body["freshness"]["waited_ms"] >= 150
        assert body["freshness"]["timed_out"] is True  # the wait ran out on the job
        assert not any(tag in c for c in contents(body))  # answered as usual, without it
    done = fresh_search(api, user, f"flat {tag}", consistency="fresh")
    assert done["freshness"]["applied"] is True
    assert any(tag in c for c in contents(done))


def test_another_tenants_job_is_not_applied_and_not_waited_for(
    api: httpx.Client, api_b: httpx.Client, user: str, rclient: redis.Redis,
) -> None:
    with holding(rclient, "tenant-b", user):
        foreign = interaction(api_b, user, f"tenant b's secret {token()}", "raw")
        unknown = str(uuid.uuid4())
        body = fresh_search(api, user, "secret", after_jobs=[foreign, unknown],
                            fresh_timeout_s=20)
        # The same answer for a running foreign job and an id that never existed.
        assert body["freshness"]["applied"] is False
        assert body["freshness"]["pending_jobs"] == [foreign, unknown]
        assert body["freshness"]["waited_ms"] < 10_000  # not held for the 20 s bound
        assert body["freshness"]["timed_out"] is False  # nothing was waited for
        # Tenant B's own fresh read of that user does see its job as pending.
        own = fresh_search(api_b, user, "secret", consistency="fresh", fresh_timeout_s=0)
        assert own["freshness"]["pending_jobs"] == [foreign]


def test_a_failed_job_counts_as_ended_and_a_retry_is_pending_again(
    stack: Any, api: httpx.Client, user: str, rclient: redis.Redis,
) -> None:
    # An edit of a memory that does not exist: the worker fails it (not_found).
    command = UpdateCommand(tenant_id="tenant-a", user_id=user, received_at=utcnow(),
                            memory_id=str(uuid.uuid4()), changes=UpdateRequest(importance=9))
    job = submit(stack.runtime.jobs, stack.runtime.celery, TaskName.UPDATE, command).job_id
    body = fresh_search(api, user, "anything", after_jobs=[job], consistency="fresh")
    assert body["freshness"]["applied"] is True and body["freshness"]["pending_jobs"] == []
    assert api.get(f"/v1/jobs/{job}").json()["status"] == "failed"
    with holding(rclient, "tenant-a", user):
        assert api.post(f"/v1/jobs/{job}/retry").status_code == 202
        again = fresh_search(api, user, "anything", consistency="fresh", fresh_timeout_s=0)
        assert again["freshness"]["pending_jobs"] == [job]
    ended = fresh_search(api, user, "anything", consistency="fresh")
    assert ended["freshness"]["applied"] is True


def test_a_job_whose_end_is_never_recorded_stops_counting(
    api: httpx.Client, user: str, rclient: redis.Redis,
) -> None:
    # A job claimed and never run (as after a lost worker), with a 1 s pending TTL.
    lost = str(uuid.uuid4())
    JobStore(rclient, 3600, pending_ttl_s=1).create(lost, "tenant-a", "memory.save", None, user)
    before = fresh_search(api, user, "anything", consistency="fresh", fresh_timeout_s=0.1)
    assert before["freshness"]["pending_jobs"] == [lost]
    time.sleep(1.1)
    after = fresh_search(api, user, "anything", consistency="fresh")
    assert after["freshness"] == {"applied": True, "pending_jobs": [],
                                  "waited_ms": after["freshness"]["waited_ms"],
                                  "timed_out": False}
    rclient.delete(f"memoryd:job:{lost}")


@pytest.mark.parametrize("body, field", [
    ({"consistency": "strong"}, "consistency"),
    ({"after_jobs": ["not-a-job-id"]}, "after_jobs"),
    ({"after_jobs": [str(uuid.uuid4()) for _ in range(101)]}, "after_jobs"),
    ({"fresh_timeout_s": -1}, "fresh_timeout_s"),
])
@pytest.mark.parametrize("route", ["/v1/search", "/v1/context"])
def test_bad_options_are_422_naming_the_field(
    api: httpx.Client, user: str, route: str, body: dict[str, Any], field: str,
) -> None:
    response = api.post(route, json={"user_id": user, "query": "q", **body})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert field in (error.get("field") or "") and field in error["message"]


def test_python_client_passes_the_options(base_url: str, user: str) -> None:
    tag = token()
    with MemorydClient(base_url, KEY_A) as client:
        accepted = client.add_interaction(
            user, [{"role": "user", "content": f"My cat is called {tag}"}], extract="raw")
        found = client.search(user, f"cat {tag}", after_jobs=[accepted.job_id],
                              fresh_timeout_s=BOUND)
        assert found.freshness is not None and found.freshness.applied
        assert any(tag in hit.memory.content for hit in found.results)
        block = client.context(user, f"cat {tag}", consistency="fresh", min_score=0,
                               fresh_timeout_s=BOUND)
        assert block.freshness is not None and block.freshness.applied
        assert tag in block.block
        plain = client.search(user, f"cat {tag}")
        assert plain.freshness is None
