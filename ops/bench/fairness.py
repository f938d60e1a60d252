"""One tenant's backlog against another tenant's save (issue 19, item 11; issue 31, item 11).

    python -m ops.bench.fairness [--backfill 2000] [--saves 30] [--unmarked 2000]
                                 [--server N] [--out bench-results/fairness.json]

The real stack, e5-small. By default the embedded one (`memoryd up`, its own Redis). With
`--server N`, server mode as docker-compose.yml lays it out, as processes on this machine:
one Redis, `memoryd serve`, N `memoryd worker --concurrency 2 --queues memory,llm` and one
`--queues bulk` worker of two processes weighted as compose's `cpu_shares` weighs it (its
session's autogroup at nice 9, `BULK_GROUP_NICE`), all on one shared Qdrant. No Qdrant server runs
here, so that is `QdrantRestFacade` (Qdrant's REST API over qdrant-client's local mode, one
call at a time, in this process); its calls and busy share are in the report for each
condition, so a run where it set the pace shows it. Every pool process is warmed (it loads
the model at its first job) before the idle saves. The server report, with `"mode":
"server"` and `"workers"`, goes to bench-results/fairness-server.json by default.

Tenant B's explicit save is timed from enqueue to done (the job record's `created_at` to
`updated_at`, both written by memoryd), one save at a time:

1. idle;
2. while tenant A's backfill (`--backfill` interactions of long chat turns, marked
   `"backfill": true`, so on the bulk queue) is queued (`--backfill 0` skips it);
3. while `--unmarked` (2,000) of the same interactions *without* the marker are queued:
   ordinary traffic, which takes at most tenant A's share of the memory queue and runs
   beyond it on the bulk queue's threads (shared/jobs/lanes.py). `--unmarked 0` skips it.

The goal: the save within 2x of idle (p50) in both, in either mode. The report records the
load average, since the figures depend on what else the machine runs. The stack is stopped
with the backlog still queued.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import redis

from memoryd.platform.host import machine_info
from memoryd.platform.redis_runtime import embedded_client_url, ensure_redis, free_port
from memoryd.tenancy.api_keys import ApiKeyStore, parse_scopes
from ops.chaos.procs import start_gateway, start_worker
from ops.stack import ROOT, CpuMeter, Proc, Stack, log
from tests.support.qdrant_rest_facade import QdrantRestFacade

DEFAULT_OUT = ROOT / "bench-results" / "fairness.json"
DEFAULT_SERVER_OUT = ROOT / "bench-results" / "fairness-server.json"
PLACES = ["Lisbon", "Osaka", "Quito", "Tromsø", "Hanoi", "Cusco", "Tbilisi", "Perth"]
THINGS = ["sourdough", "bouldering", "the cello", "birdwatching", "ceramics", "chess"]


def long_turn(i: int, j: int, sentences: int) -> str:
    """A long chat turn, different for every (i, j): what a history import replays."""
    return " ".join(
        f"On day {i}.{j}.{k} I was in {PLACES[(i + k) % len(PLACES)]} practising "
        f"{THINGS[(j + k) % len(THINGS)]} with a friend who lives there, number {i * 31 + k}."
        for k in range(sentences)
    )


def interaction(i: int, turns: int, sentences: int, backfill: bool) -> dict[str, Any]:
    return {
        "user_id": f"history-{i % 50}", "extract": "raw", "backfill": backfill,
        "messages": [{"role": "user" if j % 2 == 0 else "assistant",
                      "content": long_turn(i, j, sentences)} for j in range(turns)],
        "store_roles": ["user", "assistant"],
    }


def enqueue_all(api: httpx.Client, bodies: list[dict[str, Any]], clients: int = 8) -> float:
    """Enqueue every body; returns the seconds it took."""
    started = time.monotonic()

    def one(body: dict[str, Any]) -> None:
        answer = api.post("/v1/interactions", json=body)
        if answer.status_code != 202:
            raise RuntimeError(f"enqueue answered {answer.status_code}: {answer.text}")

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, bodies))
    return time.monotonic() - started


def timed_save(api: httpx.Client, n: int, label: str) -> float:
    """Enqueue one save and wait for it; seconds from its enqueue to its end, as the job
    record says."""
    answer = api.post("/v1/memories", json={
        "user_id": f"saver-{label}", "content": f"Remember: my locker number is {n} ({label})"})
    if answer.status_code != 202:
        raise RuntimeError(f"save answered {answer.status_code}: {answer.text}")
    job_id = answer.json()["job_id"]
    deadline = time.monotonic() + 1800
    while True:
        view = api.get(f"/v1/jobs/{job_id}").json()
        if view["status"] == "succeeded":
            break
        if view["status"] == "failed" or time.monotonic() > deadline:
            raise RuntimeError(f"save {job_id}: {view}")
        time.sleep(0.01)
    created = datetime.fromisoformat(view["created_at"])
    updated = datetime.fromisoformat(view["updated_at"])
    return (updated - created).total_seconds()


def summary(samples_s: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in samples_s)
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "mean_ms": round(statistics.fmean(ms), 1), "max_ms": round(ms[-1], 1),
            "samples_ms": [round(s * 1000, 1) for s in samples_s]}


def saves(api: httpx.Client, count: int, label: str, queue: redis.Redis | None = None,
          queue_name: str = "") -> tuple[list[float], list[int]]:
    samples: list[float] = []
    depths: list[int] = []
    for n in range(count):
        samples.append(timed_save(api, n, label))
        if queue is not None:
            depths.append(int(queue.llen(queue_name)))
    return samples, depths


@dataclass
class Target:
    """What the three conditions run against, in either mode: tenant A's and tenant B's
    clients, the broker (queue depths), how to warm the workers before the idle saves, and
    in server mode the stand-in Qdrant's counters (`QdrantRestFacade.load`)."""

    api_a: httpx.Client
    api_b: httpx.Client
    broker: redis.Redis
    warm_up: Callable[[], None]
    store_load: Callable[[], dict[str, float]] | None = None


