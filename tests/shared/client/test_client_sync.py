"""The blocking client against the real gateway, worker and store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from conftest import KEY_A

from memoryd.client import (
    BadRequest,
    ConnectionFailed,
    JobTimeout,
    MemorydClient,
    NotFound,
    Unauthorized,
)
from memoryd.memories.locks import user_lock
from memoryd.platform.redis_runtime import free_port
from memoryd.records.models import Owner
from memoryd.records.schemas import JobAccepted, MemoryView, SaveResult


@pytest.fixture()
def client(base_url: str) -> MemorydClient:
    return MemorydClient(base_url, KEY_A)


def test_interaction_then_search_and_context(client: MemorydClient, user: str) -> None:
    job = client.add_interaction(user, [
        {"role": "user", "content": "My daughter is called Mia. 我最喜欢吃火锅"},
    ], thread_id="t1", extract="raw")
    assert isinstance(job, JobAccepted)
    done = client.wait(job.job_id, timeout=30)
    assert done.status.value == "succeeded" and done.result is not None
    hits = client.search(user, "孩子叫什么名字?", top_k=3).results
    assert hits and "Mia" in hits[0].memory.content
    ctx = client.context(user, "what is my daughter's name?", token_budget=200, min_score=0)
    assert "Mia" in ctx.block and ctx.items[0].memory.thread_id == "t1"


def test_save_get_update_list_forget(client: MemorydClient, user: str) -> None:
    saved = client.save(user, "I am allergic to peanuts", tags=["health"], importance=9,
                        wait=20)
    assert isinstance(saved, SaveResult) and saved.outcome.value == "added"
    assert saved.memory is not None
    memory_id = saved.memory.id
    again = client.save(user, "I am allergic to peanuts", wait=20)
    assert isinstance(again, SaveResult) and again.outcome.value == "duplicate"
    got = client.get(user, memory_id)
    assert isinstance(got, MemoryView) and got.tags == ["health"] and got.importance == 9

    edited = client.update(user, memory_id, content="我对花生过敏", wait=20)
    assert isinstance(edited, dict) and edited["memory"]["content"] == "我对花生过敏"
    assert client.get(user, memory_id).content == "我对花生过敏"

    page = client.list(user, limit=10)
    assert [m.id for m in page.items] == [memory_id]
    forgotten = client.forget(user, memory_id, wait=20)
    assert isinstance(forgotten, dict) and forgotten["deleted"] == 1
    with pytest.raises(NotFound) as missing:
        client.get(user, memory_id)
    assert missing.value.code == "not_found" and missing.value.status == 404


def test_forget_by_thread_and_time_range(client: MemorydClient, user: str) -> None:
    old = datetime(2020, 1, 1, tzinfo=UTC)
    client.save(user, "Old trip to Kyoto", type="episodic", occurred_at=old, wait=20)
    client.save(user, "Chat in thread x", thread_id="x", wait=20)
    client.save(user, "Keep this one", wait=20)
    by_time = client.forget(user, before=old + timedelta(days=1), wait=20)
    assert isinstance(by_time, dict) and by_time["deleted"] == 1
    queued = client.forget(user, thread_id="x")
    assert isinstance(queued, JobAccepted)
    assert client.wait(queued.job_id).result == {"deleted": 1}
    assert [m.content for m in client.list(user).items] == ["Keep this one"]


def test_api_errors_are_typed(client: MemorydClient, base_url: str, user: str) -> None:
    with pytest.raises(BadRequest) as bad:
        client.search(user, "tea", tags=["x" * 10] * 40)  # over MEMORYD_MAX_TAGS
    assert (bad.value.code, bad.value.field, bad.value.status) == ("invalid_input", "tags", 422)
    with pytest.raises(Unauthorized) as denied:
        MemorydClient(base_url, "wrong-key").search(user, "tea")
    assert denied.value.code == "unauthorized" and "API key" in denied.value.message
    with pytest.raises(NotFound):
        client.job("no-such-job")
    # Client-side validation uses the API's own models: nothing is sent.
    with pytest.raises(ValueError, match="importance"):
        client.save(user, "x", importance=11)


def test_wait_times_out_with_the_last_state(client: MemorydClient, user: str, stack: Any) -> None:
    # The user's write lock is held here, so the job cannot be done by the first poll (a
    # backlog of other jobs was not enough: CI's worker sometimes finished it first).
    redis_client = redis.Redis.from_url(stack.settings.redis_url)
    owner = Owner(tenant_id="tenant-a", user_id=user)
    try:
        with user_lock(redis_client, owner, timeout_s=30, wait_s=5):
            job = client.add_interaction(
                user, [{"role": "user", "content": "I like green tea"}], extract="raw")
            with pytest.raises(JobTimeout) as late:
                client.wait(job.job_id, timeout=0)
        assert late.value.job.job_id == job.job_id
        assert late.value.job.status.value in {"queued", "running", "retrying"}
        assert client.wait(job.job_id, timeout=30).status.value == "succeeded"
    finally:
        redis_client.close()


def test_history_lists_the_versions(client: MemorydClient, user: str) -> None:
    saved = client.save(user, "I run every morning", wait=20)
    assert isinstance(saved, SaveResult) and saved.memory is not None
    memory_id = saved.memory.id
    client.update(user, memory_id, content="I run every evening", wait=20)
    history = client.history(user, memory_id)
    assert [e.event for e in history.events][:2] == ["ADD", "UPDATE"]
    assert history.events[1].before == "I run every morning"
    assert history.events[1].after == "I run every evening"
    with pytest.raises(NotFound) as missing:
        client.history(user, "00000000-0000-0000-0000-000000000000")
    assert missing.value.code == "not_found"


def test_stack_down_is_connection_failed() -> None:
    with pytest.raises(ConnectionFailed) as down:
        MemorydClient(f"http://127.0.0.1:{free_port()}", "k").search("u", "q")
    assert down.value.code == "unreachable" and "not reachable" in down.value.message


def test_ids_are_checked_before_they_reach_a_path(
    stack: Any, base_url: str, user: str,
) -> None:
    """On 204bae7 an id went into the path as given and `..` collapsed: forgetting
    `../webhooks/<id>` deleted the tenant's webhook, getting `../users` listed its users.
    Now such an id is refused before any request, naming the argument; and a job is read
    for one user only when asked."""
    from memoryd.client import InvalidArgument
    from memoryd.tenancy.api_keys import ALL_SCOPES, ApiKeyStore

    tenant = f"ids-{user[-8:]}"
    key, _ = ApiKeyStore(stack.runtime.redis).create(tenant, ALL_SCOPES, "ids test")
    with MemorydClient(base_url, key) as client:
        hook = client.create_webhook("http://127.0.0.1:9/hook", ["memory.added"])
        try:
            for call, field in (
                    (lambda: client.forget(user, f"../webhooks/{hook.id}"), "memory_id"),
                    (lambda: client.get(user, "../users"), "memory_id"),
                    (lambda: client.history(user, "a/b"), "memory_id"),
                    (lambda: client.update(user, "..", content="x"), "memory_id"),
                    (lambda: client.job("../memories"), "job_id"),
                    (lambda: client.delete_webhook("../webhooks"), "webhook_id"),
                    (lambda: client.webhook_deliveries("%2e%2e"), "webhook_id")):
                with pytest.raises(InvalidArgument) as refused:
                    call()
                assert refused.value.code == "invalid_input" and refused.value.field == field
            assert [h.id for h in client.list_webhooks().items] == [hook.id]
            # A job is its user's: another user's id reads as unknown.
            saved = client.save(user, "I keep bees", wait=20)
            assert isinstance(saved, SaveResult) and saved.memory is not None
            # A REST write is audited as its key (`api:<key id>`), not "system".
            [added] = client.history(user, saved.memory.id).events
            assert added.actor.startswith("api:key_"), added
            job = client.save(user, "I keep two hives")
            assert isinstance(job, JobAccepted)
            assert client.job(job.job_id, user_id=user).job_id == job.job_id
            with pytest.raises(NotFound):
                client.job(job.job_id, user_id=f"{user}-other")
        finally:
            client.delete_webhook(hook.id)
