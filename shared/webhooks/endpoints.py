"""A tenant's webhook endpoints: one Redis hash per tenant, endpoint id → its JSON record.

Emission reads the whole hash in one call, so a tenant without endpoints costs one
`HGETALL` of a missing key per finished job. The signing secret is kept as given, since
every delivery signs with it; it leaves the server only in the answer that creates (or
rotates) it.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime

import redis
from pydantic import BaseModel

from memoryd.platform.errors import InvalidInput, NotFound
from memoryd.platform.redis_keys import redis_key
from memoryd.records.models import utcnow
from memoryd.records.webhooks import EventKind, WebhookCreate, WebhookCreated, WebhookView
from memoryd.webhooks.signing import new_secret


class Endpoint(BaseModel):
    """The stored record, secret included: for the server only."""

    id: str
    url: str
    events: list[EventKind]
    include_content: bool
    description: str | None = None
    secret: str
    created_at: datetime
    secret_rotated_at: datetime | None = None

    def view(self) -> WebhookView:
        return WebhookView.model_validate(self.model_dump(exclude={"secret"}))

    def created(self) -> WebhookCreated:
        return WebhookCreated.model_validate(self.model_dump())


def endpoints_key(tenant_id: str) -> str:
    return redis_key("webhooks", tenant_id)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class EndpointStore:
    def __init__(self, client: redis.Redis, max_per_tenant: int) -> None:
        self._r = client
        self._max = max_per_tenant

    def create(self, tenant_id: str, request: WebhookCreate) -> WebhookCreated:
        """Store an endpoint whose URL the caller has checked; its secret is returned once."""
        key = endpoints_key(tenant_id)
        if self._r.hlen(key) >= self._max:
            raise InvalidInput(f"url: this tenant has {self._max} webhook endpoints, the most "
                               "allowed (MEMORYD_WEBHOOK_MAX_ENDPOINTS); remove one first",
                               field="url")
        endpoint = Endpoint(id="wh_" + secrets.token_hex(8), url=request.url,
                            events=request.events, include_content=request.include_content,
                            description=request.description, secret=new_secret(),
                            created_at=utcnow())
        self._r.hset(key, endpoint.id, endpoint.model_dump_json())
        return endpoint.created()

    def all(self, tenant_id: str) -> list[Endpoint]:
        raw = self._r.hgetall(endpoints_key(tenant_id))
        found = [Endpoint.model_validate(json.loads(_text(v))) for v in raw.values()]
        return sorted(found, key=lambda e: (e.created_at, e.id))

    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint:
        """The tenant's endpoint; another tenant's id is as unknown as a made-up one."""
        raw = self._r.hget(endpoints_key(tenant_id), endpoint_id)
        if raw is None:
            raise NotFound(f"no webhook endpoint {endpoint_id}", field="webhook_id")
        return Endpoint.model_validate(json.loads(_text(raw)))

    def remove(self, tenant_id: str, endpoint_id: str) -> None:
        if not self._r.hdel(endpoints_key(tenant_id), endpoint_id):
            raise NotFound(f"no webhook endpoint {endpoint_id}", field="webhook_id")

    def rotate(self, tenant_id: str, endpoint_id: str) -> WebhookCreated:
        """A new secret, in force for every attempt from now on (retries of earlier events
        included); the old one stops verifying at once."""
        endpoint = self.get(tenant_id, endpoint_id)
        endpoint = endpoint.model_copy(update={"secret": new_secret(),
                                               "secret_rotated_at": utcnow()})
        self._r.hset(endpoints_key(tenant_id), endpoint.id, endpoint.model_dump_json())
        return endpoint.created()
