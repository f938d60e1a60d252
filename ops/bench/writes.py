"""The write phases: enqueue latency and raw ingest throughput, on one stack, over HTTP.

Both post `extract: raw` interactions (each user message stored as it is, no extraction) to
one stack whose single in-process worker processes the jobs while the load runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memoryd.embeddings import make_embedder
from memoryd.platform.settings import Settings
from ops.bench.common import SEED, Options, latency_summary
from ops.bench.fill import Locomo
from ops.stack import Stack, log

FINAL = ("succeeded", "failed")


def interaction(user_id: str, text: str) -> dict[str, Any]:
    return {"user_id": user_id, "extract": "raw",
            "messages": [{"role": "user", "content": text}]}


def enqueue(client: httpx.Client, body: dict[str, Any]) -> str:
    response = client.post("/v1/interactions", json=body)
    if response.status_code != 202:
        raise RuntimeError(f"POST /v1/interactions: {response.status_code} {response.text}")
    job_id: str = response.json()["job_id"]
    return job_id


def job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}")
    if response.status_code != 200:
        raise RuntimeError(f"GET /v1/jobs/{job_id}: {response.status_code} {response.text}")
    view: dict[str, Any] = response.json()
    return view


def wait_jobs(
    client: httpx.Client, job_ids: Sequence[str], timeout_s: float
) -> list[dict[str, Any]]:
    """Every job's final view. Polls only the last job until it ends, then sweeps the rest,
    so that polling costs the stack (which shares its CPU with the worker) almost nothing."""
    deadline = time.monotonic() + timeout_s

    def final(job_id: str) -> dict[str, Any]:
        while True:
            view = job(client, job_id)
            if view["status"] in FINAL:
                return view
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {view['status']} after {timeout_s:.0f}s")
            time.sleep(0.1)

    if job_ids:
        final(job_ids[-1])
    return [final(job_id) for job_id in job_ids]


def wait_all(client: httpx.Client, job_ids: Sequence[str]) -> list[dict[str, Any]]:
    """`wait_jobs` with room for a slow worker: two seconds a job, five minutes at least."""
    return wait_jobs(client, job_ids, timeout_s=max(300.0, len(job_ids) * 2.0))


def finished_at(view: dict[str, Any]) -> float:
    """When the worker marked the job final (epoch seconds, the stack's own clock)."""
    return datetime.fromisoformat(str(view["updated_at"])).timestamp()


def warm_up_writes(client: httpx.Client) -> None:
    # The first job loads the document model into the worker; it is not part of any timing.
    ids = [enqueue(client, interaction(f"warm-up-{i}", f"Warm-up message number {i}."))
           for i in range(2)]
    failed = [v for v in wait_jobs(client, ids, 180) if v["status"] != "succeeded"]
    if failed:
        raise RuntimeError(f"warm-up job failed: {failed[0]}")


def short_messages(turns: Sequence[str], n: int) -> list[str]:
    short = [t for t in turns if 20 <= len(t) <= 80] or list(turns)
    return [short[i % len(short)] for i in range(n)]


def realistic_messages(turns: Sequence[str], n: int, rng: np.random.Generator) -> list[str]:
    # Turns of every length a chat has, but not the greetings-only ones ("Bye!").
    usable = [t for t in turns if len(t) >= 40]
    if n > len(usable):
        raise ValueError(f"--ingest-n {n} exceeds the {len(usable)} usable LoCoMo turns")
    picks = rng.choice(len(usable), n, replace=False)
    return [usable[i] for i in picks.tolist()]


def chars_mean(texts: Sequence[str]) -> float:
    return round(float(np.mean([len(t) for t in texts])), 1)


def run_enqueue(stack: Stack, locomo: Locomo, n: int) -> dict[str, Any]:
    texts = short_messages(locomo.turns, n)
    latencies: list[float] = []
    job_ids: list[str] = []
    with stack.client() as client:
        warm_up_writes(client)
        with stack.cpu_meter() as cpu:
            for i, text in enumerate(texts):
                body = interaction(f"enqueue-user-{i:05d}", text)
                started = time.perf_counter()
                job_ids.append(enqueue(client, body))
                latencies.append(time.perf_counter() - started)
        log(f"  {n} enqueued; waiting for the worker to finish them")
        views = wait_all(client, job_ids)
    failed = sum(v["status"] != "succeeded" for v in views)
    return {
        "endpoint": "POST /v1/interactions (extract raw, 1 short user message, distinct users)",
        "requests": n,
        "message_chars_mean": chars_mean(texts),
        "latency": latency_summary(latencies),
        "jobs_failed": failed,
        "worker_concurrency": stack.worker_concurrency,
        "cpu": cpu.result,
        "note": "measured while the stack's one in-process worker was processing the jobs",
    }


CEILING_TEXTS = 120


def embedder_ceiling(name: str, texts: Sequence[str]) -> float:
    """Passages per second of the embedder alone, one text per call."""
    embedder = make_embedder(name, Settings(embedder=name))
    embedder.embed_documents(texts[:2])  # loads the model
    started = time.perf_counter()
    for text in texts:
        embedder.embed_documents([text])
    return round(len(texts) / (time.perf_counter() - started), 1)


def run_ingest(stack: Stack, locomo: Locomo, n: int, users: int) -> dict[str, Any]:
    texts = realistic_messages(locomo.turns, n, np.random.default_rng(SEED + 1))
    bodies = [interaction(f"ingest-user-{i % users:03d}", text) for i, text in enumerate(texts)]
    with stack.client() as client:
        warm_up_writes(client)
        with stack.cpu_meter() as cpu:
            started_wall = time.time()
            started = time.perf_counter()
            job_ids = [enqueue(client, body) for body in bodies]
            enqueued_s = time.perf_counter() - started
            views = wait_all(client, job_ids)
            observed_s = time.perf_counter() - started
    failed = [v for v in views if v["status"] != "succeeded"]
    if failed:
        raise RuntimeError(f"{len(failed)} ingest jobs failed, e.g. {failed[0]}")
    ceiling = embedder_ceiling(stack.embedder, texts[:CEILING_TEXTS])
    added = sum(int((v.get("result") or {}).get("added", 0)) for v in views)
    # The end is when the worker marked the last job done (its own timestamp), so the figure
    # does not depend on how often this side polls.
    seconds = max(finished_at(v) for v in views) - started_wall
    return {
        "interactions": n,
        "memories_written": added,
        "users": users,
        "message_chars_mean": chars_mean(texts),
        "enqueue_seconds": round(enqueued_s, 3),
        "seconds": round(seconds, 3),
        "seconds_observed_by_polling": round(observed_s, 3),
        "memories_per_s": round(added / seconds, 1),
        # What the model alone does with the same texts, one per call as each job embeds
        # them, in this process once the stack is idle: the most ingest could reach.
        "embedder_alone_per_s": ceiling,
        "share_of_embedder": round(added / seconds / ceiling, 3),
        "worker_concurrency": stack.worker_concurrency,
        "cpu": cpu.result,
        "timed": "first enqueue until the last job was marked succeeded",
    }



def run_write_phases(opts: Options, locomo: Locomo, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Stack("write", workdir / "write", workdir, opts.embedder, worker_concurrency=1,
               extra_env=opts.stack_env) as stack:
        if "enqueue" in opts.phases:
            log(f"enqueue: {opts.enqueue_n} POST /v1/interactions")
            out["enqueue"] = run_enqueue(stack, locomo, opts.enqueue_n)
        if "ingest" in opts.phases:
            log(f"ingest: {opts.ingest_n} interactions, one worker")
            out["ingest"] = run_ingest(stack, locomo, opts.ingest_n, opts.ingest_users)
        out["write_stack_memory"] = stack.memory()
    if "ingest" in opts.phases:
        # The same worker as shipped: one process, its default thread count. Its threads
        # overlap one job's writes with another's embedding, and e5 then runs on two
        # single-thread lanes (shared/embeddings/e5/lanes.py).
        threads = int(Settings.model_fields["worker_concurrency"].default)
        with Stack("write-default", workdir / "write-default", workdir, opts.embedder,
                   worker_concurrency=threads, extra_env=opts.stack_env) as stack:
            log(f"ingest: {opts.ingest_n} interactions, one worker with its default "
                f"{threads} threads")
            out["ingest_default_threads"] = run_ingest(stack, locomo, opts.ingest_n,
                                                       opts.ingest_users)
    return out
