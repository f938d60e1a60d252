"""The extraction phase: LLM extraction throughput against a fake model with a fixed latency,
and what saturated extraction does to enqueue latency and to raw ingestion.

Setup, and why: the fake LLM (shared/testing/fake_llm.py) runs in this process and answers
every request after `latency_ms`. Each job is a distinct user's interaction that yields one
ADD (embedded, dedup-checked, written, audited); each worker count gets a fresh stack.

`--extract-mode processes` (the default) is server mode: N `memoryd worker --queues llm
--concurrency 1` processes behind `memoryd serve`, on the Qdrant REST stand-in
(ops/bench/extract_procs.py). `--extract-mode threads` is the embedded stack (`memoryd up`)
with N threads on its llm worker: the embedded Qdrant Edge store opens in one process only.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Protocol

from memoryd.testing.fake_llm import Behaviour, FakeLLM, Received, json_reply, users_said
from ops.bench.common import Options, latency_summary
from ops.bench.extract_procs import ProcStack
from ops.bench.writes import enqueue, finished_at, wait_all
from ops.chaos.common import FakeOpenAIEmbeddings
from ops.stack import CpuMeter, Stack, log

MODEL = "bench-extractor"
# --extract-embedder's default: the local fake of a hosted OpenAI-compatible embedding API
# (ops/chaos/common.py). A local model would be loaded by every worker process and its CPU
# would compete with the very processes whose scaling is measured, on 2 cores.
HOSTED_FAKE = "hosted-fake"


class Target(Protocol):
    """What a run needs of a stack: `Stack` (embedded) and `ProcStack` (server mode)."""

    def client(self, timeout_s: float = 60.0) -> Any: ...

    def cpu_meter(self) -> CpuMeter: ...


def answer(request: Received) -> Behaviour:
    """One ADD of what the user said: every job writes one new memory."""
    said = users_said(request)
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


def _throughput(stack: Target, jobs: int, tag: str, workers: int) -> dict[str, Any]:
    with stack.client() as client:
        # Two jobs per worker, so every worker process has run its slow first task (opening
        # the store and the embedder's client) before the clock starts.
        warm = [enqueue(client, llm_interaction(f"{tag}-warm-{i}", i))
                for i in range(2 * workers)]
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


def _saturated(stack: Target, jobs: int, enqueue_n: int, raw_n: int) -> dict[str, Any]:
    """Enqueue latency and raw-ingest latency idle, then with the llm queue saturated."""
    with stack.client() as client:
        _raw_latency(client, "warm", 1)  # the memory worker's first task is not timed
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


def _stack(opts: Options, workdir: Path, label: str, workers: int,
           env: dict[str, str]) -> Stack | ProcStack:
    if opts.extract_mode == "threads":
        return Stack(label, workdir / label, workdir, env["MEMORYD_EMBEDDER"],
                     extra_env={**env, "MEMORYD_LLM_WORKER_CONCURRENCY": str(workers)})
    settings: dict[str, object] = {k.removeprefix("MEMORYD_").lower(): v for k, v in env.items()}
    return ProcStack(label, workdir / label, workers, settings)


SETUP = {
    "processes": ("server mode: N `memoryd worker --queues llm --concurrency 1` processes, "
                  "one `memoryd worker --queues memory`, `memoryd serve`, a Redis and the "
                  "Qdrant REST stand-in (qdrant-client local mode behind Qdrant's REST API, "
                  "one Python process serving one request at a time) as separate processes"),
    "threads": ("embedded: `memoryd up` subprocess; N = threads of the in-process llm-queue "
                "worker (one process: the embedded store opens in one process only)"),
}


def run_extract_phase(opts: Options, workdir: Path) -> dict[str, Any]:
    latency_s = opts.extract_latency_ms / 1000.0
    unit = "process(es)" if opts.extract_mode == "processes" else "thread(s)"
    runs = []
    saturated: dict[str, Any] | None = None
    hosted = opts.extract_embedder == HOSTED_FAKE
    with contextlib.ExitStack() as cleanup, FakeLLM(latency_s=latency_s) as fake:
        embeddings = FakeOpenAIEmbeddings().start() if hosted else None
        if embeddings is not None:
            cleanup.callback(embeddings.stop)
        fake.responder = answer
        env = {"MEMORYD_LLM_PROVIDER": "openai", "MEMORYD_LLM_BASE_URL": fake.openai_url,
               "MEMORYD_LLM_MODEL": MODEL, "MEMORYD_LLM_TIMEOUT_S": "30",
               "MEMORYD_EMBEDDER": opts.extract_embedder}
        if embeddings is not None:
            env.update(MEMORYD_EMBEDDER="openai:fake-embed",
                       MEMORYD_OPENAI_BASE_URL=embeddings.base_url)
        for workers in opts.extract_workers:
            label = f"extract-{workers}"
            log(f"extract: {workers} llm worker {unit}, {opts.extract_jobs} jobs, "
                f"fake LLM at {opts.extract_latency_ms} ms")
            with _stack(opts, workdir, label, workers, env) as stack:
                run = _throughput(stack, opts.extract_jobs, label, workers)
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
        # What a worker could do if only the model's latency held it up.
        run["of_latency_bound"] = round(run["jobs_per_s"] * latency_s / run["llm_workers"], 2)
    return {
        "mode": opts.extract_mode,
        "worker_unit": unit,
        "embedder": ("fake hosted OpenAI-compatible embeddings (64-d) in the bench process"
                     if hosted else opts.extract_embedder),
        "setup": SETUP[opts.extract_mode] + "; fake OpenAI-compatible LLM in the bench "
                 "process at a fixed latency",
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
    unit = section.get("worker_unit", "thread(s)")
    rows = [
        (f"llm extraction, {r['llm_workers']} worker {unit}, fake LLM {ms} ms",
         r["jobs_per_s"], "jobs/s",
         f"{r['scaling_vs_linear']:.0%} of linear{_cores_note(r['cpu'])}")
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


def _cores_note(cpu: dict[str, float]) -> str:
    if "facade_cores" not in cpu:
        return ""
    return (f"; cores: Qdrant stand-in {cpu['facade_cores']:.2f}, llm workers "
            f"{cpu['llm_workers_cores']:.2f}, other {cpu['other_cores']:.2f}")
