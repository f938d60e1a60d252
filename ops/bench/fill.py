"""Bench data: LoCoMo texts, the embedded text pool (cached on disk) and the bulk fill.

The bulk fill writes straight into the Qdrant Edge shard of a data directory before any
stack opens it: 100k memories through the HTTP API would take hours of embedding, and the
search phase measures reads, not writes. The points are the ones the write path would
produce (real `MemoryRecord` payloads, deterministic ids, keyword sparse vectors).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd.embeddings import Embedder
from memoryd.platform.settings import Settings
from memoryd.records.identity import content_hash, memory_id
from memoryd.records.models import MemoryRecord, MemoryType, Owner, Scope, Source
from memoryd.retrieval.keywords import keyword_vector
from memoryd.store import PointData
from memoryd.store.edge import EdgeStore

Vectors = npt.NDArray[np.float32]

TENANT = "default"  # the tenant the embedded stack's generated API key maps to
POOL_BATCH = 64
UPSERT_BATCH = 500
# Points between the fill's flushes: the shard's write-ahead log keeps every update until a
# flush, so a million points unflushed held ~3 GB of log on disk and mapped in the bench.
FLUSH_EVERY = 50_000
NOISE_SIGMA = 0.02
FILL_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
YEAR_S = 365 * 24 * 3600
_SESSION = re.compile(r"session_(\d+)")
DEFAULT_LOCOMO_HINT = "../shared/bench/locomo10.json"


def locomo_or_exit(path: Path) -> Locomo:
    """`load_locomo` for a bench command: a missing file ends it with `missing_locomo`'s
    message on stderr and exit status 2, as a bad option does, not a traceback."""
    try:
        return load_locomo(path)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


@dataclass(frozen=True)
class Locomo:
    turns: list[str]  # "<speaker>: <text>", file order, distinct
    questions: list[str]  # distinct question texts, file order


def missing_locomo(path: Path) -> str:
    """What a bench says when its LoCoMo file is not there: where it looked, where the data
    comes from, and how to point the bench at it. LoCoMo is CC BY-NC, so the repository does
    not ship it (the smoke tests run on generated data of its shape instead)."""
    return (
        f"LoCoMo data not found at {path}. The benchmarks read LoCoMo's locomo10.json "
        "(CC BY-NC, not shipped with memoryd; github.com/snap-research/LoCoMo, "
        "data/locomo10.json): pass --locomo PATH, or place it at "
        f"{DEFAULT_LOCOMO_HINT} beside the checkout."
    )


def load_locomo(path: Path) -> Locomo:
    """The bench texts of a LoCoMo file; FileNotFoundError (`missing_locomo`) without one."""
    if not path.is_file():
        raise FileNotFoundError(missing_locomo(path))
    samples: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    turns: list[str] = []
    questions: list[str] = []
    for sample in samples:
        conversation: dict[str, Any] = sample["conversation"]
        # Only the session lists: conv-26 has more `session_N_date_time` keys than sessions.
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conversation
            if (m := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
        )
        for _, key in sessions:
            for turn in conversation[key]:
                text = str(turn.get("text", "")).strip()
                if text:
                    turns.append(f"{turn['speaker']}: {text}")
        for qa in sample.get("qa", []):
            question = str(qa.get("question", "")).strip()
            if question:
                questions.append(question)
    return Locomo(turns=list(dict.fromkeys(turns)), questions=list(dict.fromkeys(questions)))


def pool_cache_path(cache_dir: Path, embedder: Embedder, texts: Sequence[str]) -> Path:
    # Keyed by the texts too, so a smaller --pool-limit never picks up the full pool's file.
    digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", embedder.name)
    return cache_dir / f"pool-{name}-{embedder.dim}d-{len(texts)}-{digest}.npy"


@dataclass(frozen=True)
class Pool:
    texts: list[str]
    vectors: Vectors
    cache_file: Path
    cached: bool
    embed_seconds: float  # 0 when read from the cache


def embed_pool(
    embedder: Embedder, texts: Sequence[str], cache_dir: Path,
    progress: Callable[[str], None] = print,
) -> Pool:
    items = list(texts)
    path = pool_cache_path(cache_dir, embedder, items)
    if path.is_file():
        loaded = np.load(path)
        if loaded.shape == (len(items), embedder.dim):
            return Pool(items, loaded.astype(np.float32, copy=False), path, True, 0.0)
        progress(f"ignoring {path.name}: shape {loaded.shape} does not match the pool")
    started = time.perf_counter()
    parts: list[Vectors] = []
    for start in range(0, len(items), POOL_BATCH):
        parts.append(embedder.embed_documents(items[start:start + POOL_BATCH]))
        done = min(start + POOL_BATCH, len(items))
        if (start // POOL_BATCH) % 20 == 19 or done == len(items):
            rate = done / max(time.perf_counter() - started, 1e-9)
            progress(f"  embedded {done}/{len(items)} pool texts ({rate:.0f} texts/s)")
    vectors = np.concatenate(parts).astype(np.float32, copy=False)
    seconds = time.perf_counter() - started
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        np.save(handle, vectors)
    tmp.replace(path)  # a run killed mid-write must not leave a truncated cache behind
    return Pool(items, vectors, path, False, seconds)


def user_name(index: int) -> str:
    return f"bench-user-{index:04d}"


def extra_user_name(memories: int) -> str:
    """The user filled beside the regular ones with `memories` memories of their own."""
    return f"bench-user-x{memories}"


@dataclass(frozen=True)
class FillStats:
    users: int
    per_user: int
    points: int
    seconds: float
    extra_users: tuple[int, ...] = ()  # memories of each user filled beside the regular ones

    @property
    def points_per_s(self) -> float:
        return self.points / self.seconds if self.seconds > 0 else 0.0


def _perturbed(base: Vectors, rng: np.random.Generator) -> Vectors:
    # Users draw from one pool of ~5.9k texts: without noise, points of different users (or of
    # one user, when per_user exceeds the pool) would share exact vectors, which real
    # memories never do.
    noisy = base + rng.normal(0.0, NOISE_SIGMA, base.shape).astype(np.float32)
    norms = np.linalg.norm(noisy, axis=1, keepdims=True)
    out: Vectors = (noisy / norms).astype(np.float32)
    return out


def user_points(
    user_id: str, pool: Pool, per_user: int, embedding_model: str, rng: np.random.Generator
) -> list[PointData]:
    size = len(pool.texts)
    picks = rng.choice(size, per_user, replace=per_user > size)
    vectors = _perturbed(pool.vectors[picks], rng)
    offsets = np.sort(rng.uniform(0, YEAR_S, per_user))
    points = []
    for i, (pick, offset) in enumerate(zip(picks.tolist(), offsets.tolist(), strict=True)):
        content = f"{pool.texts[pick]} (#{i})"
        chash = content_hash(content)
        when = FILL_EPOCH + timedelta(seconds=offset)
        record = MemoryRecord(
            id=memory_id(TENANT, user_id, Scope.GLOBAL.value, None, chash),
            tenant_id=TENANT, user_id=user_id, content=content, content_hash=chash,
            type=MemoryType.EPISODIC, scope=Scope.GLOBAL, thread_id=f"thread-{i // 25:03d}",
            source=Source.INTERACTION, occurred_at=when, created_at=when, updated_at=when,
            embedding_model=embedding_model, metadata={"role": "user"},
        )
        points.append(PointData(
            record.id, record.to_payload(), vectors[i].tolist(), keyword_vector(content)
        ))
    return points


def bulk_fill(
    settings: Settings, embedding_model: str, pool: Pool, users: int, per_user: int, seed: int,
    progress: Callable[[str], None] = print, extra_users: Sequence[int] = (),
) -> FillStats:
    """Write `users` x `per_user` memories into the data dir's shard, then one user of each
    count in `extra_users` (`extra_user_name`); the shard is closed after. The regular users'
    points do not depend on `extra_users`.

    The Edge shard locks its files, so this must run while no stack has the data dir open.
    """
    if pool.vectors.shape[1] <= 0:
        raise ValueError("the pool has no vectors")
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    store = EdgeStore(settings.edge_path, settings.collection)
    unflushed = 0
    try:
        store.ensure_schema(embedding_model, int(pool.vectors.shape[1]))
        for index in range(users):
            user_id = user_name(index)
            owner = Owner(tenant_id=TENANT, user_id=user_id)
            points = user_points(user_id, pool, per_user, embedding_model, rng)
            for start in range(0, len(points), UPSERT_BATCH):
                store.upsert(owner, points[start:start + UPSERT_BATCH])
            unflushed += len(points)
            if unflushed >= FLUSH_EVERY:
                store.flush()
                unflushed = 0
            if users >= 20 and (index + 1) % max(users // 5, 1) == 0:
                rate = (index + 1) * per_user / (time.perf_counter() - started)
                progress(f"  filled {index + 1}/{users} users ({rate:.0f} points/s)")
        for count in extra_users:
            user_id = extra_user_name(count)
            owner = Owner(tenant_id=TENANT, user_id=user_id)
            points = user_points(user_id, pool, count, embedding_model, rng)
            for start in range(0, len(points), UPSERT_BATCH):
                store.upsert(owner, points[start:start + UPSERT_BATCH])
    finally:
        store.close()  # flushes, and frees the shard lock for the stack
    return FillStats(users, per_user, users * per_user + sum(extra_users),
                     time.perf_counter() - started, tuple(extra_users))


FILL_RECORD = "bench-fill.json"  # in the data dir: what the fill wrote, for --reuse-data


def write_fill_record(data_dir: Path, stats: FillStats, seed: int, embedder: str) -> None:
    record = {"users": stats.users, "per_user": stats.per_user, "points": stats.points,
              "seconds": round(stats.seconds, 2), "points_per_s": round(stats.points_per_s, 0),
              "extra_users": list(stats.extra_users), "seed": seed, "embedder": embedder}
    (data_dir / FILL_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def read_fill_record(data_dir: Path) -> dict[str, Any]:
    """What an earlier fill of `data_dir` wrote; FileNotFoundError when it was not a bench fill."""
    path = data_dir / FILL_RECORD
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: --reuse-data takes the search-<size> data "
                                "dir of a run with --keep-data")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
