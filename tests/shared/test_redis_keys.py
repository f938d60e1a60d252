"""One encoding for every Redis key: tenant `a:b` and tenant `a` never share a key, in
Python or in the Lua scripts that build keys from a job's hash."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from conftest import redis_db_url

from memoryd.jobs.forgetting import ForgetSpan, record_forget, scrub_jobs
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.pending import pending_key
from memoryd.platform.errors import ConfigurationError, InvalidInput
from memoryd.platform.redis_keys import LUA_KEY_PART, key_part, redis_key
from memoryd.records.models import Owner
from memoryd.tenancy.api_keys import ApiKeyStore
from memoryd.tenancy.auth import parse_api_keys, tenant_problem

# Tenant `tenant-one`'s user `eu:bob`, and tenant `tenant-one:eu`'s user `bob`.
OUTER = Owner(tenant_id="tenant-one", user_id="eu:bob")
INNER = Owner(tenant_id="tenant-one:eu", user_id="bob")


@pytest.fixture()
def client(redis_server: str) -> Iterator[redis.Redis]:
    r = redis.Redis.from_url(redis_db_url(redis_server, 13))
    r.flushdb()
    try:
        yield r
    finally:
        r.flushdb()
        r.close()


def test_parts_cannot_run_into_each_other() -> None:
    assert redis_key("lock", "tenant-one", "eu:bob") != redis_key("lock", "tenant-one:eu", "bob")
    assert redis_key("job", "x:lease") != redis_key("job", "x", "lease")
    assert redis_key("a", "%3A") != redis_key("a", ":")
    # Ordinary names keep the keys earlier versions wrote.
    assert redis_key("lock", "tenant-a", "alice@example.com") == (
        "memoryd:lock:tenant-a:alice@example.com")


def test_lua_encodes_as_python_does(client: redis.Redis) -> None:
    script = client.register_script(LUA_KEY_PART + "return key_part(ARGV[1])")
    for value in ["plain", "a:b", "%", "%3A", "::%%::", "鍵:値%", "a%3Ab:"]:
        assert script(args=[value]).decode() == key_part(value), value


def test_a_forget_touches_only_its_own_tenants_jobs(client: redis.Redis) -> None:
    """On 204bae7 tenant `tenant-one` forgetting its user `eu:bob` blanked the job results
    of tenant `tenant-one:eu`'s user `bob`, and each saw the other's pending jobs."""
    jobs = JobStore(client, ttl_s=3600)
    result = {"outcome": "added", "memory": {"id": "m1", "content": "bob's secret"}}
    for job_id, owner in (("job-inner", INNER), ("job-outer", OUTER),
                          ("late-inner", INNER), ("late-outer", OUTER)):
        assert jobs.create(job_id, owner.tenant_id, "memory.save", None, owner.user_id)
    assert [m.decode() for m in client.zrange(pending_key(*_pair(INNER)), 0, -1)] == [
        "job-inner", "late-inner"]
    jobs.mark_succeeded("job-inner", result)
    jobs.mark_succeeded("job-outer", result)
    # Each end left its own user's pending set (the Lua untrack builds the same key).
    assert [m.decode() for m in client.zrange(pending_key(*_pair(INNER)), 0, -1)] == [
        "late-inner"]
    assert [m.decode() for m in client.zrange(pending_key(*_pair(OUTER)), 0, -1)] == [
        "late-outer"]

    span = ForgetSpan()
    record_forget(client, OUTER, span)
    assert scrub_jobs(client, OUTER, span, [], 3600)["results"] == 1
    assert jobs.peek("job-inner").result == result  # type: ignore[union-attr]
    assert "bob's secret" not in str(jobs.peek("job-outer").result)  # type: ignore[union-attr]
    # Jobs accepted before the forget and ending after it: only the forgetting user's is
    # stored blanked (the Lua epoch check builds the same keys).
    jobs.mark_succeeded("late-inner", result)
    jobs.mark_succeeded("late-outer", result)
    assert jobs.peek("late-inner").result == result  # type: ignore[union-attr]
    assert "bob's secret" not in str(jobs.peek("late-outer").result)  # type: ignore[union-attr]


def _pair(owner: Owner) -> tuple[str, str]:
    return owner.tenant_id, owner.user_id


def test_a_tenant_name_with_a_colon_is_refused(client: redis.Redis) -> None:
    store = ApiKeyStore(client)
    with pytest.raises(InvalidInput) as refused:
        store.create("tenant-one:eu", frozenset(), None)
    assert refused.value.field == "tenant" and "tenant-one:eu" in refused.value.message
    assert tenant_problem("tenant-one") is None
    with pytest.raises(ConfigurationError, match="tenant-one:eu"):
        parse_api_keys("k1=tenant-one,k2=tenant-one:eu")
    for bad in ("tenant one", "a,b", "a=b", "", "-lead", "\u202eadmin", "a" * 65, "(operator)"):
        assert tenant_problem(bad) is not None, bad
