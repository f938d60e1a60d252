"""Waiting for jobs (`?wait=`, `GET /v1/jobs/{id}`) on the event loop, bounded per API key.

A wait used to sleep in a worker thread; the threads (anyio's default limiter, 40) are the
ones sync routes and key lookups share, so a few dozen waits starved the gateway. Here a
wait is an awaited Redis notification (`memoryd.jobs.job_store.AsyncJobWaiter`) and holds no
thread; each API key may have `max_waits_per_key` waits at once, and a request beyond that
gets the job's current state at once (202 while it runs).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Annotated

from fastapi import Depends, Request

from memoryd.jobs.job_store import AsyncJobWaiter, ended
from memoryd.platform.errors import NotFound
from memoryd.platform.settings import Settings
from memoryd.records.schemas import Consistency, Freshness, JobView, ReadYourWrites


class Waits:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._waiter: AsyncJobWaiter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._active: Counter[str] = Counter()

    def _for_loop(self) -> AsyncJobWaiter:
        # An asyncio Redis client belongs to the loop it first ran on.
        loop = asyncio.get_running_loop()
        if self._waiter is None or self._loop is not loop:
            s = self._settings
            self._waiter = AsyncJobWaiter.from_url(s.redis_url, s.redis_timeout_s, s.wait_poll_s)
            self._loop = loop
        return self._waiter

    async def start(self) -> None:
        """Begin subscribing to job ends (without waiting for Redis): at startup, so the
        first wait after a restart finds the subscription ready. A wait never depends on
        this: it reads a job only once the subscription is confirmed."""
        await self._for_loop().start(0.0)

    async def get(self, job_id: str, tenant_id: str, user_id: str | None = None) -> JobView:
        return await self._for_loop().get(job_id, tenant_id, user_id)

    async def wait(self, key_id: str, job_id: str, tenant_id: str, timeout_s: float) -> JobView:
        """The job once it ends within `timeout_s`, else as it is then; past the key's cap of
        concurrent waits, as it is now."""
        waiter = self._for_loop()
        timeout_s = min(timeout_s, self._settings.max_wait_s)
        if timeout_s <= 0 or self._active[key_id] >= self._settings.max_waits_per_key:
            return await waiter.get(job_id, tenant_id)
        self._active[key_id] += 1
        try:
            return await waiter.wait(job_id, tenant_id, timeout_s)
        finally:
            self._active[key_id] -= 1
            if self._active[key_id] <= 0:
                del self._active[key_id]

    async def await_writes(
        self, key_id: str, tenant_id: str, user_id: str, after_jobs: Sequence[str],
        consistency: Consistency, timeout_s: float | None,
    ) -> Freshness:
        """Read-your-writes: wait until the named jobs and, with `consistency="fresh"`, the
        user's pending writes have ended, or `timeout_s` (default `fresh_wait_s`, at most
        `max_wait_s`) has passed; then say which had not.

        Only the tenant's own jobs are awaited: an `after_jobs` id that is unknown or
        another tenant's is reported pending at once (the same answer for both, so it
        leaks nothing), and never holds the read for the bound. The whole wait counts as
        one against the key's cap of concurrent waits; past the cap it reports the jobs as
        they are now. The jobs are awaited one after another: all must end, so the wait
        lasts as long as the slowest, and holds one coroutine and no thread. `timed_out`:
        the bound ran out while a job the wait watched had not ended.
        """
        waiter = self._for_loop()
        loop = asyncio.get_running_loop()
        start = loop.time()
        limit = self._settings.fresh_wait_s if timeout_s is None else timeout_s
        limit = min(limit, self._settings.max_wait_s)
        awaited = list(dict.fromkeys(after_jobs))
        if consistency == "fresh":
            seen = set(awaited)
            awaited += [j for j in await waiter.pending_of(tenant_id, user_id) if j not in seen]
        states = await waiter.states(awaited, tenant_id)
        open_ = [j for j in awaited if states[j] is not None and not ended(states[j])]
        timed_out = False  # the bound ran out before the wait saw every open job end
        if open_ and limit > 0 and self._active[key_id] < self._settings.max_waits_per_key:
            self._active[key_id] += 1
            try:
                for job_id in open_:
                    left = start + limit - loop.time()
                    if left <= 0:
                        timed_out = True
                        break
                    try:
                        view = await waiter.wait(job_id, tenant_id, left)
                    except NotFound:  # gone meanwhile: re-read below, reported pending
                        continue
                    if not ended(view.status.value):
                        timed_out = True
                        break
            finally:
                self._active[key_id] -= 1
                if self._active[key_id] <= 0:
                    del self._active[key_id]
            states.update(await waiter.states(open_, tenant_id))
        pending = [j for j in awaited if not ended(states[j])]
        return Freshness(applied=not pending, pending_jobs=pending,
                         waited_ms=round((loop.time() - start) * 1000.0, 3),
                         timed_out=timed_out)

    def active(self, key_id: str) -> int:
        return self._active[key_id]

    async def close(self) -> None:
        if self._waiter is not None and self._loop is asyncio.get_running_loop():
            await self._waiter.close()
        self._waiter = None


async def _waits(request: Request) -> Waits:
    waits: Waits = request.app.state.waits
    return waits


WaitsDep = Annotated[Waits, Depends(_waits)]


async def read_your_writes(
    waits: Waits, key_id: str, tenant_id: str, user_id: str, req: ReadYourWrites,
) -> Freshness | None:
    """The wait a read asked for before it runs; None when it asked for none."""
    if not req.wants_fresh():
        return None
    return await waits.await_writes(key_id, tenant_id, user_id, req.after_jobs,
                                    req.consistency, req.fresh_timeout_s)
