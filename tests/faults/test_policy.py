"""The settings and primitives the fault scenarios rely on, checked directly."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from pydantic import ValidationError

from memoryd.memories.locks import _HOST, user_lock
from memoryd.platform import failpoints
from memoryd.platform.errors import (
    ConfigurationError,
    EmbedderUnavailable,
    LockTimeout,
    StoreUnavailable,
)
from memoryd.platform.redis_runtime import ensure_redis, free_port
from memoryd.platform.settings import Settings
from memoryd.records.models import Owner
from memoryd.workers.task_base import unavailable


def test_visibility_timeout_is_minutes_and_limits_stay_below_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    assert 60 <= settings.broker_visibility_timeout_s <= 3600
    assert settings.job_time_limit_s < settings.broker_visibility_timeout_s
    assert settings.task_retry_backoff_max_s < settings.broker_visibility_timeout_s
    with pytest.raises(ValidationError, match="job_time_limit_s"):
        Settings(data_dir=tmp_path, broker_visibility_timeout_s=120, job_time_limit_s=120,
                 job_soft_time_limit_s=100)


def test_only_unreachable_dependencies_get_the_long_retry_budget() -> None:
    assert unavailable(StoreUnavailable("down")) and unavailable(EmbedderUnavailable("down"))
    assert unavailable(ConnectionRefusedError())
    assert not unavailable(LockTimeout("busy"))


def test_failpoint_fires_once_then_lets_the_rerun_through(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown"):
        failpoints.arm(Settings(data_dir=tmp_path, failpoints="nowhere", failpoint_dir=tmp_path))
    failpoints.arm(Settings(data_dir=tmp_path, failpoints="store.upsert",
                            failpoint_dir=tmp_path, failpoint_pause_s=0))
    try:
        failpoints.reach("embed.documents")  # not armed: no marker
        assert failpoints.reached(tmp_path, "embed.documents") is None
        failpoints.reach("store.upsert")
        marker = tmp_path / "store.upsert"
        first = marker.stat().st_mtime_ns
        failpoints.reach("store.upsert")  # the redelivered run: passes, marker untouched
        assert failpoints.reached(tmp_path, "store.upsert") is not None
        assert marker.stat().st_mtime_ns == first
    finally:
        failpoints.arm(Settings(data_dir=tmp_path))


def test_lock_of_a_dead_local_holder_is_taken_over(redis_server: str) -> None:
    client = redis.Redis.from_url(redis_server)
    owner = Owner(tenant_id="t-lock", user_id="u-lock")
    name = f"memoryd:lock:{owner.tenant_id}:{owner.user_id}"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        client.set(name, f"{_HOST}|{dead.pid}|token", px=60_000)
        with user_lock(client, owner, timeout_s=10, wait_s=5):
            assert client.get(name) != f"{_HOST}|{dead.pid}|token".encode()
        # A holder elsewhere (or alive) is waited for, never broken.
        client.set(name, "other-host|1|token", px=60_000)
        with pytest.raises(LockTimeout), user_lock(client, owner, timeout_s=10, wait_s=0.5):
            pass
        assert client.get(name) == b"other-host|1|token"
    finally:
        client.delete(name)
        client.close()


def test_lock_left_by_a_release_during_a_redis_outage_is_taken_over(tmp_path: Path) -> None:
    """A worker thread here finished while Redis was down, so its release failed; the lock
    comes back with Redis (its data survives the restart) and would have blocked the user
    until it expired. The next taker in this process breaks it at once."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    server = ensure_redis(url, tmp_path / "redis")
    owner = Owner(tenant_id="t-outage", user_id="u-outage")
    name = f"memoryd:lock:{owner.tenant_id}:{owner.user_id}"
    client = redis.Redis.from_url(url, socket_timeout=2)
    try:
        with pytest.raises(redis.exceptions.ConnectionError), \
                user_lock(client, owner, timeout_s=60, wait_s=5):
            server.stop()  # saves, with the lock in it
        server = ensure_redis(url, tmp_path / "redis")
        assert client.get(name) is not None  # back with Redis, for ~60 s more
        started = time.monotonic()
        with user_lock(client, owner, timeout_s=10, wait_s=5):
            pass
        assert time.monotonic() - started < 2
    finally:
        client.close()
        server.stop()
