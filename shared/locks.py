"""A per-user lock in Redis around "find near duplicates → write"."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis
from redis.exceptions import LockError

from shared.errors import LockTimeout
from shared.models import Owner


@contextmanager
def user_lock(client: redis.Redis, owner: Owner, timeout_s: float, wait_s: float) -> Iterator[None]:
    """Held by one worker at a time per user; expires if its holder dies."""
    lock = client.lock(
        f"memoryd:lock:{owner.tenant_id}:{owner.user_id}",
        timeout=timeout_s,
        blocking_timeout=wait_s,
    )
    if not lock.acquire():
        raise LockTimeout(f"could not lock user {owner.user_id} within {wait_s}s")
    try:
        yield
    finally:
        try:
            lock.release()
        except LockError:
            # It expired while held: the work is idempotent, so a rerun is safe.
            pass
