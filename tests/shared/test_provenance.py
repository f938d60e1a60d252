"""Provenance values: kinds of points stored before kinds existed, sources merged once per
message, turn identities, and which messages an LLM fact was drawn from."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memoryd.memories.llm_extraction import drawn_from
from memoryd.records.identity import turn_id
from memoryd.records.models import MemoryKind, MemoryRecord, MemorySource, Role, merge_sources
from memoryd.records.schemas import Message

AT = datetime(2025, 5, 1, 10, tzinfo=UTC)


def payload(**fields: Any) -> dict[str, Any]:
    base = {"tenant_id": "t", "user_id": "u", "content": "x", "content_hash": "h",
            "occurred_at": AT.isoformat(), "created_at": AT.isoformat(),
            "updated_at": AT.isoformat(), "embedding_model": "e5-small"}
    return {**base, **fields}


def test_points_stored_before_kinds_read_with_an_inferred_kind_and_one_source() -> None:
    raw = MemoryRecord.from_payload("a", payload(
        source="interaction", type="episodic", thread_id="t1", job_id="j1",
        metadata={"role": "user", "dia_id": "D1:3"}))
    assert raw.kind is MemoryKind.EPISODE
    [source] = raw.sources
    assert (source.thread_id, source.job_id, source.role, source.at) == ("t1", "j1", Role.USER,
                                                                         AT)
    assert source.metadata["dia_id"] == "D1:3"
    fact = MemoryRecord.from_payload("b", payload(source="interaction", type="semantic"))
    assert fact.kind is MemoryKind.FACT and fact.sources[0].role is None
    note = MemoryRecord.from_payload("c", payload(source="explicit", type="episodic"))
    assert note.kind is MemoryKind.NOTE
    # A point that has them keeps them as stored.
    stored = MemoryRecord.from_payload("d", payload(kind="fact", sources=[], episodes=["e"]))
    assert (stored.kind, stored.sources, stored.episodes) == (MemoryKind.FACT, [], ["e"])
    assert stored.to_payload()["kind"] == "fact"


def test_a_message_is_one_source_however_often_it_is_merged() -> None:
    one = MemorySource(job_id="j1", message_index=0, role=Role.USER, at=AT)
    again = MemorySource(job_id="j1", message_index=0, role=Role.USER, at=AT,
                         metadata={"seen": 2})
    other = MemorySource(job_id="j2", message_index=0, role=Role.USER, at=AT)
    assert merge_sources([one], [again, other]) == [one, other]


def test_a_turns_identity_is_its_thread_role_and_words() -> None:
    args = ("t", "u", "global", None)
    in_thread = turn_id(*args, "t1", "user", "h", "2025-01-01")
    assert in_thread == turn_id(*args, "t1", "user", "h", "2025-02-02")
    assert in_thread != turn_id(*args, "t1", "assistant", "h", "2025-01-01")
    assert in_thread != turn_id(*args, "t2", "user", "h", "2025-01-01")
    # Without a thread, the same words at another time are another turn.
    assert turn_id(*args, None, "user", "h", "2025-01-01") != turn_id(
        *args, None, "user", "h", "2025-02-02")


def test_an_llm_fact_is_drawn_from_the_user_messages_sharing_its_words() -> None:
    messages = [Message(role=Role.USER, content="Hi there"),
                Message(role=Role.ASSISTANT, content="Do you have a dog named Rex?"),
                Message(role=Role.USER, content="Yes, I have a dog named Rex"),
                Message(role=Role.USER, content="我对花生过敏")]
    assert drawn_from("User has a dog named Rex", messages) == [2]
    assert drawn_from("用户对花生过敏", messages) == [3]
    # No shared word: every user message.
    assert drawn_from("User is happy", messages) == [0, 2, 3]
