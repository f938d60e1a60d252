"""The extraction phase: LLM extraction throughput against a fake model with a fixed latency,
and what saturated extraction does to enqueue latency and to raw ingestion.

Setup, and why: the fake LLM (shared/testing/fake_llm.py) runs in this process and answers
every request after `latency_ms`. The stack is `memoryd up` (one process: gateway, the
memory-queue worker, and a second in-process worker on the llm queue with N threads). The
embedded Qdrant Edge shard opens in one process only, and no Qdrant server exists here, so
"N workers" are N threads of the llm worker sharing the store, not N processes: while the
model call dominates (it waits on the network, holding no lock), a thread is what a worker
process would be. Each run uses a fresh stack; each job is a distinct user's interaction
that yields one ADD (embedded, dedup-checked, written, audited).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ops.bench_common import Options, latency_summary, log
from ops.bench_stack import Stack
from ops.bench_writes import enqueue, finished_at, wait_all
from shared.testing.fake_llm import Behaviour, FakeLLM, Received, json_reply

MODEL = "bench-extractor"
_USER_LINE = re.compile(r"^USER: (.+)$", re.MULTILINE)


def answer(request: Received) -> Behaviour:
    """One ADD of what the user said: every job writes one new memory."""
    said = _USER_LINE.findall(request.messages[-1]["content"] if request.messages else "")
    content = (said[-1] if said else "nothing")[:300]
    return json_reply({"operations": [
        {"action": "ADD", "type": "semantic", "content": content, "confidence": 0.95},
    ]})


def llm_interaction(user: str, i: int) -> dict[str, Any]:
    text = f"I have been learning to play instrument number {i} every weekend with my friends"
    return {"user_id": user, "extract": "llm", "messages": [{"role": "user", "content": text}]}


def raw_interaction(user: str, i: int) -> dict[str, Any]:
    return {"user_id": user, "extract": "raw",
            "messages": [{"role": "user", "content": f"A raw note number {i} about my day"}]}


def _throughput(stack: Stack, jobs: int, tag: str) -> dict[str, Any]:
    with stack.client() as client:
        warm = [enqueue(client, llm_interaction(f"{tag}-warm-{i}", i)) for i in range(2)]
        wait_all(client, warm)
        with stack.cpu_meter() as cpu:
            started = time.time()
            ids = [enqueue(client, llm_interaction(f"{tag}-user-{i:04d}", i))
                   for i in range(jobs)]
            views = wait_all(client, ids)
        ended = max(finished_at(v) for v in views)
    failed = sum(v["status"] != "succeeded" for v in views)
    added = sum(int((v.get("result") or {}).get("added", 0)) for v in views)
    seconds = max(ended - started, 1e-9)
    return {"jobs": jobs, "jobs_failed": failed, "memories_added": added,
            "seconds": round(seconds, 2), "jobs_per_s": round(jobs / seconds, 2),
            "cpu": cpu.result}


def _raw_latency(client: Any, tag: str, n: int) -> list[float]:
    """Enqueue → succeeded for raw interactions, one at a time (the worker's clock)."""
    samples = []
    for i in range(n):
        started = time.time()
        job_id = enqueue(client, raw_interaction(f"{tag}-raw-{i}", i))
        [view] = wait_all(client, [job_id])
        samples.append(finished_at(view) - started)
    return samples


def _enqueue_latency(client: Any, tag: str, n: int) -> tuple[list[float], list[str]]:
    samples, ids = [], []
    for i in range(n):
        started = time.perf_counter()
        ids.append(enqueue(client, llm_interaction(f"{tag}-enq-{i:04d}", i)))
        samples.append(time.perf_counter() - started)
    return samples, ids


def _saturated(stack: Stack, jobs: int, enqueue_n: int, raw_n: int) -> dict[str, Any]:
    """Enqueue latency and raw-ingest latency idle, then with the llm queue saturated."""
    with stack.client() as client:
        idle_enqueue, idle_ids = _enqueue_latency(client, "idle", enqueue_n)
        wait_all(client, idle_ids)
        idle_raw = _raw_latency(client, "idle", raw_n)
        backlog = [enqueue(client, llm_interaction(f"busy-user-{i:04d}", i)) for i in range(jobs)]
        with stack.cpu_meter() as cpu:
            busy_enqueue, busy_ids = _enqueue_latency(client, "busy", enqueue_n)
            busy_raw = _raw_latency(client, "busy", raw_n)
        still_queued = sum(
            client.get(f"/v1/jobs/{j}").json()["status"] != "succeeded" for j in backlog
        )
        wait_all(client, backlog + busy_ids)
    return {
        "llm_backlog_jobs": jobs,
        "llm_jobs_unfinished_when_measured": still_queued,
        "enqueue_idle": latency_summary(idle_enqueue),
        "enqueue_saturated": latency_summary(busy_enqueue),
        "raw_ingest_idle": latency_summary(idle_raw),
        "raw_ingest_saturated": latency_summary(busy_raw),
        "cpu": cpu.result,
        "note": "enqueue: POST /v1/interactions (extract llm), client-side; raw ingest: "
                "enqueue → job succeeded (extract raw), one at a time",
    }


def run_extract_phase(opts: Options, workdir: Path) -> dict[str, Any]:
    latency_s = opts.extract_latency_ms / 1000.0
    runs = []
    saturated: dict[str, Any] | None = None
    with FakeLLM(latency_s=latency_s) as fake:
        fake.responder = answer
        env = {"MEMORYD_LLM_PROVIDER": "openai", "MEMORYD_LLM_BASE_URL": fake.openai_url,
               "MEMORYD_LLM_MODEL": MODEL, "MEMORYD_LLM_TIMEOUT_S": "30"}
        for workers in opts.extract_workers:
            label = f"extract-{workers}"
            log(f"extract: {workers} llm worker thread(s), {opts.extract_jobs} jobs, "
                f"fake LLM at {opts.extract_latency_ms} ms")
            stack_env = {**env, "MEMORYD_LLM_WORKER_CONCURRENCY": str(workers)}
            with Stack(label, workdir / label, workdir, opts.embedder,
                       extra_env=stack_env) as stack:
                run = _throughput(stack, opts.extract_jobs, label)
                run["llm_workers"] = workers
                runs.append(run)
                if workers == max(opts.extract_workers):
                    log("extract: enqueue and raw-ingest latency with the llm queue saturated")
                    saturated = _saturated(stack, opts.extract_jobs * 2, opts.extract_enqueue_n,
                                           opts.extract_raw_n)
                    saturated["llm_workers"] = workers
    base = runs[0]["jobs_per_s"] / runs[0]["llm_workers"]
    for run in runs:
        run["scaling_vs_linear"] = round(run["jobs_per_s"] / (base * run["llm_workers"]), 2)
    return {
        "setup": ("fake OpenAI-compatible LLM in the bench process at a fixed latency; "
                  "memoryd up subprocess; N = threads of the in-process llm-queue worker "
                  "(one process: the embedded store opens in one process only)"),
        "llm_latency_ms": opts.extract_latency_ms,
        "runs": runs,
        "saturated": saturated,
    }


def extract_rows(report: dict[str, Any]) -> list[tuple[str, float, str, str]]:
    """(metric, value, unit, note) rows for the table."""
    section = report.get("extract")
    if not section:
        return []
    ms = section["llm_latency_ms"]
    rows = [
        (f"llm extraction, {r['llm_workers']} worker thread(s), fake LLM {ms} ms",
         r["jobs_per_s"], "jobs/s", f"{r['scaling_vs_linear']:.0%} of linear")
        for r in section["runs"]
    ]
    sat = section.get("saturated")
    if sat:
        rows += [
            ("enqueue p50 / p99, idle", sat["enqueue_idle"]["p50_ms"], "ms",
             f"p99 {sat['enqueue_idle']['p99_ms']:.1f} ms"),
            ("enqueue p50 / p99, llm queue saturated", sat["enqueue_saturated"]["p50_ms"], "ms",
             f"p99 {sat['enqueue_saturated']['p99_ms']:.1f} ms"),
            ("raw ingest enqueue → done p50, idle", sat["raw_ingest_idle"]["p50_ms"], "ms",
             f"p99 {sat['raw_ingest_idle']['p99_ms']:.1f} ms"),
            ("raw ingest enqueue → done p50, llm saturated",
             sat["raw_ingest_saturated"]["p50_ms"], "ms",
             f"p99 {sat['raw_ingest_saturated']['p99_ms']:.1f} ms; "
             f"{sat['llm_jobs_unfinished_when_measured']} llm jobs still pending after"),
        ]
    return rows

