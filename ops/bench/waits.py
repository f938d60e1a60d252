"""Another tenant's search latency while many `?wait=` requests are pending, against idle.

    python -m ops.bench.waits                        # 64 waits of 30 s, 400 searches
    python -m ops.bench.waits --root /tmp/before     # the same, on another checkout's code

A fresh `memoryd up` (two tenants) gets `--memories` saves for the searching tenant; then
`--searches` searches by that tenant, started at `--rate` per second (open loop), are
timed idle and again while `--waits` `DELETE /v1/memories?all=true&wait=S` requests of
the other tenant are pending, the two phases alternating over `--rounds` rounds (the
host's drift falls on both alike). The waits stay pending because the bench holds their
user's write lock in the stack's Redis (as a long write of that user would), so their
jobs cannot finish. The goal: the loaded p99 within 1.5x of the idle p99. Prints a
table and writes a JSON report (`--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import redis

from memoryd.platform.redis_runtime import embedded_client_url, free_port
from ops.bench.common import FACTS, QUESTIONS, drop_memoryd_environment, latency_summary
from ops.stack import ROOT, Stack, log

GOAL_RATIO = 1.5
WAITER_KEY = "bench-waits-key-a"
SEARCH_KEY = "bench-waits-key-b"
WAITER_TENANT, SEARCH_TENANT = "bench-waiter", "bench-searcher"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ops.bench.waits", description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", type=int, default=64, help="pending ?wait= requests")
    parser.add_argument("--wait-s", type=float, default=30.0, help="their ?wait= (max 30)")
    parser.add_argument("--searches", type=int, default=400, help="timed searches per phase")
    parser.add_argument("--rounds", type=int, default=4,
                        help="idle and loaded phases alternate this many times")
    parser.add_argument("--rate", type=float, default=20.0,
                        help="searches started per second in each phase")
    parser.add_argument("--memories", type=int, default=40, help="saved for the searcher")
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the memoryd checkout whose code the stack runs")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "bench-waits.json",
                        help="where the JSON report goes")
    args = parser.parse_args(argv)
    if not 0 < args.wait_s <= 30:
        parser.error("--wait-s must be in (0, 30]")
    if args.rate <= 0 or args.rounds < 1:
        parser.error("--rate must be above 0 and --rounds at least 1")
    return args


async def timed_searches(client: httpx.AsyncClient, n: int, user: str, rate: float) -> list[float]:
    """`n` searches started at `rate` per second whatever the answers (open loop), each
    timed from its start: a stalled gateway shows in every search started meanwhile."""

    async def one(i: int) -> float:
        await asyncio.sleep(i / rate)
        started = time.perf_counter()
        response = await client.post("/v1/search", json={
            "user_id": user, "query": QUESTIONS[i % len(QUESTIONS)], "top_k": 5})
        if response.status_code != 200:
            raise RuntimeError(f"search answered {response.status_code}: {response.text}")
        return time.perf_counter() - started

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def hold_user_lock(client: redis.Redis, user: str, hold_s: float) -> str:
    """Take the waiting user's write lock as a holder on another host would (never broken
    as dead, shared/memories/locks.py), so the user's jobs wait for it instead of finishing."""
    name = f"memoryd:lock:{WAITER_TENANT}:{user}"
    client.set(name, f"bench-elsewhere|1|{uuid.uuid4().hex}", px=int(hold_s * 1000))
    return name


def job_count(client: redis.Redis) -> int:
    """Job records in Redis (a running job's lease, `memoryd:job:<id>:lease`, is no job)."""
    return sum(1 for key in client.scan_iter("memoryd:job:*") if not key.endswith(b":lease"))


async def loaded_round(
    args: argparse.Namespace, a: httpx.AsyncClient, b: httpx.AsyncClient,
    client: redis.Redis, searcher: str, waiter: str, n: int, loaded: list[float],
) -> dict[str, Any]:
    """Searches timed while `args.waits` waits of `waiter` are pending; then the lock is
    let go and every wait answered."""
    lock = hold_user_lock(client, waiter, args.wait_s + 60)
    params = {"user_id": waiter, "all": "true", "wait": args.wait_s}
    jobs_before = job_count(client)
    started = time.monotonic()
    waits = [asyncio.create_task(a.delete("/v1/memories", params=params))
             for _ in range(args.waits)]
    # Timed once every wait's job exists: the burst of enqueues is not the pending state.
    jobs = 0
    while jobs < args.waits and time.monotonic() - started < args.wait_s / 2:
        await asyncio.sleep(0.05)
        jobs = job_count(client) - jobs_before
    enqueued_s = time.monotonic() - started
    await asyncio.sleep(0.5)
    loaded += await timed_searches(b, n, searcher, args.rate)
    loaded_s = time.monotonic() - started
    pending = sum(1 for w in waits if not w.done())
    client.delete(lock)
    answers = await asyncio.gather(*waits, return_exceptions=True)
    codes: dict[str, int] = {}
    for answer in answers:
        key = str(answer.status_code) if isinstance(answer, httpx.Response) else "error"
        codes[key] = codes.get(key, 0) + 1
    return {"jobs_created": jobs, "waits_pending_after_searches": pending,
            "enqueued_s": round(enqueued_s, 2), "loaded_phase_s": round(loaded_s, 2),
            "answers": codes}


