"""A thread's order is the order its interactions reached the gateway, whatever order the
workers wrote them in (`MemoryWriter._in_arrival_order`): against the real store, Redis and
e5, the writer given a user's two jobs in the wrong order."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memoryd.extraction.interaction import with_episodes
from memoryd.memories.writes import MemoryWriter
from memoryd.platform.settings import Settings
from memoryd.records.commands import IngestCommand
from memoryd.records.models import ExtractMode, Owner
from memoryd.records.schemas import InteractionRequest, Message
from memoryd.runtime import Runtime
from memoryd.store.conditions import Match

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


@pytest.fixture()
def runtime(tmp_path: Path, redis_server: str) -> Iterator[Runtime]:
    rt = Runtime(Settings(data_dir=tmp_path, redis_url=redis_server, start_redis=False,
                          log_level="WARNING"))
    try:
        yield rt
    finally:
        rt.close()


def command(owner: Owner, at: datetime, said: str, answer: str, thread: str = "t1",
            created: datetime | None = None) -> IngestCommand:
    """An interaction as the gateway accepts it at `at`, under the default extraction (user
    and assistant turns kept as episodes)."""
    return IngestCommand(
        tenant_id=owner.tenant_id, user_id=owner.user_id, received_at=at,
        extract=ExtractMode.RULES, episodes=True,
        request=with_episodes(InteractionRequest(
            user_id=owner.user_id, thread_id=thread, messages=[
                Message(role="user", content=said, created_at=created),
                Message(role="assistant", content=answer)])))


def thread_order(writer: MemoryWriter, owner: Owner, thread: str = "t1") -> list[str]:
    points = writer.store.find(owner, [Match("thread_id", thread)], 100,
                               order_by="thread_seq", descending=False)
    seqs = [int(p.payload["thread_seq"]) for p in points]
    assert seqs == list(range(1, len(points) + 1)), seqs  # consecutive places
    return [str(p.payload["content"]) for p in points]


def test_a_late_written_interaction_takes_its_place_in_the_thread(runtime: Runtime) -> None:
    owner = Owner(tenant_id=f"t-{uuid.uuid4().hex[:8]}", user_id="u1")
    first = command(owner, T0, "We adopted a cat two weeks ago", "What is the cat called?")
    second = command(owner, T0 + timedelta(seconds=5), "Her name is Luna", "A lovely name!")
    third = command(owner, T0 + timedelta(seconds=9), "She sleeps all day", "Cats do.")
    with runtime.index.writing() as view:
        writer = runtime.writer(view)
        # The second and third jobs reach the store before the first, as when a user's jobs
        # run on several worker threads at once.
        writer.ingest(second, "job-2")
        writer.ingest(third, "job-3")
        writer.ingest(first, "job-1")
        assert thread_order(writer, owner) == [
            "We adopted a cat two weeks ago", "What is the cat called?",
            "Her name is Luna", "A lovely name!", "She sleeps all day", "Cats do."]
        # In order, nothing moves; the same job again (a redelivery) places nothing twice.
        writer.ingest(command(owner, T0 + timedelta(seconds=20), "Luna loves tuna",
                              "Noted."), "job-4")
        writer.ingest(first, "job-1")
        assert thread_order(writer, owner)[-2:] == ["Luna loves tuna", "Noted."]
        assert len(thread_order(writer, owner)) == 8


def test_the_order_is_the_gateways_not_the_messages_own_times(runtime: Runtime) -> None:
    """A message's own `created_at` says when it was said, not where the client put it: a
    client that sends one for its user turns only still gets its turns in the order it
    posted them."""
    owner = Owner(tenant_id=f"t-{uuid.uuid4().hex[:8]}", user_id="u1")
    early = command(owner, T0, "I play the violin", "Since when?",
                    created=T0 - timedelta(days=30))
    late = command(owner, T0 + timedelta(seconds=3), "Since I was seven", "Impressive.",
                   created=T0 - timedelta(days=31))
    with runtime.index.writing() as view:
        writer = runtime.writer(view)
        writer.ingest(late, "job-b")
        writer.ingest(early, "job-a")
        assert thread_order(writer, owner) == [
            "I play the violin", "Since when?", "Since I was seven", "Impressive."]
