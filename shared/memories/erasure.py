"""Erasure you can prove: after a forget, its text leaves every file memoryd writes.

A forget removes the text from what is live at once: the memory points, their audit trail
(`erase_audit_content`), the user's job records (`shared/jobs/forgetting.py`). The files keep
the old bytes a while longer: Qdrant Edge leaves deleted points in its segment files and
its write-ahead log, Redis keeps every past command in its AOF and the last snapshot in
its RDB. The compaction rewrites them from what is live:

- the embedded store: each shard is rebuilt from its live points and swapped in
  (`EdgeStore.compact`), so no segment or WAL file holds a deleted point or an erased
  audit payload; a Qdrant server owns its files and is left to its own optimizer;
- Redis: `BGREWRITEAOF` (the AOF becomes the live data set) and then `BGSAVE` (the RDB
  too), each waited for, whenever the server persists that way.

When: `MEMORYD_ERASURE_COMPACTION_S` bounds how long a forgotten text may stay on disk.
At 0 the forget task compacts before it returns. Otherwise a periodic task
(`memory.erase`; a timer in `memoryd up`, beat in server mode) runs every that many
seconds and compacts when a forget happened since the last compaction: a text stays on
disk at most the bound plus the compaction's own run (and its wait in the queue).
`memoryd erase` compacts at once, through the same task.
A point the store cannot read (a payload its engine cannot decode) never stops a
compaction: it is left out of the copy and reported (`unreadable`, `erasure_points_skipped`).
Logs never carry memory text (task logs name ids, codes and counts).

Redis keys: `memoryd:erasure:forgets` (forgets so far), `memoryd:erasure:compacted`
(that count when the last successful compaction started), `memoryd:erasure:lock`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from celery import Celery
from redis.exceptions import RedisError, ResponseError

from memoryd.jobs.names import TaskName
from memoryd.jobs.send import send
from memoryd.platform.logs import get_logger
from memoryd.platform.redis_keys import redis_key

log = get_logger("memoryd.erasure")

FORGETS = redis_key("erasure", "forgets")
COMPACTED = redis_key("erasure", "compacted")
LOCK = redis_key("erasure", "lock")
REDIS_WAIT_S = 120.0
# A compaction copies the whole store: an hour covers millions of points; a holder that
# dies frees the lock at the latest then.
LOCK_TIMEOUT_S = 3600.0
_POLL_S = 0.05


@dataclass(frozen=True)
class Erasure:
    """What a compaction rewrites: Redis's files and the store's (`compact_store`, the index's
    copy of what is live), and the bound a forgotten text may survive (`compaction_s`)."""

    redis: redis.Redis
    compact_store: Callable[[], dict[str, Any]]
    compaction_s: float


def after_forget(er: Erasure) -> dict[str, Any] | None:
    """Count the forget; compact now when the bound is 0 (the compaction's report)."""
    er.redis.incr(FORGETS)
    if er.compaction_s == 0:
        return compact(er)
    return None


def pending(client: redis.Redis) -> tuple[int, int]:
    forgets, compacted = client.mget([FORGETS, COMPACTED])
    return int(forgets or 0), int(compacted or 0)


def compact_if_due(er: Erasure) -> dict[str, Any]:
    """The periodic task: compact when a forget happened since the last compaction. When
    another compaction is running this one leaves: a forget it does not cover is still
    pending, and the next period takes it."""
    forgets, compacted = pending(er.redis)
    if forgets <= compacted:
        return {"compacted": False}
    return compact(er, wait_s=0.0)


def compact(er: Erasure, wait_s: float | None = None) -> dict[str, Any]:
    """Rewrite the store's and Redis's files from what is live now, one compaction at a
    time (a Redis lock: every worker process may run one); `wait_s` for the lock (None:
    as long as a compaction may take).

    Every forget counted before this starts is covered: the store copy and the Redis
    rewrites both happen after it (a forget that starts meanwhile counts for the next)."""
    lock = er.redis.lock(LOCK, timeout=LOCK_TIMEOUT_S)
    if not lock.acquire(blocking=wait_s != 0,
                        blocking_timeout=LOCK_TIMEOUT_S if wait_s is None else wait_s):
        return {"compacted": False, "busy": True}
    try:
        return _compact(er)
    finally:
        with contextlib.suppress(RedisError):
            lock.release()


def _compact(er: Erasure) -> dict[str, Any]:
    started = time.monotonic()
    forgets, _ = pending(er.redis)
    store = er.compact_store()
    redis_report = rewrite_redis(er.redis, REDIS_WAIT_S)
    er.redis.eval(
        "local v = tonumber(redis.call('GET', KEYS[1]) or '0') "
        "if tonumber(ARGV[1]) > v then redis.call('SET', KEYS[1], ARGV[1]) end return 1",
        1, COMPACTED, forgets,
    )
    report = {"compacted": True, "forgets": forgets, "store": store, "redis": redis_report,
              "seconds": round(time.monotonic() - started, 3)}
    skipped = unreadable_points(store)
    if skipped:
        report["unreadable"] = skipped
        log.warning("erasure_points_skipped", count=len(skipped), point_ids=skipped[:20])
    log.info("erasure_compacted", forgets=forgets, seconds=report["seconds"],
             redis=redis_report, unreadable=len(skipped))
    return report


def unreadable_points(report: Any) -> list[str]:
    """The ids of points a store compaction left out because it could not read them
    (`EdgeStore.compact`'s `unreadable`, under any nesting of generation and shard)."""
    found: list[str] = []
    if isinstance(report, dict):
        for name, value in report.items():
            if name == "unreadable" and isinstance(value, dict):
                found += [str(i) for ids in value.values() for i in ids]
            else:
                found += unreadable_points(value)
    return found


def request(client: redis.Redis, celery: Celery) -> int:
    """The operator's trigger (`memoryd erase`): the next compaction runs now, whatever
    the bound. Returns the count `wait_compacted` waits for."""
    target = int(client.incr(FORGETS))
    send(celery, TaskName.ERASE, {})
    return target


def wait_compacted(client: redis.Redis, target: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pending(client)[1] < target:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _idle(client: redis.Redis, deadline: float) -> dict[str, Any]:
    """Wait until no snapshot or AOF rewrite is running; returns the last INFO."""
    while True:
        info: dict[str, Any] = client.info("persistence")
        busy = (int(info.get("rdb_bgsave_in_progress", 0))
                or int(info.get("aof_rewrite_in_progress", 0))
                or int(info.get("aof_rewrite_scheduled", 0)))
        if not busy:
            return info
        if time.monotonic() > deadline:
            raise TimeoutError("Redis's background save did not finish in time")
        time.sleep(_POLL_S)


def _start(client: redis.Redis, command: str, deadline: float) -> None:
    while True:
        _idle(client, deadline)
        try:
            if command == "BGSAVE":
                client.bgsave()
            else:
                client.bgrewriteaof()
            return
        except ResponseError as exc:  # another child started between the check and now
            if "progress" not in str(exc) and "child" not in str(exc).lower():
                raise
            if time.monotonic() > deadline:
                raise


def _saves_snapshots(client: redis.Redis) -> bool:
    try:
        config = client.config_get("save")
    except ResponseError:
        return True  # CONFIG is renamed away (a managed Redis): snapshot to be safe
    return bool(str(config.get("save") or "").strip())


def rewrite_redis(client: redis.Redis, timeout_s: float) -> dict[str, str]:
    """AOF rewritten, then an RDB snapshot, each as the server is configured to keep them;
    both reflect the data set as it is once the rewrite starts."""
    deadline = time.monotonic() + timeout_s
    done: dict[str, str] = {}
    try:
        info = _idle(client, deadline)
        if int(info.get("aof_enabled", 0)):
            _start(client, "BGREWRITEAOF", deadline)
            info = _idle(client, deadline)
            done["aof"] = str(info.get("aof_last_bgrewrite_status", "unknown"))
        if _saves_snapshots(client):
            before = time.time()
            _start(client, "BGSAVE", deadline)
            info = _idle(client, deadline)
            saved_at = int(info.get("rdb_last_save_time", 0))
            ok = info.get("rdb_last_bgsave_status") == "ok" and saved_at >= int(before)
            done["rdb"] = "ok" if ok else str(info.get("rdb_last_bgsave_status", "unknown"))
    except (RedisError, TimeoutError) as exc:
        log.warning("erasure_redis_rewrite_failed", error=str(exc))
        raise
    return done
