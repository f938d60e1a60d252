"""Retention and forgetting: expired memories are never returned, the purge task deletes
them for real, and every deletion leaves an audit record without content. The store is
read directly (through `Store`, across owners), never through the API."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from helpers import save, search

from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.records.identity import content_hash, memory_id
from memoryd.records.models import MemoryRecord, Owner, utcnow
from memoryd.retrieval.keywords import keyword_vector
from memoryd.store import PointData
from memoryd.store.conditions import IdIn
from memoryd.tenancy.api_keys import ApiKeyStore, KeyScope


def in_store(stack: Any, ids: list[str]) -> set[str]:
    """Ids present in the store, whatever their owner."""
    store = stack.runtime.index.view().store
    return {p.id for p in store.find_across_owners([IdIn(tuple(ids))], len(ids))}


def no_content_left(stack: Any, owner: Owner, mid: str, actor: str) -> None:
    # The task deletes the points first and writes their audit right after: a caller that
    # saw the points go may look before the audit is there.
    deadline = time.monotonic() + 10
    while True:
        events = stack.runtime.index.view().audit.audit_of(owner, mid)
        deletes = [e for e in events if e.event == "DELETE"]
        if deletes or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    # A delete through the API is audited as the key that asked (`api:<key id>`).
    assert deletes and (deletes[-1].actor == actor or
                        (actor == "api" and deletes[-1].actor.startswith("api:")))
    assert all(e.before is None and e.after is None for e in events), events


def purge_and_wait(stack: Any, gone: list[str], timeout_s: float = 30) -> None:
    stack.runtime.celery.send_task(TaskName.PURGE_EXPIRED.value,
                                   queue=QUEUE_OF[TaskName.PURGE_EXPIRED].value)
    deadline = time.monotonic() + timeout_s
    while in_store(stack, gone) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not in_store(stack, gone)


def visible(api: httpx.Client, user: str, mid: str, query: str) -> tuple[bool, bool, bool]:
    got = api.get(f"/v1/memories/{mid}", params={"user_id": user}).status_code == 200
    listed = mid in {m["id"] for m in api.get("/v1/memories",
                                              params={"user_id": user}).json()["items"]}
    found = mid in {h["memory"]["id"] for h in search(api, user, query, top_k=10)}
    return got, listed, found


def test_expires_at_is_set_returned_and_enforced(stack: Any, api: httpx.Client,
                                                 user: str) -> None:
    later = (utcnow() + timedelta(days=3)).replace(microsecond=0)
    kept = save(api, user, "我住在杭州, I moved there in 2021", expires_at=later.isoformat())
    assert kept.status_code == 201
    memory = kept.json()["memory"]
    assert memory["expires_at"].startswith(later.strftime("%Y-%m-%dT%H:%M:%S"))
    path = f"/v1/memories/{memory['id']}"
    sooner = later - timedelta(days=1)
    patched = api.patch(path, params={"user_id": user, "wait": 10},
                        json={"expires_at": sooner.isoformat()})
    assert patched.status_code == 200
    assert patched.json()["memory"]["expires_at"].startswith(sooner.strftime("%Y-%m-%dT%H"))
    cleared = api.patch(path, params={"user_id": user, "wait": 10}, json={"expires_at": None})
    assert cleared.json()["memory"]["expires_at"] is None

    # Past its time: gone from get, list and search at once, though still stored.
    past = (utcnow() - timedelta(minutes=1)).isoformat()
    expired = save(api, user, "My old phone was a Nokia 3310", expires_at=past).json()["memory"]
    assert visible(api, user, expired["id"], "Nokia phone") == (False, False, False)
    assert visible(api, user, memory["id"], "杭州") == (True, True, True)
    assert in_store(stack, [expired["id"]]) == {expired["id"]}

    purge_and_wait(stack, [expired["id"]])
    assert in_store(stack, [memory["id"]]) == {memory["id"]}
    no_content_left(stack, Owner(tenant_id="tenant-a", user_id=user), expired["id"], "retention")
    # The same fact saved again is a new memory, not a duplicate of the expired one.
    again = save(api, user, "My old phone was a Nokia 3310")
    assert again.status_code == 201 and again.json()["memory"]["expires_at"] is None


@pytest.fixture()
def retention_settings(stack: Any) -> Iterator[tuple[str, str]]:
    """Two fresh tenants: one kept 30 days by override, the other by the default 365."""
    short, default = f"ret-s-{uuid.uuid4().hex[:6]}", f"ret-d-{uuid.uuid4().hex[:6]}"
    original = stack.runtime.settings
    stack.runtime.settings = original.model_copy(update={
        "retention_days": 365.0, "tenant_retention_days": f"{short}=30,other=7"})
    try:
        yield short, default
    finally:
        stack.runtime.settings = original


def old_memory(stack: Any, owner: Owner, content: str, age_days: float) -> str:
    at = utcnow() - timedelta(days=age_days)
    mid = memory_id(owner.tenant_id, owner.user_id, "global", None, content_hash(content))
    record = MemoryRecord(id=mid, tenant_id=owner.tenant_id, user_id=owner.user_id,
                          content=content, content_hash=content_hash(content), occurred_at=at,
                          created_at=at, updated_at=at,
                          embedding_model=stack.runtime.index.view().embedder.name)
    vector = stack.runtime.index.view().embedder.embed_documents([content])[0].tolist()
    with stack.runtime.index.writing() as view:
        view.writes.upsert(owner, [PointData(mid, record.to_payload(), vector,
                                             keyword_vector(content))])
    return mid


def test_tenant_retention(stack: Any, base_url: str, user: str,
                          retention_settings: tuple[str, str]) -> None:
    short, default = retention_settings
    keys = ApiKeyStore(stack.runtime.redis)
    clients = {t: httpx.Client(base_url=base_url, timeout=30, headers={
        "Authorization": f"Bearer {keys.create(t, frozenset({KeyScope.READ}))[0]}"})
        for t in (short, default)}
    a, b = Owner(tenant_id=short, user_id=user), Owner(tenant_id=default, user_id=user)
    short_old = old_memory(stack, a, "I learned to swim in 1999", 40)
    short_new = old_memory(stack, a, "I learned to ski last winter", 10)
    default_old = old_memory(stack, b, "I learned to swim in 1999", 400)
    default_mid = old_memory(stack, b, "I learned to ski last winter", 40)
    with clients[short] as ca, clients[default] as cb:
        assert visible(ca, user, short_old, "learned swim") == (False, False, False)
        assert visible(ca, user, short_new, "learned ski") == (True, True, True)
        assert visible(cb, user, default_old, "learned swim") == (False, False, False)
        assert visible(cb, user, default_mid, "learned ski") == (True, True, True)
    purge_and_wait(stack, [short_old, default_old])
    assert in_store(stack, [short_new, default_mid]) == {short_new, default_mid}
    no_content_left(stack, a, short_old, "retention")
    no_content_left(stack, b, default_old, "retention")


def test_forgetting_removes_points_for_real(stack: Any, api: httpx.Client, user: str) -> None:
    owner = Owner(tenant_id="tenant-a", user_id=user)

    def saved(content: str, **fields: Any) -> str:
        response = save(api, user, content, **fields)
        assert response.status_code == 201, response.text
        return str(response.json()["memory"]["id"])

    one = saved("My locker code hint is the year I was born")
    thread = [saved(f"在 thread 里说过的第 {i} 件事: item {i}", thread_id="t-forget")
              for i in range(3)]
    old = [saved(f"Back in 2015 I lived in flat number {i}", type="episodic",
                 occurred_at=f"2015-0{i + 1}-10T12:00:00Z") for i in range(3)]
    recent = saved("Last week I adopted a dog named Bo", type="episodic",
                   occurred_at="2024-05-01T12:00:00Z")
    ids = [one, *thread, *old, recent]
    assert in_store(stack, ids) == set(ids)

    by_id = api.delete(f"/v1/memories/{one}", params={"user_id": user, "wait": 10})
    assert by_id.status_code == 200 and by_id.json()["deleted"] == 1
    by_thread = api.delete("/v1/memories", params={"user_id": user, "thread_id": "t-forget",
                                                   "wait": 10})
    assert by_thread.status_code == 200 and by_thread.json()["deleted"] == 3
    by_range = api.delete("/v1/memories", params={
        "user_id": user, "after": "2014-12-31T00:00:00Z", "before": "2016-01-01T00:00:00Z",
        "wait": 10})
    assert by_range.status_code == 200 and by_range.json()["deleted"] == 3

    assert in_store(stack, ids) == {recent}
    for mid, actor in [(one, "api"), *((t, "forget") for t in thread),
                       *((o, "forget") for o in old)]:
        no_content_left(stack, owner, mid, actor)
    # The survivor keeps its history with content.
    assert any(e.after for e in stack.runtime.index.view().audit.audit_of(owner, recent))


def test_embedded_timer_purges(stack: Any, api: httpx.Client, user: str) -> None:
    """The embedded stack's stand-in for beat sends the same task on its schedule."""
    from memoryd.workers.periodic import PeriodicSender

    past = (utcnow() - timedelta(seconds=1)).isoformat()
    mid = save(api, user, "一次性的提醒: call the plumber", expires_at=past).json()["memory"]["id"]
    assert in_store(stack, [mid]) == {mid}
    sender = PeriodicSender(stack.runtime.celery, TaskName.PURGE_EXPIRED, 0.5, first_s=0.1)
    sender.start()
    try:
        deadline = time.monotonic() + 30
        while in_store(stack, [mid]) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sender.stop()
    assert not in_store(stack, [mid])
    no_content_left(stack, Owner(tenant_id="tenant-a", user_id=user), mid, "retention")
