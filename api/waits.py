"""Waiting for jobs (`?wait=`, `GET /v1/jobs/{id}`) on the event loop, bounded per API key.

A wait used to sleep in a worker thread; the threads (anyio's default limiter, 40) are the
ones sync routes and key lookups share, so a few dozen waits starved the gateway. Here a
wait is an awaited Redis notification (`shared.jobs.job_store.AsyncJobWaiter`) and holds no
thread; each API key may have `max_waits_per_key` waits at once, and a request beyond that
gets the job's current state at once (202 while it runs).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Annotated

from fastapi import Depends, Request

from shared.jobs.job_store import AsyncJobWaiter
from shared.platform.settings import Settings
from shared.records.schemas import JobView


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

    async def get(self, job_id: str, tenant_id: str) -> JobView:
        return await self._for_loop().get(job_id, tenant_id)

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
