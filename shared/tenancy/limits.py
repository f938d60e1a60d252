"""Bounds that are settings, checked before anything is enqueued; errors name the field."""

from __future__ import annotations

from memoryd.platform.errors import InvalidInput, PayloadTooLarge
from memoryd.platform.settings import Settings
from memoryd.records.schemas import (
    ContextRequest,
    InteractionRequest,
    Message,
    SaveRequest,
    SearchRequest,
    UpdateRequest,
)


def _content(value: str, field: str, settings: Settings) -> None:
    if len(value) > settings.max_content_chars:
        raise PayloadTooLarge(
            f"{field} is {len(value)} characters; the limit is {settings.max_content_chars}",
            field=field,
        )


def _tags(tags: list[str] | None, settings: Settings) -> None:
    if tags is not None and len(tags) > settings.max_tags:
        raise InvalidInput(
            f"tags has {len(tags)} items; the limit is {settings.max_tags}", field="tags"
        )


def _message_sizes(messages: list[Message], name: str, settings: Settings) -> None:
    for i, message in enumerate(messages):
        size = len(message.content.encode("utf-8"))
        if size > settings.max_message_bytes:
            raise PayloadTooLarge(
                f"{name}[{i}].content is {size} bytes; the limit is "
                f"{settings.max_message_bytes}",
                field=f"{name}[{i}].content",
            )


def check_interaction(req: InteractionRequest, settings: Settings) -> None:
    if len(req.messages) > settings.max_messages:
        raise PayloadTooLarge(
            f"messages has {len(req.messages)} items; the limit is {settings.max_messages}",
            field="messages",
        )
    _message_sizes(req.messages, "messages", settings)


def check_save(req: SaveRequest, settings: Settings) -> None:
    _content(req.content, "content", settings)
    _tags(req.tags, settings)


def check_search(req: SearchRequest | ContextRequest, settings: Settings) -> None:
    _content(req.query, "query", settings)
    _tags(req.tags, settings)
    if req.top_k > settings.max_top_k:
        raise InvalidInput(f"top_k is above the limit {settings.max_top_k}", field="top_k")


def check_context(req: ContextRequest, settings: Settings) -> None:
    check_search(req, settings)
    _message_sizes(req.recent_messages or [], "recent_messages", settings)


def check_update(req: UpdateRequest, settings: Settings) -> None:
    if req.content is not None:
        _content(req.content, "content", settings)
    _tags(req.tags, settings)


def check_page(limit: int, settings: Settings) -> None:
    if limit > settings.max_page_size:
        raise InvalidInput(
            f"limit is {limit}; the page size limit is {settings.max_page_size}", field="limit"
        )
