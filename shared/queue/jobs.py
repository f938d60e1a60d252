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


class JobStore:
    def __init__(self, client: redis.Redis, ttl_s: int) -> None:
        self._r = client
        self._ttl = ttl_s

    @staticmethod
    def _key(job_id: str) -> str:
        return f"memoryd:job:{job_id}"

    def create(self, job_id: str, tenant_id: str, kind: str, request_id: str | None) -> bool:
        """Claim the id; False when it already exists (the same idempotency key)."""
        key = self._key(job_id)
        now = utcnow().isoformat()
        if not self._r.hsetnx(key, "tenant_id", tenant_id):
            return False
        self._r.hset(key, mapping={
            "status": JobStatus.QUEUED.value, "attempts": 0, "kind": kind,
            "request_id": request_id or "", "created_at": now, "updated_at": now,
        })
        self._r.expire(key, self._ttl)
        return True

    def discard(self, job_id: str) -> None:
        self._r.delete(self._key(job_id))

    def exists(self, job_id: str) -> bool:
        return bool(self._r.exists(self._key(job_id)))

    def _set(self, job_id: str, **fields: str) -> None:
        fields["updated_at"] = utcnow().isoformat()
        self._r.hset(self._key(job_id), mapping=cast(Mapping[Any, Any], fields))
        self._r.expire(self._key(job_id), self._ttl)

    def status(self, job_id: str) -> str | None:
        value = self._r.hget(self._key(job_id), "status")
        return value.decode() if isinstance(value, bytes) else value

    def mark_running(self, job_id: str) -> None:
        self._r.hincrby(self._key(job_id), "attempts", 1)
        self._set(job_id, status=JobStatus.RUNNING.value)

    def mark_retrying(self, job_id: str, error: dict[str, Any]) -> None:
        self._set(job_id, status=JobStatus.RETRYING.value, error=json.dumps(error))

    def mark_succeeded(self, job_id: str, result: dict[str, Any]) -> None:
        self._set(job_id, status=JobStatus.SUCCEEDED.value, result=json.dumps(result), error="")

    def mark_failed(self, job_id: str, error: dict[str, Any]) -> None:
        self._set(job_id, status=JobStatus.FAILED.value, error=json.dumps(error))

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
