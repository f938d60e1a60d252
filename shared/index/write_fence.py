"""The write fence: what lets a re-embedding switch collections without losing a write.

Every store mutation runs inside a fenced region (a task opens one around its whole run,
so its embedding and its writes see one generation; a lone mutation gets its own). A
region registers itself in Redis on entry and, on exit, adds the ids it touched to the
re-embedding's dirty set when one is running. The switch closes the fence (new regions
wait), waits for the open ones to end, copies the last dirty ids and flips the pointer:
no write can land in the old collection after its final copy.

Redis keys: `memoryd:index:generation` (the active generation's number, a fast mirror of
the durable record in the store), `...:inflight` (open regions, scored by their deadline,
so a crashed worker cannot hold the fence forever), `...:reindex` (set while a
re-embedding copies: regions record what they touch), `...:closed` (the switch).
"""

from __future__ import annotations

import contextvars
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import redis

from memoryd.platform.errors import LockTimeout
from memoryd.records.models import Owner

GENERATION = "memoryd:index:generation"
INFLIGHT = "memoryd:index:inflight"
COPYING = "memoryd:index:reindex"
CLOSED = "memoryd:index:closed"
DIRTY = "memoryd:index:dirty"
SEP = "\x1f"

# -1 while the fence is closed; else the generation number (0 before any re-embedding).
_ENTER = """
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return tonumber(redis.call('GET', KEYS[3]) or '0')
"""
_EXIT = """
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 and #ARGV > 1 then
  redis.call('SADD', KEYS[3], unpack(ARGV, 2))
end
return 1
"""


@dataclass
class Region:
    token: str
    generation: int
    touched: list[str] = field(default_factory=list)


_region: contextvars.ContextVar[Region | None] = contextvars.ContextVar(
    "memoryd_write_region", default=None
)


def dirty_member(owner: Owner, memory_id: str) -> str:
    return f"{owner.tenant_id}{SEP}{owner.user_id}{SEP}{memory_id}"


def parse_member(member: str) -> tuple[Owner, str]:
    tenant, user, memory_id = member.split(SEP, 2)
    return Owner(tenant_id=tenant, user_id=user), memory_id


class WriteFence:
    def __init__(self, client: redis.Redis, region_ttl_s: float, wait_s: float) -> None:
        self._r = client
        self._ttl = region_ttl_s
        self._wait = wait_s
        self._enter = client.register_script(_ENTER)
        self._exit = client.register_script(_EXIT)

    @contextmanager
    def region(self) -> Iterator[Region]:
        """Re-entrant: inside an open region this only lends it out."""
        current = _region.get()
        if current is not None:
            yield current
            return
        token = uuid.uuid4().hex
        generation = self._open(token)
        region = Region(token, generation)
        reset = _region.set(region)
        try:
            yield region
        finally:
            _region.reset(reset)
            touched = list(dict.fromkeys(region.touched))
            self._exit(keys=[INFLIGHT, COPYING, DIRTY], args=[token, *touched])

    def touch(self, owner: Owner, ids: Sequence[str]) -> None:
        region = _region.get()
        if region is None:
            raise RuntimeError("a store mutation outside a write region")
        region.touched.extend(dirty_member(owner, i) for i in ids)

    def _open(self, token: str) -> int:
        deadline = time.monotonic() + self._wait
        delay = 0.01
        while True:
            expires = time.time() + self._ttl
            answer = int(self._enter(keys=[INFLIGHT, CLOSED, GENERATION], args=[token, expires]))
            if answer >= 0:
                return answer
            if time.monotonic() >= deadline:
                # A task retries later; the switch it waited for takes well under this.
                raise LockTimeout("the store is switching to a re-embedded collection; retry")
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    # ---- the re-embedding's side ----------------------------------------------------

    def generation(self) -> int:
        value = self._r.get(GENERATION)
        return int(value) if value is not None else 0

    def start_copying(self, generation: int) -> None:
        """From now on every region records what it touches."""
        pipe = self._r.pipeline(transaction=True)
        pipe.delete(DIRTY)
        pipe.set(COPYING, str(generation))
        pipe.setnx(GENERATION, "0")
        pipe.execute()

    def pop_dirty(self, count: int) -> list[str]:
        found = self._r.spop(DIRTY, count)
        return [m.decode() if isinstance(m, bytes) else str(m) for m in (found or [])]

    def push_dirty(self, members: Sequence[str]) -> None:
        if members:
            self._r.sadd(DIRTY, *members)

    def dirty_count(self) -> int:
        return int(self._r.scard(DIRTY))

    def close(self, timeout_s: float) -> bool:
        """Refuse new regions and wait for the open ones; False (fence reopened) on timeout."""
        self._r.set(CLOSED, "1", ex=max(int(timeout_s * 4), 60))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._r.zcount(INFLIGHT, time.time(), "+inf") == 0:
                return True
            time.sleep(0.01)
        self._r.delete(CLOSED)
        return False

    def reopen(self) -> None:
        """Open the fence again without switching (the copy goes on)."""
        self._r.delete(CLOSED)

    def finish(self, generation: int | None) -> None:
        """Reopen the fence; with a generation, publish it (the switch happened)."""
        pipe = self._r.pipeline(transaction=True)
        if generation is not None:
            pipe.set(GENERATION, str(generation))
        pipe.delete(COPYING, DIRTY, CLOSED)
        pipe.zremrangebyscore(INFLIGHT, "-inf", time.time())
        pipe.execute()
