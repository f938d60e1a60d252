"""A per-user lock in Redis around "find near duplicates → write"."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from redis.exceptions import LockError, RedisError

from memoryd.platform.errors import LockTimeout
from memoryd.platform.redis_keys import redis_key
from memoryd.platform.redis_process import pid_alive
from memoryd.records.models import Owner

# Compare-and-delete: only the exact dead holder's token is removed, never a new holder's.
_BREAK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_HOST = socket.gethostname()
_POLL_S = 0.5
# Tokens of this process whose holder finished but could not release (Redis was down): the
# key may come back with Redis (AOF) and would otherwise block the user until it expires.
_ABANDONED: set[str] = set()


def _token() -> str:
    return f"{_HOST}|{os.getpid()}|{uuid.uuid4().hex}"


def _held_by_no_one(value: bytes | str | None) -> bool:
    """The holder was a process on this host that no longer exists (SIGKILLed mid-write), or
    a holder in this process that has finished without being able to release.

    Holders on other hosts (server-mode containers) cannot be checked: their lock expires.
    """
    if value is None:
        return False
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if text in _ABANDONED:
        return True
    host, _, rest = text.partition("|")
    pid = rest.partition("|")[0]
    return host == _HOST and pid.isdigit() and not pid_alive(int(pid))


@contextmanager
def user_lock(client: redis.Redis, owner: Owner, timeout_s: float, wait_s: float) -> Iterator[None]:
    """Held by one worker at a time per user; expires if its holder dies, and is taken over
    at once when the holder was a local process that died (a killed worker or stack)."""
    name = redis_key("lock", owner.tenant_id, owner.user_id)
    lock = client.lock(name, timeout=timeout_s)
    token = _token()
    deadline = time.monotonic() + wait_s
    while True:
        left = deadline - time.monotonic()
        if lock.acquire(blocking_timeout=max(min(_POLL_S, left), 0.01), token=token):
            break
        holder = client.get(name)
        if _held_by_no_one(holder):
            client.eval(_BREAK, 1, name, holder)  # type: ignore[arg-type]
            _ABANDONED.discard(holder.decode() if isinstance(holder, bytes) else str(holder))
            continue
        if time.monotonic() >= deadline:
            raise LockTimeout(f"could not lock user {owner.user_id} within {wait_s}s")
    try:
        yield
    finally:
        try:
            lock.release()
        except LockError:
            # It expired while held: the work is idempotent, so a rerun is safe.
            pass
        except RedisError:
            _ABANDONED.add(token)  # the next taker here breaks it once Redis is back
            raise
