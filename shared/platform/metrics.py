"""Prometheus metrics: the gateway's own (request latency, enqueued tasks) and the workers'
(task outcomes and durations), queue depth and stored memories sampled at scrape.

Workers count into one Redis hash instead of a process-local registry: prefork children
and `--scale worker=N` containers share nothing but Redis, and the gateway exposes the
sum at scrape. The gateway itself is one process, so its metrics are plain in-process
collectors.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import redis
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryd.platform.logs import get_logger

log = get_logger("memoryd.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TASKS_KEY = "memoryd:metrics:tasks"
TASK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_SEP = "|"
SCHEDULED_SCAN_MAX = 1000  # unacked messages read at scrape to find the held countdowns

# The gateway's own metrics: one registry per process.
PROCESS = CollectorRegistry(auto_describe=True)
REQUEST_SECONDS = Histogram(
    "memoryd_http_request_duration_seconds",
    "Gateway request latency by route template",
    ("method", "route", "status"),
    registry=PROCESS,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
ENQUEUED = Counter(
    "memoryd_tasks_enqueued", "Tasks published by this process", ("task",), registry=PROCESS
)


class RequestMetricsMiddleware:
    """Times every HTTP request under its route template (`/v1/memories/{memory_id}`), so
    ids in paths never become label values; paths no route matched share one label."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            REQUEST_SECONDS.labels(scope.get("method", ""), template, str(status)).observe(
                time.perf_counter() - started
            )


def count_enqueued(task: str) -> None:
    ENQUEUED.labels(task).inc()


# ---- worker side: Celery signals count into Redis ---------------------------------


def _bucket(seconds: float) -> str:
    for le in TASK_BUCKETS:
        if seconds <= le:
            return repr(le)
    return "+Inf"


def record_task(redis_client: Any, task: str, state: str, seconds: float | None) -> None:
    """One pipelined round trip per finished task run. `state`: succeeded, failed, retried."""
    pipe = redis_client.pipeline(transaction=False)
    pipe.hincrby(TASKS_KEY, _SEP.join(("runs", task, state)), 1)
    if seconds is not None:
        pipe.hincrby(TASKS_KEY, _SEP.join(("bucket", task, _bucket(seconds))), 1)
        pipe.hincrbyfloat(TASKS_KEY, _SEP.join(("seconds", task)), seconds)
    pipe.execute()


# ---- scrape side ------------------------------------------------------------------


