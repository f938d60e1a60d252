"""The chat-completions request as the proxy reads it, and the one change it makes to it.

Only `messages` is read and rewritten; every other field (model, tools, response_format,
user, stream_options, fields a provider added) is forwarded exactly as the client sent it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memoryd.records.models import Role
from memoryd.records.schemas import Message

# The roles that may open a conversation with instructions; the memory block goes after
# the leading run of them, so the client's own instructions stay first.
INSTRUCTION_ROLES = frozenset({Role.SYSTEM.value, Role.DEVELOPER.value})
# /v1/context takes at most this many recent messages.
RECENT_MESSAGES = 20


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = Field(min_length=1)
    # A string, a list of content parts ({"type": "text", "text": ...}, images...) or null
    # (an assistant turn with tool calls).
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """What the proxy needs to know of a request; extra fields are kept as sent."""

    model_config = ConfigDict(extra="allow")

    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    user: str | None = None


def text_of(message: ChatMessage) -> str:
    """The message's text: its string content, or its text parts joined by line breaks."""
    if isinstance(message.content, str):
        return message.content
    if not message.content:
        return ""
    parts = [p.get("text") for p in message.content if p.get("type") == "text"]
    return "\n".join(p for p in parts if isinstance(p, str))


def latest_user_text(messages: list[ChatMessage]) -> str:
    """The text of the last user message: the turn memory is looked up for and stored."""
    for message in reversed(messages):
        if message.role == "user":
            return text_of(message).strip()
    return ""


def _cut_utf8(text: str, max_bytes: int) -> str:
    return text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")


def recent_messages(messages: list[ChatMessage], max_bytes: int) -> list[Message]:
    """The conversation as /v1/context reads it: the last user and assistant turns with
    text, each cut to `max_bytes` (the limit on a context request's message)."""
    kept: list[Message] = []
    for message in messages[::-1]:
        if len(kept) == RECENT_MESSAGES:
            break
        text = _cut_utf8(text_of(message), max_bytes).strip()
        if message.role not in (Role.USER.value, Role.ASSISTANT.value) or not text:
            continue
        try:
            kept.append(Message(role=Role(message.role), content=text))
        except ValidationError:
            continue  # nothing left once normalised: it says nothing to search by
    return kept[::-1]


def with_memory(messages: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """`messages` with `block` as a system message after the leading system and developer
    messages (first when there are none); `block` empty: `messages` unchanged."""
    if not block:
        return messages
    at = 0
    while at < len(messages) and messages[at].get("role") in INSTRUCTION_ROLES:
        at += 1
    return [*messages[:at], {"role": "system", "content": block}, *messages[at:]]


def answer_of(completion: dict[str, Any]) -> str:
    """The assistant's text in a (non-streamed) chat completion: its first choice."""
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""
