"""Failed jobs of a tenant: list them (newest first, keyset pages) and run one again.

A job fails in the base task's `on_failure`, which files it in the tenant's sorted set
(`memoryd.jobs.job_store.failed_index`, score = the time it failed) and keeps its arguments
on the job's hash. A retry sends those arguments again under the same job id; the
writes are idempotent (deterministic point ids, each point records its job), so a
retry of a job that had half-done its work cannot write twice.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any, cast

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from memoryd.jobs.forgetting import job_key
from memoryd.jobs.job_store import failed_index
from memoryd.jobs.names import TaskName
from memoryd.jobs.pending import PENDING, UNTRACK_LUA
from memoryd.jobs.send import send
from memoryd.platform.errors import Conflict, InvalidInput, NotFound, QueueUnavailable
from memoryd.platform.redis_keys import LUA_KEY_PART
from memoryd.records.models import JobStatus, utcnow
from memoryd.records.schemas import FailedJob, FailedJobPage, JobAccepted

# failed → queued atomically, so two concurrent retries cannot both send the job.
_CLAIM = LUA_KEY_PART + """
if redis.call('HGET', KEYS[1], 'tenant_id') ~= ARGV[1] then return {-1, ''} end
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'failed' then return {0, status or ''} end
local payload = redis.call('HGET', KEYS[1], 'payload')
if not payload then return {-2, ''} end
redis.call('HSET', KEYS[1], 'status', 'queued', 'updated_at', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
-- Pending again for its user's fresh reads (shared/jobs/pending.py), until it ends.
local user = redis.call('HGET', KEYS[1], 'user_id')
if user and ARGV[5] ~= '' then
  local pending = ARGV[4] .. key_part(ARGV[1]) .. ':' .. key_part(user)
  redis.call('ZADD', pending, ARGV[5], ARGV[3])
  redis.call('EXPIRE', pending, ARGV[6])
end
return {1, payload}
"""
_UNCLAIM = UNTRACK_LUA + """
untrack(ARGV[4], ARGV[3])
redis.call('HSET', KEYS[1], 'status', 'failed', 'updated_at', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _job_key(job_id: str) -> str:
    return job_key(job_id)


def encode_cursor(score: float, seen: list[str]) -> str:
    raw = json.dumps({"v": score, "ids": seen}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, list[str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()))
        score, seen = float(data["v"]), [str(i) for i in data["ids"]]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidInput("cursor is not one this listing returned", field="cursor") from exc
    # A listing's scores are times: "nan" (which `float` reads) or an infinity would reach
    # Redis as a range bound it refuses, answered as a 503 instead of a bad cursor.
    if not math.isfinite(score):
        raise InvalidInput("cursor is not one this listing returned", field="cursor")
    return score, seen


def _view(job_id: str, raw: dict[str, str]) -> FailedJob:
    payload = raw.get("payload") or ""
    user_id = None
    if payload:
        try:
            user_id = json.loads(payload).get("command", {}).get("user_id")
        except (ValueError, AttributeError):
            user_id = None
    return FailedJob(
        job_id=job_id, kind=raw.get("kind", ""), user_id=user_id,
        attempts=int(raw.get("attempts") or 0),
        error=json.loads(raw["error"]) if raw.get("error") else None,
        failed_at=raw.get("failed_at") or raw.get("updated_at") or "",
        payload_ref=f"{_job_key(job_id)}#payload" if payload else None,
        payload_bytes=len(payload.encode()),
    )


def list_failed(
    client: redis.Redis, job_ttl_s: float, tenant: str, limit: int, cursor: str | None
) -> FailedJobPage:
    """Newest failure first. Entries whose job record has expired are dropped on the way."""
    index = failed_index(tenant)
    r = client
    r.zremrangebyscore(index, "-inf", utcnow().timestamp() - job_ttl_s)
    top: float | str = "+inf"
    seen: list[str] = []
    if cursor:
        top, seen = decode_cursor(cursor)
    items: list[FailedJob] = []
    last_score: float | None = None
    at_last: list[str] = []
    offset = 0
    while len(items) <= limit:
        batch = cast(list[tuple[Any, float]], r.zrevrangebyscore(
            index, top, "-inf", start=offset, num=limit + 1 + len(seen), withscores=True))
        if not batch:
            break
        offset += len(batch)
        pipe = r.pipeline(transaction=False)
        for member, _ in batch:
            pipe.hgetall(_job_key(_text(member)))
        for (member, score), raw in zip(batch, pipe.execute(), strict=True):
            job_id = _text(member)
            if job_id in seen and score == top:
                continue
            fields = {_text(k): _text(v) for k, v in raw.items()}
            if fields.get("status") != JobStatus.FAILED.value:
                r.zrem(index, job_id)  # expired or retried meanwhile
                continue
            items.append(_view(job_id, fields))
            if len(items) > limit:
                break
            at_last = [*at_last, job_id] if score == last_score else [job_id]
            last_score = score
    more = len(items) > limit
    items = items[:limit]
    if not more or last_score is None:
        return FailedJobPage(items=items)
    if cursor and last_score == top:
        at_last = [*seen, *at_last]
    return FailedJobPage(items=items, next_cursor=encode_cursor(last_score, at_last))


def retry(
    client: redis.Redis, celery: Celery, tenant: str, job_id: str, pending_ttl_s: int = 900,
) -> JobAccepted:
    """Send a failed job's arguments again under its id; 409 unless it is failed.

    The job is its user's pending write again (`memoryd.jobs.pending`) for `pending_ttl_s`."""
    claim = client.register_script(_CLAIM)
    now = utcnow()
    keys = [_job_key(job_id), failed_index(tenant)]
    args: list[str | int | float] = [tenant, now.isoformat(), job_id, PENDING,
                                     now.timestamp() + pending_ttl_s, pending_ttl_s]
    try:
        outcome, value = cast(list[Any], claim(keys=keys, args=args))
    except RedisError as exc:
        raise QueueUnavailable(f"the queue is unreachable: {exc}") from exc
    outcome = int(outcome)
    if outcome == -1:
        raise NotFound(f"no job {job_id}", field="job_id")
    if outcome == 0:
        raise Conflict(f"job {job_id} is {_text(value)}, not failed: only a failed job is retried",
                       field="job_id")
    if outcome == -2:
        raise Conflict(f"job {job_id} has no kept arguments (a forget removed them, or it "
                       "failed before they were kept); it cannot be retried", field="job_id")
    kind = TaskName(_text(client.hget(_job_key(job_id), "kind")))
    try:
        send(celery, kind, json.loads(_text(value)), job_id)
    except (OperationalError, RedisError, OSError) as exc:
        unclaim = client.register_script(_UNCLAIM)
        try:
            unclaim(keys=keys, args=[utcnow().isoformat(), now.timestamp(), job_id, PENDING])
        except RedisError:
            pass
        raise QueueUnavailable(f"the queue is unreachable: {exc}") from exc
    return JobAccepted(job_id=job_id, status=JobStatus.QUEUED)
