"""Delivery signatures, Stripe-style: `Memoryd-Signature: t=<unix ts>,v1=<hex>` where the hex
is HMAC-SHA256(secret, f"{t}.{body}"). The timestamp is signed with the body, so a receiver
that refuses an old `t` refuses a replayed delivery (docs/integrations.md, Webhooks)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SIGNATURE_HEADER = "Memoryd-Signature"
EVENT_ID_HEADER = "Memoryd-Event-Id"
EVENT_HEADER = "Memoryd-Event"
DELIVERY_HEADER = "Memoryd-Delivery-Id"
REPLAY_WINDOW_S = 300  # what the documented verification accepts either side of now


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return mac.hexdigest()


def signature_header(secret: str, body: bytes, timestamp: int | None = None) -> str:
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={signature(secret, t, body)}"


def verify(secret: str, header: str, body: bytes, *, now: float | None = None,
           window_s: int = REPLAY_WINDOW_S) -> bool:
    """The receiver's check: a `v1` that matches, and a timestamp within `window_s` of now."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        parts.setdefault(name, []).append(value)
    try:
        t = int(parts["t"][0])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - t) > window_s:
        return False
    expected = signature(secret, t, body)
    return any(hmac.compare_digest(expected, v) for v in parts.get("v1", []))