def run(opts: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-fairness-", dir=opts.work_dir))
    report: dict[str, Any] = {
        **({"mode": "server", "workers": opts.server} if opts.server else {}),
        "backfill": opts.backfill, "turns": opts.turns, "sentences": opts.sentences,
        "saves": opts.saves, "unmarked": opts.unmarked,
        "machine": {**machine_info(), "load_1m_at_start": round(os.getloadavg()[0], 2)}}
    try:
        with (server(opts, work) if opts.server else embedded(opts, work)) as target:
            conditions(opts, target, report)
            report["machine"]["load_1m_at_end"] = round(os.getloadavg()[0], 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _client(base_url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"},
                        timeout=60.0, trust_env=False)


@contextlib.contextmanager
def embedded(opts: argparse.Namespace, work: Path) -> Iterator[Target]:
    """`memoryd up`: tenant B is the stack's own key, tenant A a key made in its Redis."""
    # The model at the priority of the rest of the stack: on a machine shared with other
    # busy processes a lowered model is starved, and the figures measure that instead.
    stack = Stack("fairness", work / "data", work, "e5-small",
                  extra_env={"MEMORYD_MODEL_LANE_NICE": str(opts.model_lane_nice)})
    with stack:
        # The stack's own Redis: its recorded port, with the password kept beside it.
        broker = redis.Redis.from_url(
            embedded_client_url("redis://127.0.0.1:6379/0", work / "data"))
        try:
            key_a, _ = ApiKeyStore(broker).create("tenant-a", parse_scopes("read,write"),
                                                  "bench")
            with stack.client() as api_b, _client(stack.base_url, key_a) as api_a:

                def warm_up() -> None:  # the in-process worker's first job loads the model
                    timed_save(api_b, -1, "warm-up")

                yield Target(api_a, api_b, broker, warm_up)
        finally:
            broker.close()


KEY_A, KEY_B = "bench-fairness-tenant-a", "bench-fairness-tenant-b"
WORKER_CONCURRENCY = 2  # docker-compose.yml's `worker` and `bulk` services


@contextlib.contextmanager
def server(opts: argparse.Namespace, work: Path) -> Iterator[Target]:
    """Server mode as docker-compose.yml lays it out, as processes on this machine: one
    Redis, a shared Qdrant (the REST stand-in over qdrant-client's local mode, in this
    process: no Qdrant server runs here), `memoryd serve`, `--server` workers on
    `memory,llm` and one on `bulk`, each with two pool processes. All tied to this process
    and stopped on the way out, whatever happened."""
    with contextlib.ExitStack() as cleanup:  # undone in reverse, whatever got started
        redis_server = ensure_redis(f"redis://127.0.0.1:{free_port()}/0", work / "redis")
        cleanup.callback(redis_server.stop)
        facade = QdrantRestFacade(work / "qdrant").start()
        cleanup.callback(facade.close)
        broker = cleanup.enter_context(redis.Redis.from_url(redis_server.url))
        settings: dict[str, object] = {
            "redis_url": redis_server.url, "qdrant_url": facade.url, "embedder": "e5-small",
            "model_lane_nice": opts.model_lane_nice,
            "api_keys": f"{KEY_A}=tenant-a,{KEY_B}=tenant-b"}
        procs: list[Proc] = []
        cleanup.callback(_stop_all, procs)
        gateway, base = start_gateway(work, settings, tied=True)
        procs.append(gateway)
        workers = [("memory,llm", f"worker{i + 1}@%h") for i in range(opts.server)]
        for queues, hostname in [*workers, ("bulk", "bulk@%h")]:
            procs.append(start_worker(work, settings, WORKER_CONCURRENCY, queues=queues,
                                      hostname=hostname, tied=True))
        lower_cpu_weight(procs[-1].pid, BULK_GROUP_NICE)
        api_a = cleanup.enter_context(_client(base, KEY_A))
        api_b = cleanup.enter_context(_client(base, KEY_B))
        yield Target(api_a, api_b, broker, warm_up=lambda: warm_pool(api_a, api_b, procs[1:]),
                     store_load=facade.load)


# docker-compose.yml gives the bulk service `cpu_shares: 128`, an eighth of a default
# container's weight, so that bulk work yields the cores to saves and searches. Here every
# process the bench starts is a session of its own, which the kernel's autogroup schedules
# as a group (as a container is one): the bulk worker's group at nice 9 weighs about the same.
BULK_GROUP_NICE = 9


def lower_cpu_weight(pid: int, nice: int) -> None:
    """Lower the CPU weight of the autogroup (session) of `pid`: what a container's
    `cpu_shares` does to its cgroup. Raises where autogroup is off, since the server-mode
    figures would not then be those of the layout compose sets up."""
    if Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() != "1":
        raise RuntimeError("server mode needs the kernel's autogroup to weigh the bulk worker "
                           "as compose's cpu_shares does")
    Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")


def _stop_all(procs: list[Proc]) -> None:
    """Side by side: each worker's warm shutdown waits for the jobs it is running."""
    with ThreadPoolExecutor(max(len(procs), 1)) as pool:
        list(pool.map(Proc.stop, procs))


def _model_loaded(pid: int) -> bool:
    """Whether the process has the e5 model's lanes (named threads): it loaded the model."""
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                if (task / "comm").read_text().startswith(CpuMeter.MODEL_THREADS):
                    return True
    return False


def warm_pool(api_a: httpx.Client, api_b: httpx.Client, workers: list[Proc],
              rounds: int = 20) -> None:
    """Until every pool process has loaded the model (each loads it at its first job, and
    the first save it runs would time that): rounds of saves sent at once, twice as many as
    there are pool processes, from both tenants and two users of each. Each tenant's first
    two take its share of the memory queue, the rest overflow to the bulk queue and warm
    the bulk worker's processes."""
    for _ in range(rounds):
        cold = [pid for w in workers for pid in w.children() if not _model_loaded(pid)]
        if not cold:
            return
        width = 2 * sum(len(w.children()) for w in workers)
        with ThreadPoolExecutor(width) as pool:
            list(pool.map(lambda n: timed_save((api_a, api_b)[n % 2], n,
                                               f"warm-up-{(n // 2) % 2}"), range(width)))
    log(f"warning: {len(cold)} pool processes still without the model after {rounds} rounds")


def conditions(opts: argparse.Namespace, target: Target, report: dict[str, Any]) -> None:
    """Tenant B's saves idle, under tenant A's backfill and behind its unmarked interactions,
    into `report`."""
    api_a, api_b, broker = target.api_a, target.api_b, target.broker
    target.warm_up()
    with _store_use(target) as store:
        idle, _ = saves(api_b, opts.saves, "idle")
    report["idle"] = {**summary(idle), **store}
    idle_p50 = max(report["idle"]["p50_ms"], 1e-9)
    log(f"idle: save p50 {report['idle']['p50_ms']} ms, max {report['idle']['max_ms']} ms")

    if opts.backfill:
        bodies = [interaction(i, opts.turns, opts.sentences, True)
                  for i in range(opts.backfill)]
        report["backfill_enqueue_s"] = round(enqueue_all(api_a, bodies), 2)
        queued = int(broker.llen("bulk"))
        report["under_backfill"] = {"bulk_queued_at_start": queued}
        ratio = _condition(target, opts.saves, "backfill", report["under_backfill"], idle_p50)
        report["ratio_p50"], report["goal_met"] = round(ratio, 2), ratio <= 2.0
        log(f"backfill of {opts.backfill} queued ({queued} still waiting): "
            f"{_saves_line(report['under_backfill'], ratio)}")

    if opts.unmarked:
        bodies = [interaction(100_000 + i, opts.turns, opts.sentences, False)
                  for i in range(opts.unmarked)]
        enqueued_s = enqueue_all(api_a, bodies)
        memory_ahead, bulk_ahead = int(broker.llen("memory")), int(broker.llen("bulk"))
        report["behind_unmarked"] = {
            "unmarked": opts.unmarked, "enqueue_s": round(enqueued_s, 2),
            "memory_queued_at_start": memory_ahead, "bulk_queued_at_start": bulk_ahead}
        ratio = _condition(target, opts.saves, "unmarked", report["behind_unmarked"], idle_p50)
        report["ratio_unmarked_p50"], report["goal_unmarked_met"] = round(ratio, 2), ratio <= 2.0
        log(f"{opts.unmarked} unmarked interactions queued ({memory_ahead} on the memory "
            f"queue, {bulk_ahead} on the bulk queue): "
            f"{_saves_line(report['behind_unmarked'], ratio)}")


def _condition(target: Target, count: int, label: str, into: dict[str, Any],
               idle_p50: float) -> float:
    """Time `count` saves behind what is queued, into `into` (with the bulk queue's depth
    after each, and in server mode the store's use); returns their p50 over idle's."""
    with _store_use(target) as store:
        samples, depths = saves(target.api_b, count, label, target.broker, "bulk")
    into.update({**summary(samples), "bulk_queued_after_each": depths, **store})
    return float(into["p50_ms"]) / idle_p50


def _saves_line(figures: dict[str, Any], ratio: float) -> str:
    return (f"save p50 {figures['p50_ms']} ms, max {figures['max_ms']} ms; "
            f"{ratio:.2f}x idle (goal: 2x)")


@contextlib.contextmanager
def _store_use(target: Target) -> Iterator[dict[str, Any]]:
    """In server mode, what the stand-in Qdrant did while a condition's saves ran, filled
    in as `{"store": ...}` on the way out: its calls, the share of the wall time it was busy
    (near 1: it, not memoryd, set the pace) and the seconds calls waited for it. Embedded:
    left empty."""
    figures: dict[str, Any] = {}
    if target.store_load is None:
        yield figures
        return
    before, started = target.store_load(), time.monotonic()
    yield figures
    after, wall = target.store_load(), max(time.monotonic() - started, 1e-9)
    busy = after["busy_s"] - before["busy_s"]
    figures["store"] = {
        "requests": int(after["requests"] - before["requests"]),
        "busy_share": round(busy / wall, 3),
        "waited_s": round(after["waited_s"] - before["waited_s"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.fairness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backfill", type=int, default=2000,
                        help="interactions marked backfill (0: skip)")
    parser.add_argument("--turns", type=int, default=4, help="messages per interaction")
    parser.add_argument("--sentences", type=int, default=12, help="sentences per message")
    parser.add_argument("--saves", type=int, default=30, help="timed saves per condition")
    parser.add_argument("--unmarked", type=int, default=2000,
                        help="time saves behind this many unmarked interactions (0: skip)")
    parser.add_argument("--server", type=int, default=0, metavar="N",
                        help="server mode with N memory workers (default 0: embedded)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"JSON report path (default {DEFAULT_OUT.relative_to(ROOT)}, "
                             f"server mode {DEFAULT_SERVER_OUT.relative_to(ROOT)})")
    parser.add_argument("--work-dir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument("--model-lane-nice", type=int, default=0,
                        help="MEMORYD_MODEL_LANE_NICE for the stack (default 0)")
    opts = parser.parse_args(argv)
    if opts.server < 0:
        parser.error("--server: a number of workers, 0 for the embedded stack")
    # A condition of no save has no p50, and an interaction of no message cannot be posted.
    for flag, value, least in (("--saves", opts.saves, 1), ("--turns", opts.turns, 1),
                               ("--sentences", opts.sentences, 1),
                               ("--backfill", opts.backfill, 0),
                               ("--unmarked", opts.unmarked, 0)):
        if value < least:
            parser.error(f"{flag} must be at least {least}; got {value}")
    opts.out = opts.out or (DEFAULT_SERVER_OUT if opts.server else DEFAULT_OUT)
    report = run(opts)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
