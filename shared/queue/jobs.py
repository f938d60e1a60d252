"""Job state in Redis: what `GET /v1/jobs/{id}` reports, written by the gateway and the task."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, cast

import redis

from shared.errors import NotFound
from shared.models import JobStatus, utcnow
from shared.schemas import JobView

_FINAL = {JobStatus.SUCCEEDED.value, JobStatus.FAILED.value}

# One round trip each, on the two hot paths (enqueue, and a task starting).
_CREATE = """
if redis.call('HSETNX', KEYS[1], 'tenant_id', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'status', 'queued', 'attempts', 0, 'kind', ARGV[2],
           'request_id', ARGV[3], 'created_at', ARGV[4], 'updated_at', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
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

# Failing also files the job in its tenant's failed-jobs index (score: the time it failed)
# and keeps the task's arguments, so `POST /v1/jobs/{id}/retry` can send them again.
_FAIL = """
redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[1], 'updated_at', ARGV[2],
           'failed_at', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'payload', ARGV[3]) end
redis.call('EXPIRE', KEYS[1], ARGV[5])
local tenant = redis.call('HGET', KEYS[1], 'tenant_id')
if tenant then redis.call('ZADD', ARGV[6] .. tenant, ARGV[4], ARGV[7]) end
return 1
"""
FAILED_INDEX = "memoryd:jobs:failed:"

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
    return FAILED_INDEX + tenant_id


class JobStore:
    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self._r = client
        self._ttl = ttl_s
        self._create = client.register_script(_CREATE)
        self._begin = client.register_script(_BEGIN)
        self._fail = client.register_script(_FAIL)
        self._renew = client.register_script(_RENEW)
        self._drop = client.register_script(_DROP)

    @staticmethod
    def _key(job_id: str) -> str:
        return f"memoryd:job:{job_id}"

    def create(self, job_id: str, tenant_id: str, kind: str, request_id: str | None) -> bool:
        """Claim the id; False when it already exists (the same idempotency key)."""
        now = utcnow().isoformat()
        args: list[str | int] = [tenant_id, kind, request_id or "", now, self._ttl]
        return bool(self._create(keys=[self._key(job_id)], args=args))

    def discard(self, job_id: str) -> None:
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
        fields = {"status": JobStatus.SUCCEEDED.value, "result": json.dumps(result), "error": "",
                  "updated_at": utcnow().isoformat()}
        pipe = self._r.pipeline(transaction=False)
        pipe.hset(self._key(job_id), mapping=cast(Mapping[Any, Any], fields))
        # A retried job's kept arguments are no longer needed once it succeeds.
        pipe.hdel(self._key(job_id), "payload")
        pipe.expire(self._key(job_id), self._ttl)
        pipe.execute()

    def mark_failed(
        self, job_id: str, error: dict[str, Any], payload: dict[str, Any] | None = None
    ) -> None:
        now = utcnow()
        args: list[str | int | float] = [
            json.dumps(error), now.isoformat(), json.dumps(payload) if payload else "",
            now.timestamp(), self._ttl, FAILED_INDEX, job_id,
        ]
        self._fail(keys=[self._key(job_id)], args=args)

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
        return f"memoryd:job:{job_id}:lease"

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
