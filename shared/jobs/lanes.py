"""Fair shares of the memory queue's workers, decided at enqueue without any marking.

A worker thread that runs one tenant's long interaction cannot be taken from it, so a
queue that is merely fair in *order* (kombu's round robin over per-tenant queues) still
makes another tenant's save wait for a busy thread: with prefetch 1 and `acks_late`, a
worker fetches again only when a thread is free, and when every thread holds a job of
the flooding tenant, the save waits for one of those jobs to end (seconds) whatever the
queue order. What keeps a save near its idle time is a free thread. So each tenant, and
each user within it, may hold at most a share of the memory queue at once (queued or
running): `MEMORYD_TENANT_WRITE_SHARE` jobs per tenant, `MEMORYD_USER_WRITE_SHARE` per
user. A write beyond its owner's share *overflows*: it runs on the bulk queue's capacity,
as if the caller had marked it `"backfill": true` (`command["overflow"]`, read by
`memoryd.jobs.names.queue_for`, so a retry, a failed-job retry and crash recovery send it
back to the bulk queue too). Another tenant's write then finds a thread free on the
memory queue; the flooding tenant keeps its share there and the bulk workers besides.

Bookkeeping: `memoryd:lane:t:<tenant>` and `memoryd:lane:u:<tenant, user>` are sorted
sets of the job ids admitted to the memory queue, scored by when an entry lapses (its
admission plus `MEMORYD_PENDING_JOB_TTL_S`). Nothing removes an entry when its job ends:
the admission script drops members whose job record (`memoryd:job:<id>`) has ended or is
gone, so no worker hook, crash or lost message can leave a share taken; a job whose
record says running forever stops counting when its entry lapses. The sets hold at most
a share of ids each, so the script's work is bounded. Tenant and user names are
length-prefixed in the user key, so no pair of names shares one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis

LANE = "memoryd:lane:"
JOB_PREFIX = "memoryd:job:"  # shared/jobs/job_store.py JobStore._key

# KEYS[1]: the tenant's set, KEYS[2]: the user's set. ARGV: now, lapse time, job id,
# tenant share, user share, job key prefix, the sets' TTL. Returns 1 when admitted.
_ADMIT = """
local function live(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
  for _, id in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    local status = redis.call('HGET', ARGV[6] .. id, 'status')
    if status == false or status == 'succeeded' or status == 'failed' then
      redis.call('ZREM', key, id)
    end
  end
  return redis.call('ZCARD', key)
end
if live(KEYS[1]) >= tonumber(ARGV[4]) or live(KEYS[2]) >= tonumber(ARGV[5]) then
  return 0
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, ARGV[2], ARGV[3])
  redis.call('EXPIRE', key, ARGV[7])
end
return 1
"""


def tenant_key(tenant_id: str) -> str:
    return f"{LANE}t:{len(tenant_id)}:{tenant_id}"


def user_key(tenant_id: str, user_id: str) -> str:
    return f"{LANE}u:{len(tenant_id)}:{tenant_id}:{user_id}"


@dataclass(frozen=True)
class Shares:
    tenant: int  # memory-queue jobs one tenant may hold at once
    user: int  # of those, jobs one user may hold
    lapse_s: int  # an entry whose job never ends stops counting after this


class Lanes:
    def __init__(self, client: redis.Redis, shares: Shares) -> None:
        self._r = client
        self._shares = shares
        self._admit = client.register_script(_ADMIT)

    def admit(self, job_id: str, tenant_id: str, user_id: str) -> bool:
        """True: the job takes a place in its owner's share of the memory queue. False: the
        share is full, and the job overflows to the bulk queue. One round trip."""
        now = time.time()
        s = self._shares
        admitted = self._admit(
            keys=[tenant_key(tenant_id), user_key(tenant_id, user_id)],
            args=[now, now + s.lapse_s, job_id, s.tenant, s.user, JOB_PREFIX, s.lapse_s])
        return bool(admitted)

    def held(self, tenant_id: str, user_id: str | None = None) -> int:
        """Entries in the tenant's (or the user's) set, ended jobs included until the next
        admission drops them: for status and tests."""
        key = tenant_key(tenant_id) if user_id is None else user_key(tenant_id, user_id)
        return int(self._r.zcard(key))
