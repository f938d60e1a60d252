"""Deliveries: one Redis hash each (the signed body, status, attempts, last answer), and per
endpoint a sorted set of its deliveries by creation, trimmed to the newest
`webhook_deliveries_kept`; both expire after `webhook_delivery_ttl_s`.

A delivery's id is derived from its endpoint and event, and claiming it is an `HSETNX`, so an
event emitted twice (a redelivered or retried job) is delivered once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import redis

from shared.platform.redis_keys import key_prefix, redis_key
from shared.records.models import utcnow
from shared.records.webhooks import DeliveryStatus, DeliveryView

_PREFIX = key_prefix("webhook", "delivery")

_CLAIM = """
if redis.call('HSETNX', KEYS[1], 'tenant', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'endpoint_id', ARGV[2], 'event_id', ARGV[3], 'event', ARGV[4],
           'body', ARGV[5], 'status', 'pending', 'attempts', 0, 'created_at', ARGV[6],
           'updated_at', ARGV[6])
redis.call('EXPIRE', KEYS[1], ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[8], ARGV[9])
redis.call('EXPIRE', KEYS[2], ARGV[7])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[10])
if over > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do
    redis.call('DEL', ARGV[11] .. id)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
end
return 1
"""
# An attempt's outcome, only on a delivery still kept (a trimmed one stays gone).
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""


def _key(delivery_id: str) -> str:
    return redis_key("webhook", "delivery", delivery_id)


def _index(tenant_id: str, endpoint_id: str) -> str:
    return redis_key("webhook", "deliveries", tenant_id, endpoint_id)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Delivery(DeliveryView):
    """The stored delivery: its tenant and the exact body every attempt sends."""

    tenant: str
    body: str


class DeliveryLog:
    def __init__(self, client: redis.Redis, kept: int, ttl_s: int) -> None:
        self._r = client
        self._kept = kept
        self._ttl = ttl_s
        self._claim = client.register_script(_CLAIM)
        self._update = client.register_script(_UPDATE)

    def claim(self, tenant_id: str, endpoint_id: str, delivery_id: str, event_id: str,
              event: str, body: str) -> bool:
        """Record a new delivery; False when this endpoint already has this event."""
        now = utcnow()
        args: list[str | int | float] = [
            tenant_id, endpoint_id, event_id, event, body, now.isoformat(), self._ttl,
            now.timestamp(), delivery_id, self._kept, _PREFIX]
        return bool(self._claim(keys=[_key(delivery_id), _index(tenant_id, endpoint_id)],
                                args=args))

    def get(self, delivery_id: str) -> Delivery | None:
        raw = {_text(k): _text(v) for k, v in self._r.hgetall(_key(delivery_id)).items()}
        return _delivery(delivery_id, raw) if raw.get("status") else None

    def begin_attempt(self, delivery_id: str) -> int:
        """Count an attempt; its number."""
        pipe = self._r.pipeline(transaction=False)
        pipe.hincrby(_key(delivery_id), "attempts", 1)
        pipe.expire(_key(delivery_id), self._ttl)
        return int(pipe.execute()[0])

    def record(self, delivery_id: str, status: DeliveryStatus, *, status_code: int | None,
               error: str | None, next_retry_at: datetime | None = None) -> None:
        now = utcnow().isoformat()
        fields: dict[str, str] = {
            "status": status.value, "updated_at": now,
            "last_status_code": "" if status_code is None else str(status_code),
            "last_error": error or "",
            "next_retry_at": next_retry_at.isoformat() if next_retry_at else "",
        }
        if status is DeliveryStatus.DELIVERED:
            fields["delivered_at"] = now
        args = [part for pair in fields.items() for part in pair]
        self._update(keys=[_key(delivery_id)], args=args)

    def recent(self, tenant_id: str, endpoint_id: str, limit: int) -> list[DeliveryView]:
        ids = [_text(i) for i in self._r.zrevrange(_index(tenant_id, endpoint_id), 0, limit - 1)]
        pipe = self._r.pipeline(transaction=False)
        for delivery_id in ids:
            pipe.hgetall(_key(delivery_id))
        views: list[DeliveryView] = []
        for delivery_id, raw in zip(ids, pipe.execute(), strict=True):
            fields = {_text(k): _text(v) for k, v in raw.items()}
            if fields.get("status"):
                views.append(DeliveryView.model_validate(
                    _delivery(delivery_id, fields).model_dump(exclude={"tenant", "body"})))
        return views

    def forget_endpoint(self, tenant_id: str, endpoint_id: str) -> None:
        """A removed endpoint's deliveries go with it."""
        index = _index(tenant_id, endpoint_id)
        ids = [_text(i) for i in self._r.zrange(index, 0, -1)]
        self._r.delete(index, *(_key(i) for i in ids))


def _delivery(delivery_id: str, raw: dict[str, str]) -> Delivery:
    fields: dict[str, Any] = {
        "id": delivery_id, "tenant": raw.get("tenant", ""),
        "endpoint_id": raw.get("endpoint_id", ""), "event_id": raw.get("event_id", ""),
        "event": raw.get("event"), "body": raw.get("body", ""), "status": raw.get("status"),
        "attempts": int(raw.get("attempts") or 0),
        "last_status_code": int(raw["last_status_code"]) if raw.get("last_status_code")
        else None,
        "last_error": raw.get("last_error") or None,
        "next_retry_at": raw.get("next_retry_at") or None,
        "created_at": raw.get("created_at"), "updated_at": raw.get("updated_at"),
        "delivered_at": raw.get("delivered_at") or None,
    }
    return Delivery.model_validate(fields)
