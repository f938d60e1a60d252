"""Tolerant reply parsing, forget intent, and operation validation (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memoryd.extraction.forget_intent import has_forget_intent
from memoryd.extraction.operations import Said, validate_operations
from memoryd.extraction.reply_parsing import parse_json_object
from memoryd.records.models import MemoryRecord


@pytest.mark.parametrize("text", [
    '{"operations": []}',
    '```json\n{"operations": []}\n```',
    'Sure, here it is:\n```\n{"operations": []}\n```\nDone.',
    'The answer is {"operations": []} as requested',
    '思考……\n{"operations": []}',
])
def test_json_is_found_in_fences_and_prose(text: str) -> None:
    assert parse_json_object(text) == {"operations": []}


@pytest.mark.parametrize("text", ["", "no json", "[1, 2]", '{"operations": [', "{ bad }"])
def test_no_object_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json_object(text)


@pytest.mark.parametrize("text", [
    "Please forget that I live in Berlin", "forget about my old job", "Delete that memory",
    "don't remember my address", "stop remembering my birthday", "can you remove my phone?",
    "请忘掉我住在哪里", "忘记我以前的工作吧", "把我的地址删了", "别记我的生日", "不要再记住这个",
    "删除关于我前任的记忆", "Forget it, 把这个忘掉",
])
def test_explicit_forget_requests(text: str) -> None:
    assert has_forget_intent(text)


@pytest.mark.parametrize("text", [
    "I forgot my keys at home", "我忘了带钥匙", "I live in Berlin now", "我住在北京",
    "Don't forget to buy milk", "记得提醒我开会", "I deleted the old branch yesterday?",
])
def test_other_messages_are_not_forget_requests(text: str) -> None:
    assert not has_forget_intent(text)


def record(content: str) -> MemoryRecord:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    return MemoryRecord(id="0f0e446d-33fa-5d88-a76a-5f480e73da35", tenant_id="t", user_id="u",
                        content=content, content_hash="h", occurred_at=now, created_at=now,
                        updated_at=now, embedding_model="e5-small")


def test_each_dropped_operation_names_its_reason() -> None:
    aliases = {"m1": record("I live in Berlin")}
    raw = [
        {"action": "update", "content": "I live in Munich", "target": "m1", "confidence": 0.9},
        {"action": "UPDATE", "content": "I live in Rome", "confidence": 0.9},
        {"action": "DELETE", "target": "m1", "confidence": 0.99},
        {"action": "ADD", "content": "x" * 401, "confidence": 0.9},
        {"action": "ADD", "content": "mail a@b.io", "confidence": 0.9},
        {"action": "ADD", "confidence": 0.9, "content": "用户喜欢喝茶", "importance": 11},
        "not an object",
    ]
    planned, dropped = validate_operations(raw, aliases, False, 0.85)
    assert [(p.index, p.target.content if p.target else None) for p in planned] == [
        (0, "I live in Berlin")
    ]
    reasons = {d.index: d.reason for d in dropped}
    assert reasons[1] == "UPDATE without a target"
    assert reasons[2].startswith("DELETE refused")
    assert reasons[3] == "content length 401 outside 4–400"
    assert reasons[4] == "content holds a secret (EMAIL)"
    assert reasons[5].startswith("invalid operation: importance")
    assert reasons[6].startswith("invalid operation:")


def test_grounding_separates_user_and_assistant_words() -> None:
    said = Said.of(["我超爱吃火锅，项目升级到 Java 17 了"], ["好的，火锅很好吃。你住在上海吗？"])
    assert not said.assistant_only("用户喜欢吃火锅")
    assert not said.assistant_only("项目升级到 Java 17")
    assert said.assistant_only("用户住在上海")
