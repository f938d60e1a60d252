"""Celery signal handlers that count every task run into Redis (see `shared/platform/metrics.py`).

Connected once per process: by the worker when it imports its tasks, by the gateway for
publishes. A metrics write never fails or delays a task beyond one pipelined round trip.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from celery.signals import after_task_publish, task_postrun, task_prerun
from redis.exceptions import RedisError

from memoryd.platform.logs import get_logger
from memoryd.platform.metrics import count_enqueued, record_task

log = get_logger("memoryd.metrics")

_STATES = {"SUCCESS": "succeeded", "FAILURE": "failed", "RETRY": "retried"}
_started: dict[str, float] = {}
_lock = threading.Lock()
_connected = False
_redis: Callable[[], redis.Redis] | None = None


def _on_prerun(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        with _lock:
            _started[task_id] = time.perf_counter()


def _on_postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    with _lock:
        started = _started.pop(task_id or "", None)
    seconds = time.perf_counter() - started if started is not None else None
    name = str(getattr(task, "name", "unknown"))
    if _redis is None:
        return
    try:
        record_task(_redis(), name, _STATES.get(state or "", "other"), seconds)
    except RedisError as exc:
        log.warning("task_metrics_not_recorded", error=str(exc))


def _on_publish(sender: str | None = None, **_: Any) -> None:
    count_enqueued(str(sender or "unknown"))


def connect(redis_of: Callable[[], redis.Redis]) -> None:
    """Count this process's task runs into the Redis `redis_of()` returns (called per run,
    so the process's runtime may be built after this)."""
    global _connected, _redis
    _redis = redis_of
    if _connected:
        return
    _connected = True
    task_prerun.connect(_on_prerun, weak=False)
    task_postrun.connect(_on_postrun, weak=False)
    after_task_publish.connect(_on_publish, weak=False)
