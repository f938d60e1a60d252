"""Per-key token bucket in Redis: over the rate → 429 rate_limited with Retry-After."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest
import redis
from conftest import KEY_A, KEY_B
from live_gateway import gateway, settings_with

from memoryd.platform.errors import RateLimited
from memoryd.tenancy.rate_limit import LEASE_TTL_S, RateLimiter, lease_size


def test_bucket_allows_burst_then_refuses(stack: Any) -> None:
    client: redis.Redis = stack.runtime.redis
    limiter = RateLimiter(client, per_s=0.5, burst=3)
    key = f"k-{uuid.uuid4().hex}"
    for _ in range(3):
        limiter.take(key)
    with pytest.raises(RateLimited) as refused:
        limiter.take(key)
    # One token comes back every 2 s at 0.5/s: the wait says so, rounded up to seconds.
    assert refused.value.retry_after_s == 2
    assert refused.value.headers == {"Retry-After": "2"}
    # Another key has its own bucket.
    limiter.take(f"{key}-other")


def test_lease_size_is_small_against_the_bucket() -> None:
    assert lease_size(500, 1000) == 10  # the defaults
    assert lease_size(0.5, 3) == 1  # small buckets stay exact
    assert lease_size(10_000, 100_000) == 16


def bucket_tokens(client: redis.Redis, key: str) -> float:
    return float(client.hget(f"memoryd:rate:{key}", "tokens") or "nan")


def test_a_lease_is_spent_from_memory_then_renewed(stack: Any) -> None:
    client: redis.Redis = stack.runtime.redis
    limiter = RateLimiter(client, per_s=0.01, burst=20, lease=5)
    key = f"k-{uuid.uuid4().hex}"
    limiter.take(key)  # one Redis call takes 5 tokens: one spent, 4 held
    assert bucket_tokens(client, key) == pytest.approx(15, abs=0.01)
    for _ in range(4):
        assert limiter.take_leased(key)
    assert not limiter.take_leased(key)
    assert bucket_tokens(client, key) == pytest.approx(15, abs=0.01)  # no Redis call
    limiter.take(key)
    assert bucket_tokens(client, key) == pytest.approx(10, abs=0.01)


def test_gateways_with_leases_admit_no_more_than_the_bucket(stack: Any) -> None:
    """Two gateways on one key: together they admit exactly the bucket, no more."""
    client: redis.Redis = stack.runtime.redis
    gateways = [RateLimiter(client, per_s=0.01, burst=10, lease=4) for _ in range(2)]
    key = f"k-{uuid.uuid4().hex}"
    admitted, refused = 0, 0
    for i in range(30):
        try:
            gateways[i % 2].take(key)
            admitted += 1
        except RateLimited:
            refused += 1
    assert (admitted, refused) == (10, 20)


def test_a_stale_lease_is_not_spent(stack: Any) -> None:
    limiter = RateLimiter(stack.runtime.redis, per_s=0.01, burst=20, lease=5)
    key = f"k-{uuid.uuid4().hex}"
    limiter.take(key)
    left, _ = limiter._leased[key]
    limiter._leased[key] = (left, time.monotonic() - LEASE_TTL_S - 1)
    assert not limiter.take_leased(key)


def test_zero_rate_means_no_limit(stack: Any) -> None:
    limiter = RateLimiter(stack.runtime.redis, per_s=0, burst=1)
    for _ in range(5):
        limiter.take("unlimited")


def test_gateway_answers_429_with_retry_after(stack: Any, user: str) -> None:
    settings = settings_with(stack, rate_limit_per_s=0.2, rate_limit_burst=2)
    with gateway(settings, stack.runtime.index) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY_A}"}) as a:
            codes = [a.get("/v1/jobs/none").status_code for _ in range(2)]
            assert codes == [404, 404]
            limited = a.get("/v1/jobs/none")
            assert limited.status_code == 429
            assert limited.json()["error"]["code"] == "rate_limited"
            assert int(limited.headers["Retry-After"]) >= 1
        # Each key has its own bucket.
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY_B}"}) as b:
            assert b.get("/v1/jobs/none").status_code == 404
        # Liveness is not rate limited.
        assert httpx.get(f"{url}/healthz").status_code == 200
