"""One tenant's (or user's) unmarked flood does not hold up another's write (issue 31,
item 11; shared/jobs/lanes.py): through the real stack, the flood queued first, the other
write ends while most of the flood has not."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest
import redis
from conftest import redis_db_url
from helpers import wait_job
from up_process import start_up, stop_up, wait_ready

from memoryd.embeddings.e5.engine import default_cache_dir
from memoryd.jobs.names import QueueName
from memoryd.platform.redis_runtime import free_port
from memoryd.tenancy.api_keys import ApiKeyStore, parse_scopes

DB = 8  # a database of its own (the suite runs files in parallel)

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


@dataclass(frozen=True)
class OwnStack:
    base: str
    redis: redis.Redis


@pytest.fixture(scope="module")
def own_stack(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnStack]:
    """A `memoryd up` of its own (a process of its own, so the floods it leaves queued when it
    stops hold nothing of the session stack's, and no process-wide state is shared)."""
    url = redis_db_url(redis_server, DB)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_up(tmp_path_factory.mktemp("fair") / "data", port, {
        "MEMORYD_REDIS_URL": url, "MEMORYD_LOG_LEVEL": "WARNING", "MEMORYD_LOG_JSON": "true",
        "MEMORYD_WORKER_CONCURRENCY": "4", "MEMORYD_WORKER_STOP_GRACE_S": "1.0",
        "MEMORYD_ENGINE_CACHE_DIR": str(default_cache_dir())})
    client = redis.Redis.from_url(url)
    try:
        wait_ready(proc, base)
        yield OwnStack(base, client)
    finally:
        stop_up(proc)
        client.flushdb()
        client.close()


def _tenant_client(stack: OwnStack) -> httpx.Client:
    """A key of a tenant of its own."""
    key, _ = ApiKeyStore(stack.redis).create(
        f"flood-{uuid.uuid4().hex[:8]}", parse_scopes("read,write"), "fair-shares test")
    return httpx.Client(base_url=stack.base,
                        headers={"Authorization": f"Bearer {key}"}, timeout=30.0)


def _drop_queued(stack: OwnStack) -> None:
    """The rest of a flood is not this test's business: gone from the queues (the jobs
    already running end on their own)."""
    stack.redis.delete(QueueName.MEMORY.value, QueueName.BULK.value)


def _left_when_saved(stack: OwnStack, flooder: httpx.Client, flood_users: list[str],
                     count: int, saver: httpx.Client, saver_user: str) -> int:
    """`count` interactions of `flood_users` queued, then one save of `saver_user`: how many
    of the interactions had not ended when the save had (the rest are dropped)."""
    backlog = _flood(flooder, flood_users, count)
    saved = saver.post("/v1/memories", json={
        "user_id": saver_user, "content": "My locker number is 12"}).json()["job_id"]
    assert wait_job(saver, saved, 120)["status"] == "succeeded"
    waiting = _not_ended(flooder, backlog)
    _drop_queued(stack)
    return waiting


def test_another_tenants_save_ends_before_an_unmarked_backlog(own_stack: OwnStack) -> None:
    with _tenant_client(own_stack) as flooder, _tenant_client(own_stack) as other:
        waiting = _left_when_saved(own_stack, flooder, [f"history-{i}" for i in range(10)], 80,
                                   other, "saver")
    # Before shares, the save queued behind all 80 and ended with the last few of them.
    assert waiting >= 20, f"only {waiting} of the 80 queued interactions were left"


def test_another_users_save_ends_before_one_users_backlog(own_stack: OwnStack) -> None:
    with _tenant_client(own_stack) as tenant:
        waiting = _left_when_saved(own_stack, tenant, ["one-busy-user"], 40,
                                   tenant, "a-quiet-user")
    assert waiting >= 10, f"only {waiting} of the 40 queued interactions were left"