async def run(args: argparse.Namespace, stack: Stack, redis_url: str) -> dict[str, Any]:
    searcher = "searcher"
    limits = httpx.Limits(max_connections=args.waits + 8, max_keepalive_connections=args.waits)
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=args.wait_s + 60,
                                 limits=httpx.Limits(max_connections=args.searches),
                                 headers={"Authorization": f"Bearer {SEARCH_KEY}"},
                                 trust_env=False) as b, \
            httpx.AsyncClient(base_url=stack.base_url, timeout=args.wait_s + 60, limits=limits,
                              headers={"Authorization": f"Bearer {WAITER_KEY}"},
                              trust_env=False) as a:
        log(f"saving {args.memories} memories for the searching tenant")
        for i in range(args.memories):
            fact = f"{FACTS[i % len(FACTS)]} (note {i})"
            saved = await b.post("/v1/memories", params={"wait": 20},
                                 json={"user_id": searcher, "content": fact})
            if saved.status_code not in (200, 201):
                raise RuntimeError(f"save answered {saved.status_code}: {saved.text}")
        await timed_searches(b, 20, searcher, args.rate)  # warm-up
        client = redis.Redis.from_url(redis_url)
        idle: list[float] = []
        loaded: list[float] = []
        rounds: list[dict[str, Any]] = []
        per_round = max(1, args.searches // args.rounds)
        for number in range(args.rounds):
            # Idle and loaded alternate, so the host's drift falls on both alike.
            log(f"round {number + 1}/{args.rounds}: idle, {per_round} searches")
            idle += await timed_searches(b, per_round, searcher, args.rate)
            log(f"round {number + 1}/{args.rounds}: {args.waits} waits of {args.wait_s:g} s "
                f"pending, {per_round} searches")
            waiter = f"waiter-{uuid.uuid4().hex[:8]}"
            rounds.append(await loaded_round(args, a, b, client, searcher, waiter, per_round,
                                             loaded))
        client.close()
    codes: dict[str, int] = {}
    for entry in rounds:
        for key, count in entry.pop("answers").items():
            codes[key] = codes.get(key, 0) + count
    jobs = min(r["jobs_created"] for r in rounds)
    pending = min(r["waits_pending_after_searches"] for r in rounds)
    enqueued_s = max(r["enqueued_s"] for r in rounds)
    loaded_s = max(r["loaded_phase_s"] for r in rounds)
    idle_s, loaded_sum = latency_summary(idle), latency_summary(loaded)
    return {
        "waits": args.waits, "wait_s": args.wait_s, "searches": args.searches,
        "memories": args.memories, "rate": args.rate, "root": str(args.root),
        "idle": idle_s, "loaded": loaded_sum,
        "p99_ratio": round(loaded_sum["p99_ms"] / idle_s["p99_ms"], 3),
        "goal_ratio": GOAL_RATIO,
        "jobs_created": jobs, "waits_pending_after_searches": pending,
        "enqueued_s": round(enqueued_s, 2), "loaded_phase_s": round(loaded_s, 2),
        "wait_answers": codes, "rounds": rounds,
    }


def print_report(report: dict[str, Any]) -> None:
    idle, loaded = report["idle"], report["loaded"]
    print(f"another tenant's search, {report['searches']} searches per phase started at "
          f"{report['rate']:g}/s")
    print(f"{'phase':<40} {'p50':>10} {'p99':>10} {'max':>10}")
    print(f"{'idle':<40} {idle['p50_ms']:>7.1f} ms {idle['p99_ms']:>7.1f} ms "
          f"{idle['max_ms']:>7.1f} ms")
    label = f"{report['waits']} x ?wait={report['wait_s']:g} pending"
    print(f"{label:<40} {loaded['p50_ms']:>7.1f} ms {loaded['p99_ms']:>7.1f} ms "
          f"{loaded['max_ms']:>7.1f} ms")
    verdict = "met" if report["p99_ratio"] <= report["goal_ratio"] else "NOT met"
    print(f"p99 loaded / idle: {report['p99_ratio']:.2f} (goal <= {report['goal_ratio']}: "
          f"{verdict}); waits still pending after the searches: "
          f"{report['waits_pending_after_searches']} of {report['waits']}; "
          f"wait jobs created: {report['jobs_created']} in {report['enqueued_s']:.1f} s; "
          f"wait answers: {report['wait_answers']}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    drop_memoryd_environment()
    redis_url = f"redis://127.0.0.1:{free_port()}/0"
    with tempfile.TemporaryDirectory(prefix="bench-waits-", dir=args.work_dir) as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        # The stack reads its key from here; with MEMORYD_API_KEYS it writes none itself.
        (data_dir / "api-key").write_text(SEARCH_KEY + "\n")
        env = {
            "MEMORYD_REDIS_URL": redis_url,
            "MEMORYD_API_KEYS": f"{WAITER_KEY}={WAITER_TENANT},{SEARCH_KEY}={SEARCH_TENANT}",
            "MEMORYD_RATE_LIMIT_PER_S": "0",
        }
        # One worker thread: it alone polls the held lock, so the loaded phase measures the
        # pending waits rather than worker threads spinning on that lock.
        with Stack("waits", data_dir, Path(tmp), args.embedder, worker_concurrency=1,
                   extra_env=env, root=args.root.resolve()) as stack:
            # The Redis the stack started has the password kept in its data directory.
            report = asyncio.run(run(args, stack, embedded_client_url(redis_url, data_dir)))
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    log(f"report: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