def _decode(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def scheduled_by_task(unacked: Iterable[bytes | str], now: float) -> dict[str, int]:
    """Of kombu's `unacked` hash values (`[message, exchange, routing_key]` JSON), how many
    carry an ETA after `now` (a countdown a worker holds), by task name."""
    held: dict[str, int] = {}
    for value in unacked:
        try:
            headers = json.loads(value)[0].get("headers") or {}
            eta = headers.get("eta")
            if eta and datetime.fromisoformat(eta).timestamp() > now:
                task = str(headers.get("task") or "?")
                held[task] = held.get(task, 0) + 1
        except (ValueError, TypeError, IndexError, AttributeError):
            continue  # not a Celery message: counted in unacked only
    return held


def queue_keys(queue: str) -> list[str]:
    """kombu's Redis transport keeps one list per queue and priority step."""
    return [queue, *(f"{queue}\x06\x16{p}" for p in (3, 6, 9))]


class StackCollector(Collector):
    """Read at scrape: task counters from Redis, queue depths, the stored-memory count."""

    def __init__(
        self,
        client: redis.Redis,
        count_stored: Callable[[], int],
        queues: Sequence[str],
        count_ttl_s: float,
    ) -> None:
        self._redis = client
        self._count_stored = count_stored
        self._queue_names = list(queues)
        self.count_ttl_s = count_ttl_s
        self._count_lock = threading.Lock()
        self._count: tuple[float, int] | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def render(self) -> bytes:
        return generate_latest(PROCESS) + generate_latest(self.registry)

    def collect(self) -> Iterable[Any]:
        yield from self._tasks()
        yield from self._queues()
        stored = self._stored()
        if stored is not None:
            gauge = GaugeMetricFamily(
                "memoryd_memories_stored",
                f"Memories in the store, all tenants (sampled, cached {self.count_ttl_s:g} s)",
            )
            gauge.add_metric([], stored)
            yield gauge

    def _tasks(self) -> Iterator[Any]:
        try:
            raw = {_decode(k): _decode(v) for k, v in self._redis.hgetall(TASKS_KEY).items()}
        except RedisError as exc:
            log.warning("metrics_redis_unreachable", error=str(exc))
            return
        runs = CounterMetricFamily(
            "memoryd_tasks_completed", "Task runs that ended, by outcome (all workers)",
            labels=("task", "state"),
        )
        retries = CounterMetricFamily(
            "memoryd_task_retries", "Task runs that ended in a retry (all workers)",
            labels=("task",),
        )
        failures = CounterMetricFamily(
            "memoryd_task_failures", "Tasks that failed for good (all workers)", labels=("task",)
        )
        buckets: dict[str, dict[str, int]] = {}
        seconds: dict[str, float] = {}
        for field, value in sorted(raw.items()):
            kind, _, rest = field.partition(_SEP)
            if kind == "runs":
                task, _, state = rest.rpartition(_SEP)
                runs.add_metric([task, state], float(value))
                if state == "retried":
                    retries.add_metric([task], float(value))
                elif state == "failed":
                    failures.add_metric([task], float(value))
            elif kind == "bucket":
                task, _, le = rest.rpartition(_SEP)
                buckets.setdefault(task, {})[le] = int(value)
            elif kind == "seconds":
                seconds[rest] = float(value)
        duration = HistogramMetricFamily(
            "memoryd_task_duration_seconds", "Task run time in the worker (all workers)",
            labels=("task",),
        )
        for task, counts in sorted(buckets.items()):
            cumulative, total = [], 0
            for le in [*(repr(b) for b in TASK_BUCKETS), "+Inf"]:
                total += counts.get(le, 0)
                cumulative.append((le, float(total)))
            duration.add_metric([task], cumulative, seconds.get(task, 0.0))
        yield from (runs, retries, failures, duration)

    def _queues(self) -> Iterator[Any]:
        depth = GaugeMetricFamily(
            "memoryd_queue_depth", "Messages waiting in each queue", labels=("queue",)
        )
        try:
            pipe = self._redis.pipeline(transaction=False)
            for queue in self._queue_names:
                for key in queue_keys(queue):
                    pipe.llen(key)
            pipe.hlen("unacked")
            lengths = pipe.execute()
        except RedisError as exc:
            log.warning("metrics_redis_unreachable", error=str(exc))
            return
        steps = len(queue_keys(""))
        for i, queue in enumerate(self._queue_names):
            depth.add_metric([queue], float(sum(lengths[i * steps:(i + 1) * steps])))
        unacked = GaugeMetricFamily(
            "memoryd_tasks_unacked", "Messages delivered to a worker and not yet acknowledged"
        )
        unacked.add_metric([], float(lengths[-1]))
        yield from (depth, unacked)
        held = self._scheduled(int(lengths[-1]))
        if held is not None:
            scheduled = GaugeMetricFamily(
                "memoryd_tasks_scheduled", "Of the unacknowledged messages, those a worker "
                "holds until their countdown (ETA) is due, by task", labels=("task",))
            for task, count in sorted(held.items()):
                scheduled.add_metric([task], float(count))
            yield scheduled

    def _scheduled(self, unacked: int) -> dict[str, int] | None:
        """The unacknowledged messages whose ETA is still ahead, by task name.

        A Celery worker takes a message sent with a countdown (a retry's backoff, the
        batched access-count flush of shared/retrieval/access.py) as soon as it is sent
        and holds it, unacknowledged, until it is due; on an idle stack that is the one
        message `memoryd status` used to show as "delivered, not acked", and the one kombu
        restores at shutdown ("Restoring 1 unacknowledged message(s)"). Read from kombu's
        `unacked` hash (each value `[message, exchange, routing_key]`, the task name and
        ETA in the message's headers); skipped above SCHEDULED_SCAN_MAX messages, so a
        scrape stays cheap in a backlog."""
        if unacked == 0:
            return {}
        if unacked > SCHEDULED_SCAN_MAX:
            return None
        try:
            values = self._redis.hvals("unacked")
        except RedisError as exc:
            log.warning("metrics_redis_unreachable", error=str(exc))
            return None
        return scheduled_by_task(values, time.time())

    def _stored(self) -> int | None:
        ttl = self.count_ttl_s
        with self._count_lock:
            now = time.monotonic()
            if self._count is not None and now - self._count[0] < ttl:
                return self._count[1]
            try:
                value = self._count_stored()
            except Exception as exc:  # a scrape must answer even when the store is down
                log.warning("metrics_store_unreachable", error=str(exc))
                return self._count[1] if self._count else None
            self._count = (now, value)
            return value
