"""The gateway's in-memory access counts: pushed once per window, kept when Redis fails."""

from __future__ import annotations

import time
from pathlib import Path

from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings
from memoryd.records.models import Owner
from memoryd.retrieval.access import AccessCounter
from memoryd.runtime import Runtime

OWNER = Owner(tenant_id="tenant-x", user_id="user-x")


def _runtime(tmp_path: Path, redis_url: str, window_s: float) -> Runtime:
    return Runtime(Settings(data_dir=tmp_path, redis_url=redis_url, redis_timeout_s=0.5,
                            search_access_flush_s=window_s))


def test_counts_stay_in_memory_until_pushed(tmp_path: Path, redis_server: str) -> None:
    rt = _runtime(tmp_path, redis_server.rsplit("/", 1)[0] + "/12", window_s=300)
    rt.redis.flushdb()
    counter = AccessCounter(rt.redis, rt.celery, rt.settings.search_access_flush_s)
    try:
        counter.note(OWNER, ["m1", "m2"])
        counter.note(OWNER, ["m1"])
        counter.note(OWNER, [])
        assert counter.pending() == 2
        key = "memoryd:access:tenant-x:user-x"
        assert rt.redis.hgetall(key) == {}  # nothing reaches Redis inside the window
        counter.push()
        assert rt.redis.hgetall(key) == {b"m1": b"2", b"m2": b"1"}
        assert rt.redis.smembers("memoryd:access:dirty") == {b"tenant-x:user-x"}
        assert counter.pending() == 0
    finally:
        counter.close()
        rt.close()


def test_the_timer_pushes_each_window(tmp_path: Path, redis_server: str) -> None:
    rt = _runtime(tmp_path, redis_server.rsplit("/", 1)[0] + "/12", window_s=0.2)
    rt.redis.flushdb()
    counter = AccessCounter(rt.redis, rt.celery, rt.settings.search_access_flush_s)
    try:
        counter.note(OWNER, ["m3"])
        # The timer takes the counts out of `pending()` and then writes them: wait for the
        # write itself, not for the counter to look empty.
        deadline = time.monotonic() + 10
        while (rt.redis.hget("memoryd:access:tenant-x:user-x", "m3") is None
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert rt.redis.hget("memoryd:access:tenant-x:user-x", "m3") == b"1"
        assert counter.pending() == 0
    finally:
        counter.close()
        rt.close()


def test_counts_survive_a_failed_push(tmp_path: Path) -> None:
    rt = _runtime(tmp_path, f"redis://127.0.0.1:{free_port()}/0", window_s=300)
    counter = AccessCounter(rt.redis, rt.celery, rt.settings.search_access_flush_s)
    try:
        counter.note(OWNER, ["m1", "m1", "m2"])
        counter.push()  # Redis is down: logged, and the counts wait for the next window
        assert counter.pending() == 2
        counter.note(OWNER, ["m2"])
        assert counter.pending() == 2
    finally:
        counter.close()
        rt.close()
