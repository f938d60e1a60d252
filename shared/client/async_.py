"""`AsyncMemorydClient`: the asyncio client; the same calls as `MemorydClient`, awaited."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from memoryd.client import calls
from memoryd.client import webhook_calls as webhooks
from memoryd.client.calls import Call, RetryPolicy
from memoryd.client.errors import ConnectionFailed, JobTimeout
from memoryd.records.schemas import (
    Consistency,
    ContextResponse,
    JobAccepted,
    JobView,
    MemoryHistory,
    MemoryPage,
    MemoryView,
    Message,
    SaveResult,
    SearchResponse,
    UserPage,
)
from memoryd.records.webhooks import DeliveryList, EventKind, WebhookCreated, WebhookList

T = TypeVar("T")


class AsyncMemorydClient:
    def __init__(
        self, base_url: str, api_key: str | None = None, *, timeout: float = 30.0,
        retry: RetryPolicy | None = None, transport: httpx.AsyncBaseTransport | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """`headers`: sent with every request besides the key."""
        headers = {**(headers or {}), **({"authorization": f"Bearer {api_key}"} if api_key else {})}
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers,
                                       timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncMemorydClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[Any], stream: bool = False) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self._http.send(call.request(self._http), stream=stream)
            except httpx.TransportError as exc:
                raise ConnectionFailed(
                    f"memoryd is not reachable at {self.base_url}: {exc}", code="unreachable"
                ) from exc
            if (not call.retry or response.status_code not in calls.RETRY_STATUSES
                    or attempt + 1 >= self.retry.attempts):
                if not stream:
                    await response.aread()
                return response
            await response.aclose()
            await asyncio.sleep(self.retry.delay(attempt, response))
            attempt += 1

    async def _run(self, call: Call[T]) -> T:
        return call.parse(await self._send(call))

    # ---- writes -------------------------------------------------------------------

    async def add_interaction(self, user_id: str, messages: Sequence[Message | dict[str, Any]],
                              **fields: Any) -> JobAccepted:
        return await self._run(calls.add_interaction(user_id, messages, **fields))

    async def save(self, user_id: str, content: str, *, wait: float | None = None,
                   **fields: Any) -> SaveResult | JobAccepted:
        return await self._run(calls.save(user_id, content, wait, **fields))

    async def update(self, user_id: str, memory_id: str, *, wait: float | None = None,
                     **changes: Any) -> JobAccepted | dict[str, Any]:
        return await self._run(calls.update(user_id, memory_id, wait, **changes))

    async def forget(self, user_id: str, memory_id: str | None = None, *,
                     thread_id: str | None = None, before: datetime | None = None,
                     after: datetime | None = None, all: bool = False,
                     wait: float | None = None) -> JobAccepted | dict[str, Any]:
        return await self._run(calls.forget(user_id, memory_id, thread_id=thread_id,
                                            before=before, after=after, all=all, wait=wait))

    async def import_records(self, user_id: str, records: bytes | Iterable[dict[str, Any]],
                             idempotency_key: str | None = None) -> JobAccepted:
        return await self._run(calls.import_records(user_id, records, idempotency_key))

    async def reindex(self, **body: Any) -> Any:
        return await self._run(calls.reindex(**body))

    # ---- reads --------------------------------------------------------------------

    async def search(
        self, user_id: str, query: str, *, after_jobs: Sequence[str] | None = None,
        consistency: Consistency | None = None, **options: Any,
    ) -> SearchResponse:
        """Ranked memories (`top_k`, `mode`, filters, … as keywords). `after_jobs` (job
        ids of earlier writes) and `consistency="fresh"` (all of this user's unfinished
        writes) wait for those writes first; `freshness` in the answer says if they ended."""
        return await self._run(calls.search(user_id, query, after_jobs=after_jobs,
                                            consistency=consistency, **options))

    async def context(
        self, user_id: str, query: str, *, after_jobs: Sequence[str] | None = None,
        consistency: Consistency | None = None, **options: Any,
    ) -> ContextResponse:
        """The prompt block for this turn; `after_jobs` / `consistency` as in `search`."""
        return await self._run(calls.context(user_id, query, after_jobs=after_jobs,
                                             consistency=consistency, **options))

    async def list(self, user_id: str, **filters: Any) -> MemoryPage:
        """One page (`type`, `tag`, `scope`, `project`, `sort`, `limit`, `cursor`, `kind`,
        `episode`)."""
        return await self._run(calls.list_memories(user_id, **filters))

    async def facts_of(self, user_id: str, episode_id: str, **filters: Any) -> MemoryPage:
        """The facts drawn from an episode (one page; `GET /v1/memories?episode=`)."""
        return await self._run(calls.list_memories(user_id, episode=episode_id, **filters))

    async def get(self, user_id: str, memory_id: str) -> MemoryView:
        return await self._run(calls.get(user_id, memory_id))

    async def users(self, *, limit: int | None = None, cursor: str | None = None,
                    prefix: str | None = None) -> UserPage:
        """The tenant's users with at least one memory, by id (`next_cursor`: the last id)."""
        return await self._run(calls.users(limit, cursor, prefix))

    async def history(self, user_id: str, memory_id: str) -> MemoryHistory:
        return await self._run(calls.history(user_id, memory_id))

    async def export(self, user_id: str) -> AsyncIterator[dict[str, Any]]:
        response = await self._send(calls.export(user_id), stream=True)
        try:
            if response.status_code >= 400:
                await response.aread()
                calls.check(response)
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            await response.aclose()

    # ---- jobs and operations --------------------------------------------------------

    async def job(self, job_id: str, operator: bool = False,
            user_id: str | None = None) -> JobView:
        return await self._run(calls.job(job_id, operator, user_id))

    async def wait(self, job_id: str, timeout: float = 30.0, poll_s: float = 0.05,
                   operator: bool = False, user_id: str | None = None) -> JobView:
        deadline = time.monotonic() + timeout
        while True:
            view = await self.job(job_id, operator, user_id)
            if calls.job_done(view):
                return view
            if time.monotonic() >= deadline:
                raise JobTimeout(f"job {job_id} is still {view.status.value} after {timeout} s",
                                 view)
            await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
            poll_s = min(poll_s * 1.5, 1.0)

    async def ready(self) -> Any:
        return await self._run(calls.ready())

    async def metrics(self, token: str | None = None) -> str:
        return await self._run(calls.metrics(token))

    # ---- webhooks (the `admin` scope) ---------------------------------------------

    async def create_webhook(self, url: str, events: Sequence[EventKind | str], *,
                             include_content: bool = False,
                             description: str | None = None) -> WebhookCreated:
        """Register an endpoint; the answer's `secret` is shown this once."""
        return await self._run(webhooks.create(url, events, include_content, description))

    async def list_webhooks(self) -> WebhookList:
        return await self._run(webhooks.list_all())

    async def delete_webhook(self, webhook_id: str) -> None:
        await self._run(webhooks.remove(webhook_id))

    async def rotate_webhook_secret(self, webhook_id: str) -> WebhookCreated:
        return await self._run(webhooks.rotate_secret(webhook_id))

    async def webhook_deliveries(self, webhook_id: str, limit: int = 50) -> DeliveryList:
        return await self._run(webhooks.deliveries(webhook_id, limit))
