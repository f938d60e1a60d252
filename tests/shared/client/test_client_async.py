"""The asyncio client against the real gateway: the same calls, awaited."""

from __future__ import annotations

import asyncio

import pytest
from conftest import KEY_A

from memoryd.client import AsyncMemorydClient, BadRequest, NotFound
from memoryd.records.schemas import SaveResult


def test_async_round_trip(base_url: str, user: str) -> None:
    async def scenario() -> None:
        async with AsyncMemorydClient(base_url, KEY_A) as client:
            saved = await client.save(user, "我住在杭州, near West Lake", tags=["home"], wait=20)
            assert isinstance(saved, SaveResult) and saved.memory is not None
            job = await client.add_interaction(
                user, [{"role": "user", "content": "I work as a nurse in Hangzhou"}],
                extract="raw")
            assert (await client.wait(job.job_id)).status.value == "succeeded"
            hits = (await client.search(user, "where do I live?", top_k=2)).results
            assert saved.memory.id in [h.memory.id for h in hits]
            ctx = await client.context(user, "我住在哪里?", token_budget=200, min_score=0)
            assert "杭州" in ctx.block
            page = await client.list(user, tag="home")
            assert [m.id for m in page.items] == [saved.memory.id]
            assert (await client.get(user, saved.memory.id)).tags == ["home"]
            edited = await client.update(user, saved.memory.id, enabled=False, wait=20)
            assert isinstance(edited, dict) and edited["memory"]["enabled"] is False
            exported = [r async for r in client.export(user)]
            assert {r["id"] for r in exported} == {h.memory.id for h in hits} | {
                saved.memory.id}
            gone = await client.forget(user, all=True, wait=20)
            assert isinstance(gone, dict) and gone["deleted"] == 2
            with pytest.raises(NotFound):
                await client.get(user, saved.memory.id)
            with pytest.raises(BadRequest) as bad:
                await client.forget(user)
            assert bad.value.field == "thread_id"

    asyncio.run(scenario())
