"""Deliveries: one Redis hash each (the signed body, status, attempts, last answer), and per
endpoint a sorted set of its deliveries by creation, trimmed to the newest
`webhook_deliveries_kept`; both expire after `webhook_delivery_ttl_s`.

A delivery's id is derived from its endpoint and event, and claiming it is an `HSETNX`, so an
event emitted twice (a redelivered or retried job) is delivered once.

A forget of a user (`forget_user`) leaves no memory text in their deliveries: every body
that carried text (an endpoint with `include_content`) is rewritten with it blanked, and
such a delivery not yet delivered is cancelled (`failed`, "cancelled: ..."), so no retry
sends it after the forget. An attempt reads the body it sends and counts itself in one
transaction (`begin_attempt`), so an attempt that starts after the forget sends nothing.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import redis

from memoryd.jobs.forgetting import blank_text
from memoryd.platform.redis_keys import key_prefix, redis_key
from memoryd.records.models import utcnow
from memoryd.records.webhooks import DeliveryStatus, DeliveryView

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


# Redact one delivery's body, and cancel it when it is still to be sent, atomically with
# respect to an attempt's read (`begin_attempt`). ARGV: the blanked body, the time, the reason.
_FORGET = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'body', ARGV[1], 'updated_at', ARGV[2])
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'pending' or status == 'retrying' then
  redis.call('HSET', KEYS[1], 'status', 'failed', 'last_error', ARGV[3], 'next_retry_at', '')
  return 2
end
return 1
"""
CANCELLED = "cancelled: the user's memories were forgotten"


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

    def begin_attempt(self, delivery_id: str) -> tuple[int, str | None, str]:
        """Count an attempt: its number, and the status and body as they are now, read in
        the same transaction (a forget may have redacted and cancelled it meanwhile)."""
        pipe = self._r.pipeline(transaction=True)
        pipe.hincrby(_key(delivery_id), "attempts", 1)
        pipe.expire(_key(delivery_id), self._ttl)
        pipe.hmget(_key(delivery_id), ["status", "body"])
        number, _, (status, body) = pipe.execute()
        return (int(number), None if status is None else _text(status),
                "" if body is None else _text(body))

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

    def forget_user(self, tenant_id: str, user_id: str,
                    endpoint_ids: list[str]) -> dict[str, int]:
        """The user's memory texts out of every kept delivery of these endpoints (the
        tenant's): bodies blanked, deliveries still to be sent cancelled. Returns how many
        bodies were redacted and how many deliveries cancelled."""
        redacted = cancelled = 0
        script = self._r.register_script(_FORGET)
        for endpoint_id in endpoint_ids:
            ids = [_text(i) for i in self._r.zrange(_index(tenant_id, endpoint_id), 0, -1)]
            pipe = self._r.pipeline(transaction=False)
            for delivery_id in ids:
                pipe.hget(_key(delivery_id), "body")
            for delivery_id, body in zip(ids, pipe.execute(), strict=True):
                if not body:
                    continue
                try:
                    event = json.loads(body)
                except ValueError:
                    continue
                data = event.get("data") if isinstance(event, dict) else None
                if not isinstance(data, dict) or data.get("user_id") != user_id:
                    continue
                blanked = blank_text(event)
                if blanked == event:
                    continue  # no text in it (an endpoint without include_content)
                done = int(script(keys=[_key(delivery_id)], args=[
                    json.dumps(blanked), utcnow().isoformat(), CANCELLED]))
                redacted += done > 0
                cancelled += done == 2
        return {"redacted": redacted, "cancelled": cancelled}

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
