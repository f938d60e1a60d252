"""The model's operations, validated in code before anything is written.

Every operation either becomes a `Planned` step or is dropped with the reason, so the job
result says what happened to each one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memoryd.extraction.redaction import found_secrets
from memoryd.records.models import MemoryRecord, MemoryType
from memoryd.retrieval.keywords import tokenize

MIN_CONTENT = 4
MAX_CONTENT = 400


class Action(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    IGNORE = "IGNORE"


class Operation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    action: Action
    type: MemoryType | None = None
    category: Literal["preference", "fact", "event", "task", "skill"] | None = None
    content: str = ""
    target: str | None = None
    confidence: float = Field(ge=0, le=1)
    importance: int | None = Field(None, ge=1, le=10)

    @field_validator("action", "type", "category", mode="before")
    @classmethod
    def _case(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str):
            return value.upper() if info.field_name == "action" else value.lower()
        return value


class ReplyShape(BaseModel):
    operations: list[Any]


@dataclass
class Planned:
    index: int
    op: Operation
    content: str
    target: MemoryRecord | None = None


@dataclass
class Dropped:
    index: int
    reason: str
    action: str | None = None
    content: str | None = None
    target: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "operation"
    return f"{where}: {err['msg']}"


@dataclass(frozen=True)
class Said:
    """Who said which words: a memory must rest on the user's, not the assistant's."""

    user: frozenset[str]
    assistant: frozenset[str]

    @classmethod
    def of(cls, user_texts: list[str], assistant_texts: list[str]) -> Said:
        return cls(frozenset(tokenize(" ".join(user_texts))),
                   frozenset(tokenize(" ".join(assistant_texts))))

    def assistant_only(self, content: str) -> bool:
        """Most of the content's words come from the assistant and fewer from the user."""
        words = set(tokenize(content)) - {"user", "用户"}
        if not words or not self.assistant:
            return False
        from_user = len(words & self.user) / len(words)
        from_assistant = len(words & self.assistant) / len(words)
        return from_user < 0.5 and from_assistant > from_user


def validate_operations(
    raw_ops: list[Any],
    aliases: dict[str, MemoryRecord],
    forget_intent: bool,
    min_confidence: float,
    said: Said | None = None,
) -> tuple[list[Planned], list[Dropped]]:
    planned: list[Planned] = []
    dropped: list[Dropped] = []
    for index, raw in enumerate(raw_ops):
        try:
            op = Operation.model_validate(raw)
        except ValidationError as exc:
            action = raw.get("action") if isinstance(raw, dict) else None
            dropped.append(Dropped(index, f"invalid operation: {_first_error(exc)}",
                                   action=str(action) if action is not None else None))
            continue
        step, reason = _check(index, op, aliases, forget_intent, min_confidence, said)
        if step is not None:
            planned.append(step)
        else:
            dropped.append(Dropped(index, reason, op.action.value, op.content or None, op.target))
    return planned, dropped


def _check(
    index: int, op: Operation, aliases: dict[str, MemoryRecord], forget_intent: bool,
    min_confidence: float, said: Said | None,
) -> tuple[Planned | None, str]:
    if op.action is Action.IGNORE:
        return None, "IGNORE"
    if op.confidence < min_confidence:
        return None, f"confidence {op.confidence:g} below {min_confidence:g}"
    target: MemoryRecord | None = None
    if op.action in (Action.UPDATE, Action.DELETE):
        if not op.target:
            return None, f"{op.action.value} without a target"
        target = aliases.get(op.target.strip())
        if target is None:
            return None, f"target {op.target!r} is not one of this user's memories"
    if op.action is Action.DELETE:
        if not forget_intent:
            return None, "DELETE refused: the latest user message does not ask to forget"
        return Planned(index, op, "", target), ""
    content = " ".join(op.content.split())
    if not MIN_CONTENT <= len(content) <= MAX_CONTENT:
        return None, f"content length {len(content)} outside {MIN_CONTENT}–{MAX_CONTENT}"
    secrets = found_secrets(content)
    if secrets:
        return None, f"content holds a secret ({', '.join(secrets)})"
    if said is not None and said.assistant_only(content):
        return None, "content rests on the assistant's words, not the user's"
    return Planned(index, op, content, target), ""
