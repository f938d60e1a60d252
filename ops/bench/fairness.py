"""One tenant's backlog against another tenant's save (issue 19, item 11; issue 31, item 11).

    python -m ops.bench.fairness [--backfill 2000] [--saves 10] [--unmarked 2000]
                                 [--out bench-results/fairness.json]

The real embedded stack (`memoryd up`, e5-small, its own Redis). Tenant B's explicit save
is timed from enqueue to done (the job record's `created_at` to `updated_at`, both written
in the stack), one save at a time:

1. idle;
2. while tenant A's backfill (`--backfill` interactions of long chat turns, marked
   `"backfill": true`, so on the bulk queue) is queued (`--backfill 0` skips it);
3. while `--unmarked` (2,000) of the same interactions *without* the marker are queued:
   ordinary traffic, which takes at most tenant A's share of the memory queue and runs
   beyond it on the bulk queue's threads (shared/jobs/lanes.py). `--unmarked 0` skips it.

The goal: the save within 2x of idle (p50) in both. The report records the load average,
since the figures depend on what else the machine runs. The stack is stopped with the
backlog still queued.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import redis

from memoryd.platform.redis_runtime import embedded_client_url
from memoryd.tenancy.api_keys import ApiKeyStore, parse_scopes
from ops.bench.report import machine_info
from ops.stack import ROOT, Stack, log

DEFAULT_OUT = ROOT / "bench-results" / "fairness.json"
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


def run(opts: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-fairness-", dir=opts.work_dir))
    try:
        return _run(opts, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(opts: argparse.Namespace, work: Path) -> dict[str, Any]:
    # The model at the priority of the rest of the stack: on a machine shared with other
    # busy processes a lowered model is starved, and the figures measure that instead.
    stack = Stack("fairness", work / "data", work, "e5-small",
                  extra_env={"MEMORYD_MODEL_LANE_NICE": str(opts.model_lane_nice)})
    report: dict[str, Any] = {"backfill": opts.backfill, "turns": opts.turns,
                              "sentences": opts.sentences, "saves": opts.saves,
                              "unmarked": opts.unmarked,
                              "machine": {**machine_info(),
                                          "load_1m_at_start": round(os.getloadavg()[0], 2)}}
    with stack:
        # The stack's own Redis: its recorded port, with the password kept beside it.
        broker = redis.Redis.from_url(
            embedded_client_url("redis://127.0.0.1:6379/0", work / "data"))
        key_a, _ = ApiKeyStore(broker).create("tenant-a", parse_scopes("read,write"), "bench")
        with stack.client() as api_b, httpx.Client(
            base_url=stack.base_url, headers={"Authorization": f"Bearer {key_a}"},
            timeout=60.0, trust_env=False,
        ) as api_a:
            timed_save(api_b, -1, "warm-up")
            idle, _ = saves(api_b, opts.saves, "idle")
            report["idle"] = summary(idle)
            idle_p50 = max(report["idle"]["p50_ms"], 1e-9)
            log(f"idle: save p50 {report['idle']['p50_ms']} ms, max {report['idle']['max_ms']} ms")

            if opts.backfill:
                bodies = [interaction(i, opts.turns, opts.sentences, True)
                          for i in range(opts.backfill)]
                report["backfill_enqueue_s"] = round(enqueue_all(api_a, bodies), 2)
                queued = int(broker.llen("bulk"))
                busy, depths = saves(api_b, opts.saves, "backfill", broker, "bulk")
                report["under_backfill"] = {**summary(busy), "bulk_queued_at_start": queued,
                                            "bulk_queued_after_each": depths}
                ratio = report["under_backfill"]["p50_ms"] / idle_p50
                report["ratio_p50"] = round(ratio, 2)
                report["goal_met"] = ratio <= 2.0
                log(f"backfill of {opts.backfill} queued ({queued} still waiting): save p50 "
                    f"{report['under_backfill']['p50_ms']} ms, max "
                    f"{report['under_backfill']['max_ms']} ms; {ratio:.2f}x idle (goal: 2x)")

            if opts.unmarked:
                bodies = [interaction(100_000 + i, opts.turns, opts.sentences, False)
                          for i in range(opts.unmarked)]
                enqueued_s = enqueue_all(api_a, bodies)
                memory_ahead, bulk_ahead = int(broker.llen("memory")), int(broker.llen("bulk"))
                behind, depths = saves(api_b, opts.saves, "unmarked", broker, "bulk")
                report["behind_unmarked"] = {
                    **summary(behind), "unmarked": opts.unmarked,
                    "enqueue_s": round(enqueued_s, 2),
                    "memory_queued_at_start": memory_ahead, "bulk_queued_at_start": bulk_ahead,
                    "bulk_queued_after_each": depths}
                ratio = report["behind_unmarked"]["p50_ms"] / idle_p50
                report["ratio_unmarked_p50"] = round(ratio, 2)
                report["goal_unmarked_met"] = ratio <= 2.0
                log(f"{opts.unmarked} unmarked interactions queued ({memory_ahead} on the memory "
                    f"queue, {bulk_ahead} on the bulk queue): save p50 "
                    f"{report['behind_unmarked']['p50_ms']} ms, max "
                    f"{report['behind_unmarked']['max_ms']} ms; {ratio:.2f}x idle (goal: 2x)")
        report["machine"]["load_1m_at_end"] = round(os.getloadavg()[0], 2)
        broker.close()
    return report


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
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    parser.add_argument("--work-dir", type=Path, default=None, help="parent of the temp dir")
    parser.add_argument("--model-lane-nice", type=int, default=0,
                        help="MEMORYD_MODEL_LANE_NICE for the stack (default 0)")
    opts = parser.parse_args(argv)
    report = run(opts)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
