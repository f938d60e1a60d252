"""`?wait=` holds no worker thread: more waits than the gateway has threads (anyio's
default limiter, 40) leave another tenant's search answering, and each API key has a
cap on waits at once, past which the current state is answered at once.

The gateway here uses a Redis database no worker consumes, so its jobs stay queued until
the test ends them the way a worker does (`JobStore.mark_succeeded`)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import anyio.to_thread
import httpx
import redis
from conftest import KEY_A, KEY_B, redis_db_url
from live_gateway import gateway, settings_with

from memoryd.api.waits import Waits
from memoryd.jobs.job_store import JobStore
from memoryd.records.schemas import Freshness

WAITS = 64  # more than the thread limiter's 40 tokens


def idle_settings(stack: Any, **overrides: Any) -> Any:
    return settings_with(stack, redis_url=redis_db_url(stack.settings.redis_url, 9), **overrides)


async def queued_jobs(client: redis.Redis, n: int, timeout_s: float = 30.0) -> list[str]:
    """The ids of the first `n` jobs the gateway created (their waits start right after)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        keys = [k.decode() for k in client.scan_iter("memoryd:job:*")]
        if len(keys) >= n or asyncio.get_running_loop().time() > deadline:
            return [k.removeprefix("memoryd:job:") for k in keys]
        await asyncio.sleep(0.05)


def test_waits_beyond_the_thread_pool_leave_search_answering(stack: Any) -> None:
    assert anyio.to_thread.current_default_thread_limiter  # anyio's default: 40 tokens
    settings = idle_settings(stack)
    client = redis.Redis.from_url(settings.redis_url)
    client.flushdb()
    user = f"waiter-{uuid.uuid4().hex[:8]}"

    async def scenario(url: str) -> None:
        limits = httpx.Limits(max_connections=WAITS + 8)
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY_A}"},
                                     timeout=60, limits=limits) as a, \
                httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY_B}"},
                                  timeout=15) as b:
            waits = [asyncio.create_task(a.delete(
                "/v1/memories", params={"user_id": user, "all": "true", "wait": 30}))
                for _ in range(WAITS)]
            jobs = await queued_jobs(client, WAITS, timeout_s=10)
            await asyncio.sleep(0.5)  # every request is now inside its wait
            # Another tenant's search answers while all of them are pending.
            found = await b.post("/v1/search", json={"user_id": "other", "query": "my cat?"})
            assert found.status_code == 200, found.text
            # Every wait got as far as its job (with threads, only as many as there were).
            assert len(jobs) == WAITS
            listed = await b.get("/v1/memories", params={"user_id": "other"})
            assert listed.status_code == 200
            polled = await a.get(f"/v1/jobs/{jobs[0]}")
            assert polled.status_code == 200 and polled.json()["status"] == "queued"
            assert not any(w.done() for w in waits)
            # A job's end (as a worker marks it) answers its waiting requests.
            store = JobStore(client, 3600)
            for job in jobs:
                store.mark_succeeded(job, {"forgotten": 0})
            answers = await asyncio.wait_for(asyncio.gather(*waits), 20)
            assert {r.status_code for r in answers} == {200}
            assert all(r.json() == {"forgotten": 0} for r in answers)

    with gateway(settings, stack.runtime.index) as url:
        asyncio.run(scenario(url))
    client.flushdb()
    client.close()


def test_waits_past_the_key_cap_answer_202_at_once(stack: Any) -> None:
    settings = idle_settings(stack, max_waits_per_key=2)
    client = redis.Redis.from_url(settings.redis_url)
    client.flushdb()

    async def scenario(url: str) -> None:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY_A}"},
                                     timeout=60) as a, \
                httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {KEY_B}"},
                                  timeout=60) as b:
            params = {"user_id": "capped", "all": "true", "wait": 30}
            held = [asyncio.create_task(a.delete("/v1/memories", params=params))
                    for _ in range(2)]
            await queued_jobs(client, 2)
            await asyncio.sleep(0.5)
            extra = await asyncio.wait_for(a.delete("/v1/memories", params=params), 10)
            assert extra.status_code == 202 and extra.json()["status"] == "queued"
            # The cap is per key: another key still waits.
            other = asyncio.create_task(b.delete("/v1/memories", params=params))
            await asyncio.sleep(1.0)
            assert not other.done() and not any(h.done() for h in held)
            store = JobStore(client, 3600)
            for job in await queued_jobs(client, 4):
                store.mark_succeeded(job, {"forgotten": 0})
            answers = await asyncio.wait_for(asyncio.gather(*held, other), 20)
            assert [r.status_code for r in answers] == [200, 200, 200]

    with gateway(settings, stack.runtime.index) as url:
        asyncio.run(scenario(url))
    client.flushdb()
    client.close()


def test_a_new_gateways_first_wait_sees_a_write_that_ends_at_once(stack: Any) -> None:
    """Right after a (re)start the job-end subscription is new: a write ending a few ms into
    the first wait must still wake it. With re-reads 5-15 s apart, a missed end would hold
    the wait to its bound, and `timed_out` would say so."""
    settings = idle_settings(stack, wait_poll_s=10)
    client = redis.Redis.from_url(settings.redis_url)
    client.flushdb()
    store = JobStore(client, 3600)

    async def first_wait(delay_s: float) -> Freshness:
        waits = Waits(settings)  # as a gateway just started has it
        user = f"fresh-{uuid.uuid4().hex[:8]}"
        job = uuid.uuid4().hex
        assert store.create(job, "tenant-a", "memory.ingest", None, user_id=user)
        ender = threading.Timer(delay_s, store.mark_succeeded, (job, {"added": 1}))
        ender.start()
        try:
            return await waits.await_writes("key-a", "tenant-a", user, [], "fresh", 4.0)
        finally:
            ender.join()
            await waits.close()

    async def scenario() -> None:
        for delay_s in (0.0, 0.002, 0.005, 0.01, 0.02) * 3:
            fresh = await first_wait(delay_s)
            assert fresh.applied and not fresh.timed_out, (delay_s, fresh)
            assert fresh.pending_jobs == [] and fresh.waited_ms < 4000.0, (delay_s, fresh)
        # A write that does not end within the bound: pending, and the wait says it ran out.
        waits = Waits(settings)
        user = f"fresh-{uuid.uuid4().hex[:8]}"
        job = uuid.uuid4().hex
        assert store.create(job, "tenant-a", "memory.ingest", None, user_id=user)
        fresh = await waits.await_writes("key-a", "tenant-a", user, [], "fresh", 0.3)
        await waits.close()
        assert (fresh.applied, fresh.timed_out, fresh.pending_jobs) == (False, True, [job])

    asyncio.run(scenario())
    client.flushdb()
    client.close()
