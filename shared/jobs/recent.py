"""A tenant's recent jobs, whatever their state, newest first: for the admin page's jobs
view and `GET /v1/jobs/recent` (the failed ones have their own index, `memoryd.jobs.failed`).

`memoryd:jobs:recent:{tenant}` is a sorted set of job ids scored by acceptance time.
`JobStore.create` adds each job in the script that claims it and trims the set to the
newest `KEEP`; the set expires with the job TTL, and an entry whose job record has expired
is dropped when a listing meets it. Only ids and times are kept.
"""

from __future__ import annotations

import json
from typing import Any, cast

import redis

from memoryd.records.models import JobStatus
from memoryd.records.schemas import RecentJob, RecentJobPage

RECENT = "memoryd:jobs:recent:"
KEEP = 1000  # entries per tenant: a listing shows at most this many


def recent_key(tenant_id: str) -> str:
    return RECENT + tenant_id


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _view(job_id: str, raw: dict[str, str]) -> RecentJob | None:
    try:
        status = JobStatus(raw.get("status", ""))
    except ValueError:
        return None
    error = None
    if raw.get("error"):
        try:
            error = json.loads(raw["error"])
        except ValueError:
            error = {"message": raw["error"]}
    return RecentJob(job_id=job_id, kind=raw.get("kind", ""), status=status,
                     user_id=raw.get("user_id") or None,
                     attempts=int(raw.get("attempts") or 0), error=error,
                     created_at=raw.get("created_at"), updated_at=raw.get("updated_at"))


def list_recent(client: redis.Redis, tenant: str, limit: int,
                user_id: str | None = None) -> RecentJobPage:
    """The tenant's newest `limit` jobs (of `user_id` only, when given)."""
    key = recent_key(tenant)
    items: list[RecentJob] = []
    offset = 0
    while len(items) < limit and offset < KEEP:
        batch = cast(list[Any], client.zrevrange(key, offset, offset + 2 * limit - 1))
        if not batch:
            break
        offset += len(batch)
        pipe = client.pipeline(transaction=False)
        for member in batch:
            pipe.hgetall(f"memoryd:job:{_text(member)}")
        for member, raw in zip(batch, pipe.execute(), strict=True):
            job_id = _text(member)
            fields = {_text(k): _text(v) for k, v in raw.items()}
            if fields.get("tenant_id") != tenant:
                client.zrem(key, job_id)  # the job record expired
                continue
            if user_id is not None and fields.get("user_id") != user_id:
                continue
            view = _view(job_id, fields)
            if view is not None:
                items.append(view)
            if len(items) >= limit:
                break
    return RecentJobPage(items=items)
