"""What a forget leaves behind in Redis, and what it forbids later writes to bring back.

Every forget of a user (one memory, a thread, a time range, everything) bumps the user's
forget epoch and records what it covered, inside the user's write lock. A job records the
epoch current when it was accepted (`JobStore.create`); when it writes, inside the same
lock, any forget recorded after that epoch which covers one of its memories makes it
write nothing and fail with `forgotten` (`refuse_forgotten`). So a job accepted before a
forget (queued, retrying, paused mid-run, or retried from the failed list) never re-creates
what the forget removed, while a job accepted after it writes as usual.

A forget also scrubs the user's job records (`scrub_jobs`): every memory text in their
results is blanked (ids, outcomes and counts stay), and the kept arguments of failed jobs
the forget covers are dropped, so such a job cannot be retried (409). Job results written
after the forget by a job accepted before it are blanked as they are stored
(`JobStore.mark_succeeded`), and such a job's arguments are not kept if it fails.

Redis keys (no text, only ids, times and counters): `memoryd:forget:epoch:{t}:{u}` (the
counter, never expires), `memoryd:forget:log:{t}:{u}` (the records, scored by epoch, the
last `LOG_KEEP`), `memoryd:jobs:user:{t}:{u}` (the user's job ids, scored by creation).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import redis

from memoryd.platform.errors import Forgotten
from memoryd.platform.redis_keys import key_prefix, redis_key
from memoryd.records.candidate import Candidate
from memoryd.records.identity import (
    content_hash,
    event_id,
    keyed_memory_id,
    memory_id,
    turn_id,
)
from memoryd.records.models import MemoryType, Owner, as_utc, utcnow

# Prefixes that Lua scripts append the encoded tenant and user to (`LUA_KEY_PART`).
EPOCH = key_prefix("forget", "epoch")
LOG = key_prefix("forget", "log")
USER_JOBS = key_prefix("jobs", "user")
LOG_KEEP = 1000
_SCRUB_BATCH = 500
# Keys of job results and errors whose values are a memory's or a message's text, or what
# the caller wrote beside it: a slot key, tags, metadata (all may hold the same words).
TEXT_KEYS = frozenset({"content", "before", "after", "reply", "key"})
LIST_KEYS = frozenset({"tags"})
MAP_KEYS = frozenset({"metadata"})

# Bump the epoch and file the record under it, atomically; returns the new epoch.
_RECORD = """
local epoch = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], epoch, '{"epoch": ' .. epoch .. ', ' .. string.sub(ARGV[1], 2))
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -1 - tonumber(ARGV[2]))
return epoch
"""


def epoch_key(tenant_id: str, user_id: str) -> str:
    return redis_key("forget", "epoch", tenant_id, user_id)


def log_key(tenant_id: str, user_id: str) -> str:
    return redis_key("forget", "log", tenant_id, user_id)


def user_jobs_key(tenant_id: str, user_id: str) -> str:
    return redis_key("jobs", "user", tenant_id, user_id)


def job_key(job_id: str) -> str:
    """A job's hash (`memoryd.jobs.job_store`)."""
    return redis_key("job", job_id)


@dataclass
class ForgetSpan:
    """What one forget covered: everything, or a thread and/or an occurred_at range, or
    memory ids (one memory and its versions)."""

    thread_id: str | None = None
    before: datetime | None = None
    after: datetime | None = None
    ids: list[str] = field(default_factory=list)
    epoch: int = 0

    @property
    def everything(self) -> bool:
        return not (self.thread_id or self.before or self.after or self.ids)

    def to_json(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "ids": self.ids,
                "before": self.before.isoformat() if self.before else None,
                "after": self.after.isoformat() if self.after else None}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ForgetSpan:
        def when(value: Any) -> datetime | None:
            return as_utc(datetime.fromisoformat(value)) if value else None

        return cls(thread_id=raw.get("thread_id"), before=when(raw.get("before")),
                   after=when(raw.get("after")), ids=list(raw.get("ids") or []),
                   epoch=int(raw.get("epoch") or 0))

    def in_range(self, when: datetime | None) -> bool:
        if self.before is None and self.after is None:
            return True
        if when is None:
            return False
        when = as_utc(when)
        return ((self.before is None or when < self.before)
                and (self.after is None or when > self.after))

    def covers(self, candidate: Candidate, point_id: str) -> bool:
        """Would this forget have removed the memory `candidate` is about to write?"""
        if self.ids:
            return point_id in self.ids
        if self.thread_id is not None and candidate.thread_id != self.thread_id:
            return False
        return self.in_range(candidate.occurred_at)


def record_forget(client: redis.Redis, owner: Owner, span: ForgetSpan) -> int:
    """Called inside the user's write lock, before the forget deletes anything."""
    body = json.dumps({**span.to_json(), "at": utcnow().isoformat()})
    script = client.register_script(_RECORD)
    epoch = int(script(keys=[epoch_key(owner.tenant_id, owner.user_id),
                             log_key(owner.tenant_id, owner.user_id)],
                       args=[body, LOG_KEEP]))
    span.epoch = epoch
    return epoch


