"""One tenant's (or user's) unmarked flood does not hold up another's write (issue 31,
item 11; shared/jobs/lanes.py): through the real stack, the flood queued first, the other
write ends while most of the flood has not."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import redis
from conftest import redis_db_url, stack_settings
from helpers import wait_job

from memoryd.jobs.names import QueueName
from memoryd.tenancy.api_keys import ApiKeyStore, parse_scopes

DB = 15

PLACES = ["Lisbon", "Osaka", "Quito", "Hanoi", "Cusco", "Tbilisi"]


def _turn(i: int, j: int) -> str:
    return " ".join(f"On day {i}.{j}.{k} I was in {PLACES[(i + k) % len(PLACES)]} with a "
                    f"friend who lives there, number {i * 31 + k}." for k in range(4))


def _flood(api: httpx.Client, users: list[str], count: int) -> list[str]:
    """`count` unmarked interactions of long turns, enqueued as fast as the gateway takes
    them; their job ids."""
    def one(i: int) -> str:
        answer = api.post("/v1/interactions", json={
            "user_id": users[i % len(users)], "extract": "raw",
            "store_roles": ["user", "assistant"],
            "messages": [{"role": "user" if j % 2 == 0 else "assistant",
                          "content": _turn(i, j)} for j in range(2)]})
        assert answer.status_code == 202, answer.text
        return str(answer.json()["job_id"])

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(count)))


def _not_ended(api: httpx.Client, jobs: list[str]) -> int:
    return sum(api.get(f"/v1/jobs/{job}").json()["status"] not in ("succeeded", "failed")
               for job in jobs)


@pytest.fixture(scope="module")
def own_stack(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A stack of its own: the floods are left queued when it stops, instead of holding
    the session stack's threads (or a drain taking minutes) after the test."""
    from memoryd.workers.bootstrap import get_runtime, set_runtime
    from memoryd.workers.stack import EmbeddedStack

    # An in-process stack installs its runtime for this process's tasks, and unsets it on
    # stop; the session stack's worker (same process) gets its own back after.
    session_runtime = get_runtime()
    url = redis_db_url(redis_server, DB)
    settings = stack_settings(tmp_path_factory.mktemp("fair"), url, worker_stop_grace_s=1.0)
    embedded = EmbeddedStack(settings)
    embedded.prepare()
    embedded.start_in_background()
    try:
        yield embedded
    finally:
        embedded.stop()
        set_runtime(session_runtime)
        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()


def _tenant_client(stack: Any) -> httpx.Client:
    """A key of a tenant of its own."""
    key, _ = ApiKeyStore(stack.runtime.redis).create(
        f"flood-{uuid.uuid4().hex[:8]}", parse_scopes("read,write"), "fair-shares test")
    return httpx.Client(base_url=f"http://127.0.0.1:{stack.settings.port}",
                        headers={"Authorization": f"Bearer {key}"}, timeout=30.0)


def _drop_queued(stack: Any) -> None:
    """The rest of a flood is not this test's business: gone from the queues (the jobs
    already running end on their own)."""
    stack.runtime.redis.delete(QueueName.MEMORY.value, QueueName.BULK.value)


def test_another_tenants_save_ends_before_an_unmarked_backlog(own_stack: Any) -> None:
    with _tenant_client(own_stack) as flooder, _tenant_client(own_stack) as other:
        backlog = _flood(flooder, [f"history-{i}" for i in range(10)], 80)
        saved = other.post("/v1/memories", json={
            "user_id": "saver", "content": "My locker number is 12"}).json()["job_id"]
        assert wait_job(other, saved, 120)["status"] == "succeeded"
        # Before shares, the save queued behind all 80 and ended with the last few of them.
        waiting = _not_ended(flooder, backlog)
        _drop_queued(own_stack)
    assert waiting >= 20, f"only {waiting} of the 80 queued interactions were left"


def test_another_users_save_ends_before_one_users_backlog(own_stack: Any) -> None:
    with _tenant_client(own_stack) as tenant:
        backlog = _flood(tenant, ["one-busy-user"], 40)
        saved = tenant.post("/v1/memories", json={
            "user_id": "a-quiet-user", "content": "My locker number is 14"}).json()["job_id"]
        assert wait_job(tenant, saved, 120)["status"] == "succeeded"
        waiting = _not_ended(tenant, backlog)
        _drop_queued(own_stack)
    assert waiting >= 10, f"only {waiting} of the 40 queued interactions were left"
