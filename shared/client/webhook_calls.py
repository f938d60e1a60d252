"""The webhook requests of both clients (`/v1/webhooks`), built and parsed as in `calls`."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from memoryd.client.calls import Call, _body, _model, check, path
from memoryd.records.webhooks import (
    DeliveryList,
    EventKind,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
)


def create(url: str, events: Sequence[EventKind | str], include_content: bool = False,
           description: str | None = None) -> Call[WebhookCreated]:
    req = WebhookCreate.model_validate({"url": url, "events": list(events),
                                        "include_content": include_content,
                                        "description": description})
    return Call("POST", "/v1/webhooks", _model(WebhookCreated), json=_body(req))


def list_all() -> Call[WebhookList]:
    return Call("GET", "/v1/webhooks", _model(WebhookList))


def remove(webhook_id: str) -> Call[None]:
    def parse(response: httpx.Response) -> None:
        check(response)
    return Call("DELETE", path("/v1/webhooks/{webhook_id}", webhook_id=webhook_id), parse)


def rotate_secret(webhook_id: str) -> Call[WebhookCreated]:
    return Call("POST", path("/v1/webhooks/{webhook_id}/rotate-secret", webhook_id=webhook_id),
                _model(WebhookCreated))


def deliveries(webhook_id: str, limit: int = 50) -> Call[DeliveryList]:
    return Call("GET", path("/v1/webhooks/{webhook_id}/deliveries", webhook_id=webhook_id),
                _model(DeliveryList),
                params={"limit": limit})
