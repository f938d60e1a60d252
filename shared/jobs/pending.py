"""Each user's pending writes, for read-your-writes (`consistency: "fresh"` on a read).

`memoryd:jobs:pending:{t}:{u}` (built by `memoryd.platform.redis_keys`) is a sorted set of
the user's job ids that were accepted and have not ended, scored by the Unix time after
which the entry no longer counts (its acceptance plus `MEMORYD_PENDING_JOB_TTL_S`).
`JobStore.create` adds the job in the same script that claims it; `mark_succeeded`,
`mark_failed` and `discard` remove it. An entry whose end is never recorded (a lost
worker, a job recovery has not yet requeued) stops counting when its score passes, and the
whole set expires with its last entry, so a fresh read never waits on such a job beyond
that time. Only ids and times are kept.
"""

from __future__ import annotations

from memoryd.platform.redis_keys import LUA_KEY_PART, key_prefix, redis_key

PENDING = key_prefix("jobs", "pending")

# Lua, for the job store's end-of-job scripts: drop the job (ARGV[n]) from its user's set,
# found from the job hash (KEYS[1]); the prefix is passed as an argument.
UNTRACK_LUA = LUA_KEY_PART + """
local function untrack(prefix, job_id)
  local user = redis.call('HGET', KEYS[1], 'user_id')
  local tenant = redis.call('HGET', KEYS[1], 'tenant_id')
  if user and tenant then
    redis.call('ZREM', prefix .. key_part(tenant) .. ':' .. key_part(user), job_id)
  end
end
"""


def pending_key(tenant_id: str, user_id: str) -> str:
    return redis_key("jobs", "pending", tenant_id, user_id)
