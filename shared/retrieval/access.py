"""Access reinforcement, batched twice: the gateway counts hits in memory, pushes them to
Redis once per window, and one flush task per window writes them to the store.

Counting on the request path costs a dict update; the push and the flush run once per
window (`search_access_flush_s`), because store writes beside searches slow the searches'
query embedding (docs/decisions/). A gateway that dies loses at most one window of counts,
which only nudge ranking.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol
from urllib.parse import unquote

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.platform.logs import get_logger
from memoryd.platform.redis_keys import key_part, redis_key
from memoryd.records.models import Owner, utcnow
from memoryd.store import Store

log = get_logger("memoryd.access")

_DIRTY = redis_key("access", "dirty")
_GATE = redis_key("access", "flush-gate")
# Earlier versions filed a user in `_DIRTY` as tenant, this, user; still read.
_OLD_SEP = "\x1f"
_DRAIN = """
local counts = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
return counts
"""


def _counts_key(owner: Owner) -> str:
    return redis_key("access", owner.tenant_id, owner.user_id)


def _member(owner: Owner) -> str:
    """The user's entry in `_DIRTY`: the encoded parts, so it splits back exactly."""
    return f"{key_part(owner.tenant_id)}:{key_part(owner.user_id)}"


def _owner_of(member: str) -> tuple[Owner, str]:
    """The user of a `_DIRTY` entry, and the key their counts are under."""
    if _OLD_SEP in member:
        tenant, _, user = member.partition(_OLD_SEP)
        return Owner(tenant_id=tenant, user_id=user), f"memoryd:access:{member}"
    tenant, _, user = member.partition(":")
    owner = Owner(tenant_id=unquote(tenant), user_id=unquote(user))
    return owner, _counts_key(owner)


def record(
    client: redis.Redis, counts: Mapping[Owner, Mapping[str, int]], window_s: float
) -> bool:
    """Add the counts in one round trip; True when the caller should enqueue a flush."""
    pipe = client.pipeline(transaction=False)
    for owner, per_id in counts.items():
        for mid, n in per_id.items():
            pipe.hincrby(_counts_key(owner), mid, n)
        pipe.sadd(_DIRTY, _member(owner))
    pipe.set(_GATE, "1", nx=True, px=max(int(window_s * 1000), 1))
    return bool(pipe.execute()[-1])


class PayloadWrites(Protocol):
    def set_payload(self, owner: Owner, ids: Sequence[str], payload: dict[str, Any]) -> None: ...


class WriteView(Protocol):
    """What a write region yields (`memoryd.index.generations.View`): the generation's store
    to read and its fenced writes."""

    @property
    def store(self) -> Store: ...
    @property
    def writes(self) -> PayloadWrites: ...


def flush(
    client: redis.Redis, writing: Callable[[], AbstractContextManager[WriteView]]
) -> dict[str, int]:
    """Apply every pending count to the store; returns what it touched.

    `writing` opens the index's write region: one for the whole flush, and one payload write
    per distinct new count, since the flush runs beside searches.
    """
    drain = client.register_script(_DRAIN)
    users = touched = 0
    now = utcnow().isoformat()
    with writing() as view:
        while (member := client.spop(_DIRTY)) is not None:
            raw = member.decode() if isinstance(member, bytes) else str(member)
            owner, counts_key = _owner_of(raw)
            flat = drain(keys=[counts_key])
            counts = {
                (k.decode() if isinstance(k, bytes) else k): int(v)
                for k, v in zip(flat[::2], flat[1::2], strict=True)
            }
            users += 1
            by_total: dict[int, list[str]] = {}
            for point in view.store.get(owner, list(counts)):
                total = int(point.payload.get("access_count") or 0) + counts[point.id]
                by_total.setdefault(total, []).append(point.id)
            for total, ids in by_total.items():
                view.writes.set_payload(owner, ids, {"access_count": total,
                                                     "last_accessed_at": now})
                touched += len(ids)
    return {"users": users, "touched": touched}


def pending(client: redis.Redis) -> bool:
    return bool(client.scard(_DIRTY))


def schedule_flush(celery: Celery, delay_s: float) -> None:
    """One flush after the window, so it carries every access counted during it."""
    try:
        celery.send_task(
            TaskName.FLUSH_ACCESS.value, queue=QUEUE_OF[TaskName.FLUSH_ACCESS].value,
            countdown=delay_s, retry=False,
        )
    except (OperationalError, RedisError, OSError) as exc:
        # A missed flush delays statistics until the next search schedules one.
        log.warning("access_flush_not_scheduled", error=str(exc))


class AccessCounter:
    """The gateway's in-memory hit counts, pushed to Redis by a timer thread once per window."""

    def __init__(self, client: redis.Redis, celery: Celery, window_s: float) -> None:
        self._redis = client
        self._celery = celery
        self._window = window_s
        self._lock = threading.Lock()
        self._pending: dict[Owner, Counter[str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def note(self, owner: Owner, memory_ids: Sequence[str]) -> None:
        """One access per id; called on the request path, so it only touches memory."""
        if not memory_ids:
            return
        with self._lock:
            self._pending.setdefault(owner, Counter()).update(memory_ids)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="access-counter",
                                                daemon=True)
                self._thread.start()

    def pending(self) -> int:
        with self._lock:
            return sum(len(c) for c in self._pending.values())

    def push(self) -> None:
        """Hand what was counted to Redis and make sure a flush task will write it."""
        with self._lock:
            counts, self._pending = self._pending, {}
        if not counts:
            return
        try:
            if record(self._redis, counts, self._window):
                schedule_flush(self._celery, self._window)
        except RedisError as exc:
            log.warning("access_not_recorded", error=str(exc), users=len(counts))
            with self._lock:  # kept for the next window rather than dropped
                for owner, per_id in counts.items():
                    self._pending.setdefault(owner, Counter()).update(per_id)

    def close(self) -> None:
        """Stop the timer and push what is left (gateway shutdown)."""
        with self._lock:
            self._stop.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(5)
        self.push()

    def _run(self) -> None:
        while not self._stop.wait(self._window):
            self.push()


def flush_and_reschedule(
    client: redis.Redis,
    writing: Callable[[], AbstractContextManager[WriteView]],
    celery: Celery,
    window_s: float,
) -> dict[str, int]:
    done = flush(client, writing)
    if pending(client):
        schedule_flush(celery, window_s)
    return done
