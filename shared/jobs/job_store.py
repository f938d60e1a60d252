"""Job state in Redis: what `GET /v1/jobs/{id}` reports, written by the gateway and the task."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import redis
import redis.asyncio as aioredis

from memoryd.jobs.forgetting import EPOCH, blank_text, epoch_key, job_key, user_jobs_key
from memoryd.jobs.pending import PENDING, UNTRACK_LUA, pending_key
from memoryd.jobs.recent import KEEP as RECENT_KEEP
from memoryd.jobs.recent import recent_key
from memoryd.platform.errors import NotFound
from memoryd.platform.redis_keys import LUA_KEY_PART, key_prefix, redis_key
from memoryd.records.models import JobStatus, utcnow
from memoryd.records.schemas import JobView

_FINAL = {JobStatus.SUCCEEDED.value, JobStatus.FAILED.value}


def ended(status: str | None) -> bool:
    """A job has ended once it succeeded or failed (a failed job applies nothing more)."""
    return status in _FINAL

# One round trip each, on the two hot paths (enqueue, and a task starting).
_CREATE = """
if redis.call('HSETNX', KEYS[1], 'tenant_id', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', 'queued', 'attempts', 0, 'kind', ARGV[2],
           'request_id', ARGV[3], 'created_at', ARGV[4], 'updated_at', ARGV[4])
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'digest', ARGV[9]) end
redis.call('EXPIRE', KEYS[1], ARGV[5])
if ARGV[6] ~= '' then
  -- The user's forget epoch now: a later forget covers this job (shared/jobs/forgetting.py).
  redis.call('HSET', KEYS[1], 'user_id', ARGV[6],
             'forget_epoch', redis.call('GET', KEYS[2]) or '0')
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[8])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
  -- The user's pending writes (shared/jobs/pending.py), scored by when the entry lapses.
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[7])
  redis.call('ZADD', KEYS[4], ARGV[7] + ARGV[10], ARGV[8])
  redis.call('EXPIRE', KEYS[4], ARGV[10])
end
-- The tenant's recent jobs (shared/jobs/recent.py): the newest ARGV[11] are kept.
redis.call('ZADD', KEYS[5], ARGV[7], ARGV[8])
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -(tonumber(ARGV[11]) + 1))
redis.call('EXPIRE', KEYS[5], ARGV[5])
return 1
"""
_BEGIN = """
if redis.call('HGET', KEYS[1], 'status') == 'succeeded' then
  return redis.call('HGET', KEYS[1], 'result') or '{}'
