"""Per-key rate limit: a token bucket in Redis, one Lua script, so every gateway shares it."""

from __future__ import annotations

import math

import redis
from redis.exceptions import RedisError

from shared.errors import RateLimited
from shared.logs import get_logger

log = get_logger("memoryd.rate_limit")

# Redis's own clock, so gateways on several machines agree. Returns {allowed, wait_ms}.
_BUCKET = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil then tokens = burst; ts = now end
tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
"""


class RateLimiter:
    def __init__(self, client: redis.Redis, per_s: float, burst: int) -> None:
        self.per_s = per_s
        self.burst = burst
        self._script = client.register_script(_BUCKET)

    def take(self, key_id: str) -> None:
        """Spend one token of this key's bucket, or raise `RateLimited` with the wait."""
        if self.per_s <= 0:
            return
        try:
            allowed, wait_ms = self._script(
                keys=[f"memoryd:rate:{key_id}"], args=[self.per_s, self.burst]
            )
        except RedisError as exc:
            # Open, not closed: reads must keep answering while Redis is down.
            log.warning("rate_limit_unchecked", error=str(exc))
            return
        if not int(allowed):
            raise RateLimited(
                f"rate limit of {self.per_s:g} requests/s (burst {self.burst}) for this API key "
                "reached; retry after the Retry-After seconds",
                retry_after_s=max(1, math.ceil(int(wait_ms) / 1000)),
            )