def forgets_since(client: redis.Redis, owner: Owner, job_id: str) -> list[ForgetSpan] | None:
    """The forgets recorded after the job was accepted (None: the job recorded no epoch)."""
    pipe = client.pipeline(transaction=False)
    pipe.hget(job_key(job_id), "forget_epoch")
    pipe.get(epoch_key(owner.tenant_id, owner.user_id))
    accepted_raw, current_raw = pipe.execute()
    if accepted_raw in (None, b"", ""):
        return None
    accepted = int(accepted_raw)
    if int(current_raw or 0) <= accepted:
        return []
    raw = client.zrangebyscore(log_key(owner.tenant_id, owner.user_id), f"({accepted}", "+inf")
    spans = [ForgetSpan.from_json(json.loads(_text(r))) for r in raw]
    if len(spans) < int(current_raw or 0) - accepted:
        return [ForgetSpan()]  # records trimmed away: assume the widest one
    return spans


def candidate_id(owner: Owner, scope: str, project: str | None, c: Candidate) -> str:
    """The point id `MemoryWriter` gives the candidate (deterministic)."""
    chash = content_hash(c.content)
    if c.key is not None:
        return keyed_memory_id(owner.tenant_id, owner.user_id, scope, project, c.key)
    if c.turn_role is not None:
        return turn_id(owner.tenant_id, owner.user_id, scope, project, c.thread_id,
                       c.turn_role.value, chash, c.occurred_at.isoformat())
    if c.type is MemoryType.EPISODIC:
        return event_id(owner.tenant_id, owner.user_id, scope, project, chash,
                        c.occurred_at.isoformat())
    return memory_id(owner.tenant_id, owner.user_id, scope, project, chash)


def refuse_forgotten(
    client: redis.Redis, owner: Owner, scope: str, project: str | None,
    candidates: Sequence[Candidate], job_id: str,
) -> None:
    """Inside the user's write lock: raise `Forgotten` when a forget after the job's
    acceptance covers any of its candidates (the job then writes none of them)."""
    spans = forgets_since(client, owner, job_id)
    if not spans:
        return
    for c in candidates:
        point_id = candidate_id(owner, scope, project, c)
        for span in spans:
            if span.covers(c, point_id):
                raise Forgotten("a forget made after this job was accepted covers what it "
                                "would write; nothing was written", field="job_id")


# ---- job records ------------------------------------------------------------------------


def blank_text(value: Any) -> Any:
    """A job result or error with every memory or message text replaced by "", and every
    slot key, tag list and metadata emptied ("", [], {}); ids, outcomes and counts stay."""
    if isinstance(value, dict):
        return {k: _blank_field(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [blank_text(v) for v in value]
    return value


def _blank_field(name: str, value: Any) -> Any:
    if name in TEXT_KEYS and isinstance(value, str):
        return ""
    if name in LIST_KEYS and isinstance(value, list):
        return []
    if name in MAP_KEYS and isinstance(value, dict):
        return {}
    return blank_text(value)


def _fields(command: dict[str, Any]) -> dict[str, Any]:
    """A command's fields, those of the request it carries (shared/records/commands.py)
    included."""
    request = command.get("request")
    return {**request, **command} if isinstance(request, dict) else command


def _texts(command: dict[str, Any]) -> list[str]:
    command = _fields(command)
    found = [str(command.get("content") or "")]
    for group in ("messages", "records"):
        for item in command.get(group) or []:
            if isinstance(item, dict):
                found.append(str(item.get("content") or ""))
    changes = command.get("changes")
    if isinstance(changes, dict):
        found.append(str(changes.get("content") or ""))
    return [t for t in found if t]


def payload_covered(payload: dict[str, Any], span: ForgetSpan, contents: Iterable[str]) -> bool:
    """Whether a failed job's kept arguments hold text this forget removes."""
    command = payload.get("command")
    if not isinstance(command, dict):
        return span.everything
    command = _fields(command)
    if span.everything:
        return True
    if span.ids:
        gone = [c for c in contents if c]
        return any(g in t or t in g for t in _texts(command) for g in gone)
    if span.thread_id is not None and command.get("thread_id") != span.thread_id:
        return False
    when = command.get("occurred_at") or command.get("received_at")
    try:
        moment = as_utc(datetime.fromisoformat(when)) if when else None
    except ValueError:
        moment = None
    return span.in_range(moment)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def scrub_jobs(
    client: redis.Redis, owner: Owner, span: ForgetSpan, contents: Iterable[str], ttl_s: float,
) -> dict[str, int]:
    """Blank the texts in the user's job results and errors; drop the kept arguments of
    the failed jobs this forget covers. Returns how many records changed."""
    index = user_jobs_key(owner.tenant_id, owner.user_id)
    client.zremrangebyscore(index, "-inf", utcnow().timestamp() - ttl_s)
    contents = list(contents)
    results, payloads = 0, 0
    total = int(client.zcard(index))
    for start in range(0, total, _SCRUB_BATCH):  # newest last: one appended meanwhile is in
        job_ids = [_text(j) for j in client.zrange(index, start, start + _SCRUB_BATCH - 1)]
        pipe = client.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hmget(job_key(job_id), ["result", "error", "payload"])
        write = client.pipeline(transaction=False)
        for job_id, (result, error, payload) in zip(job_ids, pipe.execute(), strict=True):
            key = job_key(job_id)
            for name, raw in (("result", result), ("error", error)):
                if not raw:
                    continue
                value = json.loads(raw)
                blanked = blank_text(value)
                if blanked != value:
                    write.hset(key, name, json.dumps(blanked))
                    results += 1
            if payload and payload_covered(json.loads(payload), span, contents):
                write.hdel(key, "payload")
                payloads += 1
        write.execute()
    return {"results": results, "payloads": payloads}