end
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'status', 'running', 'updated_at', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return false
"""

# Forgotten since accepted: the user's epoch moved past the one the job recorded.
_FORGOTTEN_SINCE = LUA_KEY_PART + """
local function forgotten_since()
  local user = redis.call('HGET', KEYS[1], 'user_id')
  local tenant = redis.call('HGET', KEYS[1], 'tenant_id')
  local accepted = redis.call('HGET', KEYS[1], 'forget_epoch')
  if not user or not tenant or not accepted then return false end
  local now = tonumber(redis.call('GET', ARGV[#ARGV] .. key_part(tenant) .. ':' .. key_part(user))
                     or '0')
  return now > tonumber(accepted)
end
"""
# `_FORGOTTEN_SINCE` reads the epoch prefix from the last argument: it stays last.
# A result stored after a forget that came after the job was accepted has its texts blanked.
_SUCCEED = _FORGOTTEN_SINCE + UNTRACK_LUA + """
untrack(ARGV[5], ARGV[6])
local result = ARGV[1]
if forgotten_since() then result = ARGV[2] end
redis.call('HSET', KEYS[1], 'status', 'succeeded', 'result', result, 'error', '',
           'updated_at', ARGV[3])
redis.call('HDEL', KEYS[1], 'payload')
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

# Failing also files the job in its tenant's failed-jobs index (score: the time it failed)
# and keeps the task's arguments, so `POST /v1/jobs/{id}/retry` can send them again.
# A job accepted before a later forget keeps no arguments: they may hold what it removed.
_FAIL = _FORGOTTEN_SINCE + UNTRACK_LUA + """
untrack(ARGV[8], ARGV[7])
redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[1], 'updated_at', ARGV[2],
           'failed_at', ARGV[2])
if ARGV[3] ~= '' and not forgotten_since() then
  redis.call('HSET', KEYS[1], 'payload', ARGV[3])
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
local tenant = redis.call('HGET', KEYS[1], 'tenant_id')
if tenant then redis.call('ZADD', ARGV[6] .. key_part(tenant), ARGV[4], ARGV[7]) end
return 1
"""
FAILED_INDEX = key_prefix("jobs", "failed")
# A job that reached a final state publishes its id here: gateways waiting on it wake up.
DONE_CHANNEL = redis_key("jobs", "done")

# A job's running lease (`memoryd:job:<id>:lease`, holding the holder's token): taken
# before a run, renewed while it runs, dropped after it; only the holder renews or drops it.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_DROP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def failed_index(tenant_id: str) -> str:
    return redis_key("jobs", "failed", tenant_id)


class JobStore:
    def __init__(self, client: redis.Redis, ttl_s: int, pending_ttl_s: int = 900) -> None:
        """`pending_ttl_s`: how long a job counts as its user's pending write when its end
        is never recorded (`memoryd.jobs.pending`)."""
        self._r = client
        self._ttl = ttl_s
        self._pending_ttl = pending_ttl_s
        self._untrack = client.register_script(UNTRACK_LUA + """
untrack(ARGV[1], ARGV[2])
return 1
""")
        self._create = client.register_script(_CREATE)
        self._begin = client.register_script(_BEGIN)
        self._fail = client.register_script(_FAIL)
        self._succeed = client.register_script(_SUCCEED)
        self._renew = client.register_script(_RENEW)
        self._drop = client.register_script(_DROP)

    @staticmethod
    def _key(job_id: str) -> str:
        return job_key(job_id)

    def create(
        self, job_id: str, tenant_id: str, kind: str, request_id: str | None,
        user_id: str | None = None, digest: str = "",
    ) -> bool:
        """Claim the id; False when it already exists (the same idempotency key). With the
        user, the job records their forget epoch and joins their job index.

        `digest`: the request's digest (`memoryd.records.identity.request_digest`), kept so a repeat
        of the key can be told apart from another request under the same key.
        """
        now = utcnow()
        args: list[str | int | float] = [tenant_id, kind, request_id or "", now.isoformat(),
                                          self._ttl, user_id or "", now.timestamp(), job_id,
                                          digest, self._pending_ttl, RECENT_KEEP]
        keys = [self._key(job_id), epoch_key(tenant_id, user_id or ""),
                user_jobs_key(tenant_id, user_id or ""), pending_key(tenant_id, user_id or ""),
                recent_key(tenant_id)]
        return bool(self._create(keys=keys, args=args))

    def digest(self, job_id: str) -> str | None:
        """The digest the job was created with; None when it has none (or is gone)."""
        value = self._r.hget(self._key(job_id), "digest")
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    def discard(self, job_id: str) -> None:
        self._untrack(keys=[self._key(job_id)], args=[PENDING, job_id])
        self._r.delete(self._key(job_id))

    def _set(self, job_id: str, **fields: str) -> None:
        fields["updated_at"] = utcnow().isoformat()
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(self._key(job_id), mapping=cast(Mapping[Any, Any], fields))
        pipe.expire(self._key(job_id), self._ttl)
        pipe.execute()

    def begin(self, job_id: str) -> dict[str, Any] | None:
        """Mark a run started; a job that already succeeded returns its result instead."""
        done = self._begin(keys=[self._key(job_id)], args=[utcnow().isoformat(), self._ttl])
        if done is None:
            return None
        result: dict[str, Any] = json.loads(done)
        return result

    def mark_retrying(self, job_id: str, error: dict[str, Any]) -> None:
        self._set(job_id, status=JobStatus.RETRYING.value, error=json.dumps(error))

    def mark_succeeded(self, job_id: str, result: dict[str, Any]) -> None:
        # A retried job's kept arguments are no longer needed once it succeeds.
        args: list[str | int] = [json.dumps(result), json.dumps(blank_text(result)),
                                 utcnow().isoformat(), self._ttl, PENDING, job_id, EPOCH]
        self._succeed(keys=[self._key(job_id)], args=args)
        self._r.publish(DONE_CHANNEL, job_id)

    def mark_failed(
        self, job_id: str, error: dict[str, Any], payload: dict[str, Any] | None = None
    ) -> None:
        now = utcnow()
        args: list[str | int | float] = [
            json.dumps(error), now.isoformat(), json.dumps(payload) if payload else "",
            now.timestamp(), self._ttl, FAILED_INDEX, job_id, PENDING, EPOCH,
        ]
        self._fail(keys=[self._key(job_id)], args=args)
        self._r.publish(DONE_CHANNEL, job_id)

    def set_progress(self, job_id: str, progress: dict[str, Any]) -> None:
        """How far a long job is (re-embedding: phase, done / total)."""
        self._set(job_id, progress=json.dumps(progress))

    def _raw(self, job_id: str) -> dict[str, str]:
        return {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in self._r.hgetall(self._key(job_id)).items()
        }

    def peek(self, job_id: str) -> JobView | None:
        """The job whatever its tenant: for the worker, never for a caller."""
        raw = self._raw(job_id)
        return self._view(job_id, raw) if raw.get("status") else None

    def get(self, job_id: str, tenant_id: str) -> JobView:
        raw = self._raw(job_id)
        if not raw or raw.get("tenant_id") != tenant_id:
            raise NotFound(f"no job {job_id}", field="job_id")
        return self._view(job_id, raw)

    @staticmethod
    def view_of(job_id: str, raw: Mapping[Any, Any], tenant_id: str,
                user_id: str | None = None) -> JobView:
        """A job hash as read from Redis, for its tenant only (else 404, as `get`); with
        `user_id`, for that user's jobs only (a job of another user, or of none, is 404)."""
        fields = {(k.decode() if isinstance(k, bytes) else k):
                  (v.decode() if isinstance(v, bytes) else v) for k, v in raw.items()}
        if not fields or fields.get("tenant_id") != tenant_id or (
                user_id is not None and fields.get("user_id") != user_id):
            raise NotFound(f"no job {job_id}", field="job_id")
        return JobStore._view(job_id, fields)

    @staticmethod
    def _view(job_id: str, raw: dict[str, str]) -> JobView:
        return JobView(
            job_id=job_id,
            status=JobStatus(raw.get("status", JobStatus.QUEUED.value)),
            kind=raw.get("kind", ""),
            attempts=int(raw.get("attempts", 0)),
            result=json.loads(raw["result"]) if raw.get("result") else None,
            error=json.loads(raw["error"]) if raw.get("error") else None,
            progress=json.loads(raw["progress"]) if raw.get("progress") else None,
            created_at=raw.get("created_at"),
            updated_at=raw.get("updated_at"),
        )

    def wait(self, job_id: str, tenant_id: str, timeout_s: float) -> JobView:
        """Poll until the job ends or the time runs out; returns the last view."""
        deadline = time.monotonic() + timeout_s
        delay = 0.005
        while True:
            view = self.get(job_id, tenant_id)
            if view.status.value in _FINAL or time.monotonic() >= deadline:
                return view
            time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
            delay = min(delay * 1.5, 0.05)

    @staticmethod
    def _lease_key(job_id: str) -> str:
        return redis_key("job", job_id, "lease")

    def take_lease(self, job_id: str, token: str, ttl_s: float) -> float | None:
        """Take the job's running lease; None when taken, else the seconds until the
        current holder's lease ends unless renewed."""
        key = self._lease_key(job_id)
        if self._r.set(key, token, nx=True, px=max(1, int(ttl_s * 1000))):
            return None
        left_ms = int(self._r.pttl(key))
        return max(left_ms, 0) / 1000.0

    def renew_lease(self, job_id: str, token: str, ttl_s: float) -> bool:
        """Extend the lease this token holds; False when it no longer holds it."""
        args: list[str | int] = [token, max(1, int(ttl_s * 1000))]
        return bool(self._renew(keys=[self._lease_key(job_id)], args=args))

    def drop_lease(self, job_id: str, token: str) -> None:
        self._drop(keys=[self._lease_key(job_id)], args=[token])

def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class AsyncJobWaiter:
    """Reads and waits for jobs on the event loop, so a waiting request holds no thread.

    One Redis subscription to `DONE_CHANNEL` per waiter wakes the requests waiting on a
    job when it ends; each also re-reads the job about every `poll_s`, so a lost notification
    (or a worker of an older version, which publishes none) only delays the answer.
    Built for one event loop: the gateway's.

    A wait reads the job's state only once the subscription is confirmed by Redis: an end
    published between that read and the subscription would reach nobody, and the wait
    would sleep until its next re-read, or its whole bound. (Right after a restart, the
    first wait used to start the subscription and read at once: a job that ended 20 ms
    later held a proxy turn for its full 2 s.) `start()` subscribes ahead of the first wait.
    """

    def __init__(self, client: aioredis.Redis, poll_s: float = 2.0) -> None:
        self._r = client
        self._poll_s = poll_s
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()  # set while Redis has confirmed the subscription
        self._closing = False  # set by close(): the listener's loops end at their next turn

    @classmethod
    def from_url(cls, url: str, timeout_s: float, poll_s: float = 2.0) -> AsyncJobWaiter:
        client = aioredis.Redis.from_url(url, socket_timeout=timeout_s,
                                         socket_connect_timeout=timeout_s)
        return cls(client, poll_s)

    async def get(self, job_id: str, tenant_id: str, user_id: str | None = None) -> JobView:
        raw = await self._r.hgetall(job_key(job_id))
        return JobStore.view_of(job_id, raw, tenant_id, user_id)

    async def states(self, job_ids: Sequence[str], tenant_id: str) -> dict[str, str | None]:
        """Each job's status, in one round trip; None for a job that is not this tenant's
        (or does not exist), so a foreign id reads exactly like an unknown one."""
        if not job_ids:
            return {}
        pipe = self._r.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hmget(job_key(job_id), ["tenant_id", "status"])
        rows = await pipe.execute()
        return {job_id: (_text(status) if owner is not None and _text(owner) == tenant_id
                         and status is not None else None)
                for job_id, (owner, status) in zip(job_ids, rows, strict=True)}

    async def pending_of(self, tenant_id: str, user_id: str) -> list[str]:
        """The user's writes accepted and not yet ended (`memoryd.jobs.pending`), oldest
        entry first; entries past their TTL no longer count."""
        ids = cast(list[bytes | str], await self._r.zrangebyscore(
            pending_key(tenant_id, user_id), time.time(), "+inf"))
        return [_text(job_id) for job_id in ids]

    async def wait(self, job_id: str, tenant_id: str, timeout_s: float) -> JobView:
        """The job once it ends, or as it is when `timeout_s` runs out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        woken = asyncio.Event()
        self._waiting.setdefault(job_id, set()).add(woken)
        try:
            # Subscribed before the first read (bounded: with Redis away the wait polls).
            await self._until_subscribed(min(deadline - loop.time(), self._poll_s))
            key = job_key(job_id)
            while True:
                # Registered before the read: an end published after it still wakes us.
                woken.clear()
                owner, status = await self._r.hmget(key, ["tenant_id", "status"])
                left = deadline - loop.time()
                if owner is None or _text(owner) != tenant_id or left <= 0 or (
                        status is not None and _text(status) in _FINAL):
                    return await self.get(job_id, tenant_id)  # the whole job, or 404
                # Jittered, so waits that began together do not re-read all at once.
                pause = self._poll_s * random.uniform(0.5, 1.5)
                try:
                    await asyncio.wait_for(woken.wait(), min(left, pause))
                except TimeoutError:
                    pass
        finally:
            events = self._waiting.get(job_id)
            if events is not None:
                events.discard(woken)
                if not events:
                    del self._waiting[job_id]

    async def start(self, timeout_s: float) -> bool:
        """Subscribe now rather than at the first wait; True once Redis confirmed it within
        `timeout_s` (else the subscription keeps trying in the background)."""
        return await self._until_subscribed(timeout_s)

    async def _until_subscribed(self, timeout_s: float) -> bool:
        self._listen()
        if self._subscribed.is_set():
            return True
        try:
            await asyncio.wait_for(self._subscribed.wait(), max(timeout_s, 0.0))
        except TimeoutError:
            return False
        return True

    def _listen(self) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(
                self._run_listener(), name="job-done-listener")

    async def _run_listener(self) -> None:
        while not self._closing:
            try:
                # Subscribe confirmations are read, not ignored: `_subscribed` is set on
                # Redis's confirmation, after which every end published reaches this loop.
                async with self._r.pubsub() as pubsub:
                    await pubsub.subscribe(DONE_CHANNEL)
                    while not self._closing:
                        message = await pubsub.get_message(timeout=1.0)
                        if message is None:
                            continue
                        if message.get("type") == "subscribe":
                            self._subscribed.set()
                            continue
                        if message.get("type") != "message":
                            continue
                        data = message.get("data")
                        job_id = data.decode() if isinstance(data, bytes) else str(data)
                        for event in self._waiting.get(job_id, ()):
                            event.set()
            except asyncio.CancelledError:
                self._subscribed.clear()
                raise
            except Exception:  # Redis away: waiters still poll; subscribe again shortly.
                self._subscribed.clear()
                await asyncio.sleep(1.0)

    async def close(self) -> None:
        """Stop listening, then close the connections. The listener is cancelled and also
        told to stop: a cancellation that lands in redis-py's read can be taken for the
        read's own timeout and dropped, and the loop read on for good (a gateway that
        stopped right after it started, its port being taken, hung there). Told, it ends
        at its next read, within a second."""
        self._closing = True
        self._subscribed.clear()
        if self._listener is not None:
            self._listener.cancel()
            try:
                await self._listener
            except (asyncio.CancelledError, Exception):
                pass
            self._listener = None
        await self._r.aclose()
