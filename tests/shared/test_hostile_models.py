"""Property tests on the wire models with hostile values (issue 31): lone surrogates, bidi and
invisible characters, deep nesting, date offsets that overflow, NaN. Whatever the input,
validation either refuses it with a `ValidationError`, or what it accepts is safe to carry
on: it serialises as the gateway sends it to the queue, encodes as UTF-8 (the embedder,
Redis, the store and the logs need it), its identifiers print as what they are, and its
metadata is within the bounds the store can read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from memoryd.memories.transfer import ImportRecord, parse_import
from memoryd.platform.errors import AppError
from memoryd.platform.settings import Settings
from memoryd.records.commands import IngestCommand, SaveCommand
from memoryd.records.models import ExtractMode
from memoryd.records.schemas import (
    METADATA_MAX_DEPTH,
    ContextRequest,
    InteractionRequest,
    SaveRequest,
    SearchRequest,
    UpdateRequest,
)

PROFILE = settings(max_examples=300, derandomize=True, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck))

# Every code point, lone surrogates included (hypothesis leaves them out by default), with
# the characters that hide or reorder text drawn often.
HIDDEN = "\u200b\u200c\u200d\u200e\u200f\u202a\u202e\u2060\u2066\u2069\ufeff\u00ad\x00\x7f"
hostile_char = st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.sampled_from(list(HIDDEN) + ["\ud800", "\udfff", "/", ".", "\\"]),
)
hostile_text = st.one_of(
    st.text(hostile_char, max_size=20),
    st.sampled_from(["..", ".", "a/../b", "../users", "\u202eadmin\u200b", " ", "x"]),
    st.text("ab./", min_size=1, max_size=8),
)
plain_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Cf")),
                     min_size=1, max_size=20).filter(str.strip)
text = st.one_of(plain_text, hostile_text)

offsets = st.sampled_from(["Z", "", "+00:00", "-23:59", "+23:59", "+14:00", "+01:00",
                           "-01:00"])
stamps = st.sampled_from(["0001-01-01T00:00:00", "9999-12-31T23:59:59", "2024-05-01T12:00:00",
                          "0001-01-01T23:59:59", "9999-12-31T00:00:00"])
dates = st.one_of(st.builds(lambda s, o: s + o, stamps, offsets), text)

scalars = st.one_of(st.none(), st.booleans(), st.integers(), text,
                    st.floats(allow_nan=True, allow_infinity=True))


def deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


metadata = st.one_of(
    st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                 | st.dictionaries(text, inner, max_size=4), max_leaves=30),
    st.builds(lambda d, leaf: {"m": deep(d, leaf)}, st.integers(0, 600), scalars),
    st.builds(lambda n: {f"k{i}": i for i in range(n)}, st.integers(0, 1200)),
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": text},
    optional={"metadata": metadata, "created_at": dates})

FIELDS: dict[str, Any] = {
    "user_id": text, "thread_id": text, "key": text, "project": text,
    "content": text, "query": text, "tags": st.lists(text, max_size=3),
    "categories": st.lists(text, max_size=2),
    "metadata": metadata, "messages": st.lists(message, min_size=1, max_size=4),
    "recent_messages": st.lists(message, max_size=3),
    "occurred_at": dates, "expires_at": dates, "created_at": dates, "as_of": dates,
    "occurred_before": dates, "occurred_after": dates,
}
MODELS: dict[type[BaseModel], list[str]] = {
    SaveRequest: ["user_id", "content", "key", "thread_id", "tags", "metadata", "occurred_at",
                  "expires_at", "project"],
    InteractionRequest: ["user_id", "thread_id", "messages", "metadata", "project"],
    SearchRequest: ["user_id", "query", "tags", "categories", "as_of", "occurred_before",
                    "occurred_after", "project"],
    ContextRequest: ["user_id", "query", "tags", "recent_messages", "project"],
    UpdateRequest: ["content", "tags", "expires_at"],
    ImportRecord: ["content", "key", "thread_id", "tags", "metadata", "occurred_at",
                   "created_at", "expires_at", "project"],
}


@st.composite
def bodies(draw: st.DrawFn) -> tuple[type[BaseModel], dict[str, Any]]:
    model = draw(st.sampled_from(list(MODELS)))
    names = MODELS[model]
    base = {n: "x" for n in ("user_id", "content", "query") if n in names}
    if "messages" in names:
        base["messages"] = [{"role": "user", "content": "I like tea"}]
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    if "project" in chosen:
        base["scope"] = "project"
    return model, {**base, **{n: draw(FIELDS[n]) for n in chosen}}


def depth_of(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def strings_of(value: Any) -> list[str]:
    found, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def assert_safe(model: BaseModel) -> None:
    dumped = model.model_dump(mode="json")
    # As the queue, the store and the logs take it: UTF-8, no NaN, nothing left unencodable.
    json.dumps(dumped, ensure_ascii=False, allow_nan=False).encode("utf-8")
    for name in ("user_id", "thread_id", "key", "project"):
        value = getattr(model, name, None)
        if isinstance(value, str):
            assert not set(value) & set(HIDDEN), (name, value)
            assert ".." not in value.replace("\\", "/").split("/"), (name, value)
    for tag in [*(getattr(model, "tags", None) or []), *(getattr(model, "categories", None) or [])]:
        assert not set(tag) & set(HIDDEN), tag
    metadata = getattr(model, "metadata", None)
    if metadata is not None:
        assert depth_of(metadata) <= METADATA_MAX_DEPTH
    for value in model.model_dump().values():
        if isinstance(value, datetime):
            assert value.tzinfo is not None and value.utcoffset() == UTC.utcoffset(None)


@PROFILE
@given(bodies())
def test_models_refuse_or_carry_safely(case: tuple[type[BaseModel], dict[str, Any]]) -> None:
    model, body = case
    try:
        validated = model.model_validate(body)
    except ValidationError as exc:
        assert all(e["msg"] for e in exc.errors())
        return
    assert_safe(validated)
    for s in strings_of(validated.model_dump(mode="json")):
        s.encode("utf-8")
    received = datetime(2024, 1, 1, tzinfo=UTC)
    # The command the gateway queues from it, as it is sent (JSON) and read back.
    if isinstance(validated, SaveRequest):
        command: BaseModel = SaveCommand(tenant_id="t", user_id=validated.user_id,
                                         received_at=received, request=validated)
    elif isinstance(validated, InteractionRequest):
        command = IngestCommand(tenant_id="t", user_id=validated.user_id, received_at=received,
                                request=validated, extract=ExtractMode.RAW)
        assert command.messages, "an interaction keeps a message that says something"
        assert all(m.content.strip() for m in command.messages)
    else:
        return
    sent = json.dumps(command.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
    type(command).model_validate(json.loads(sent))


SETTINGS = Settings(api_keys="k=t")


@settings(PROFILE, max_examples=60)
@given(st.one_of(st.integers(1, 12), st.integers(1, 3000)),
       st.sampled_from(["[", "{\"a\":", "[{\"a\":"]))
def test_import_documents_of_any_nesting(depth: int, opener: str) -> None:
    closer = {"[": "]", "{\"a\":": "}", "[{\"a\":": "}]"}[opener]
    body = ("[{\"content\": \"x\", \"metadata\": {\"m\": " + opener * depth + "1"
            + closer * depth + "}}]").encode()
    try:
        records = parse_import(body, "user", SETTINGS)
    except AppError as exc:
        assert 400 <= exc.status < 500 and exc.field is not None
        return
    assert depth_of(records[0].metadata) <= METADATA_MAX_DEPTH
