"""Re-embedding with no downtime: build the next generation's collection, then switch.

1. `start` (gateway): one re-embedding at a time (a Redis lock), a job, the first task.
2. `begin` (task): the target collection `<collection>_g<N>`, the fence starts recording
   what writes touch, then the first batch.
3. `copy_batch` (one task per batch, each enqueuing the next): a page of points in id
   order from the live collection, their vectors for the target model, written to the
   target. A vector is reused, not recomputed, when the live collection was built by the
   target model, or when the previous generation (kept as a donor) was and holds the point
   with the same content hash: re-embedding e5 → use → e5 embeds only what changed.
4. `switch` (task): replays the ids written meanwhile until few are left, closes the write
   fence, waits for writes in flight, replays the rest, moves the pointer (and the
   alias), reopens the fence. Searches never stop: each request keeps the generation it
   started with, and the old collection stays open as the next re-embedding's donor.

Progress is in the job (`GET /v1/jobs/{id}` → `progress`): `phase` (copying, catching_up,
switching, done), `done` / `total` points, `reused` and `embedded` vectors.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from pydantic import BaseModel
from redis.exceptions import RedisError

from memoryd.embeddings import Embedder, make_embedder
from memoryd.embeddings.factory import canonical_spec
from memoryd.embeddings.parts import embed_memories, split_parts
from memoryd.extraction.topics import fact_reading
from memoryd.index.generations import IndexRecord, IndexRouter, PhysicalIndex
from memoryd.index.write_fence import WriteFence, parse_member
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.names import TaskName
from memoryd.jobs.send import send
from memoryd.platform.errors import (
    ConfigurationError,
    Conflict,
    EmbedderNotAllowed,
    InvalidInput,
    QueueUnavailable,
    TransientError,
)
from memoryd.platform.logs import get_logger
from memoryd.platform.script_share import cjk_share
from memoryd.platform.settings import Settings
from memoryd.records.models import JobStatus, Owner, inferred_kind
from memoryd.records.schemas import JobAccepted
from memoryd.retrieval.keywords import PASSAGES_FIELD, keyword_fields
from memoryd.store import PointData, StoredPoint

log = get_logger("memoryd.reindex")

LOCK = "memoryd:reindex:lock"
_LOCK_TTL_S = 3600
# A point's single vector and its parts (None: a short memory, or a store without parts).
_Vectors = tuple[list[float], list[list[float]] | None]
# Replay rounds run with writes flowing until this few ids are left; the last round runs
# with the fence closed, so it should be short.
_CLOSE_AT = 64
_MAX_ROUNDS = 20


class ReindexStep(BaseModel):
    """A task's argument: where the copy is, and what it has done."""

    job_id: str
    tenant_id: str
    request_id: str | None = None
    generation: int
    source: PhysicalIndex
    target: PhysicalIndex
    donors: list[PhysicalIndex]
    batch_size: int
    offset: str | None = None
    done: int = 0
    total: int = 0
    reused: int = 0
    embedded: int = 0


@dataclass(frozen=True)
class Reindexing:
    """What a re-embedding uses: the index and its write fence, the job store for progress,
    Redis for the re-embedding lock, Celery for the next step, and the settings."""

    index: IndexRouter
    fence: WriteFence
    jobs: JobStore
    redis: redis.Redis
    celery: Celery
    settings: Settings


def allowed_embedders(settings: Settings) -> list[str]:
    """What a re-embedding may switch to: the configured embedder, and the specs listed in
    `reindex_embedders`, each in its canonical spelling."""
    listed = (settings.reindex_embedders or "").split(",")
    allowed = [canonical_spec(settings.embedder)]
    allowed += [canonical_spec(s) for s in listed if s.strip()]
    return list(dict.fromkeys(allowed))


def check_allowed(settings: Settings, spec: str) -> None:
    """Refuse an embedder the deployment does not list, before anything is built: a spec
    names a model path, a URL's model or a server's model, so building one first would
    touch the filesystem or the network on the caller's say-so."""
    allowed = allowed_embedders(settings)
    if canonical_spec(spec) not in allowed:
        raise EmbedderNotAllowed(
            f"embedder: {spec.strip()[:80]!r} is not one this deployment re-embeds with; "
            f"allowed: {', '.join(allowed)} (MEMORYD_REINDEX_EMBEDDERS)", field="embedder")


def start(
    rx: Reindexing, tenant: str, request_id: str | None, spec: str, batch_size: int
) -> JobAccepted:
    check_allowed(rx.settings, spec)
    try:
        embedder = _embedder(rx, spec)
    except ConfigurationError as exc:
        raise InvalidInput(f"embedder: {exc.message}", field="embedder") from exc
    job_id = str(uuid.uuid4())
    if not rx.redis.set(LOCK, job_id, nx=True, ex=_LOCK_TTL_S):
        running = rx.redis.get(LOCK)
        raise Conflict(
            f"a re-embedding is already running (job {_text(running)})",
            field="embedder", code="reindex_running",
        )
    try:
        rx.jobs.create(job_id, tenant, TaskName.REINDEX.value, request_id)
        rx.jobs.set_progress(job_id, {"phase": "queued", "embedder": embedder.name,
                                      "done": 0, "total": 0})
        _send(rx, TaskName.REINDEX, {"command": {
            "job_id": job_id, "tenant_id": tenant, "request_id": request_id,
            "embedder": embedder.name, "batch_size": batch_size,
        }})
    except (OperationalError, RedisError, OSError) as exc:
        rx.redis.delete(LOCK)
        raise QueueUnavailable(f"the queue is unreachable: {exc}") from exc
    return JobAccepted(job_id=job_id, status=JobStatus.QUEUED)


def status(rx: Reindexing) -> dict[str, Any]:
    record = rx.index.view().record
    running = rx.redis.get(LOCK)
    alias = rx.index.alias()
    return {
        **record.model_dump(mode="json", exclude={"previous"}),
        "running_job": _text(running) if running else None,
        "alias": alias[0] if alias else None, "alias_target": alias[1] if alias else None,
    }


def begin(rx: Reindexing, args: dict[str, Any]) -> None:
    job_id = str(args["job_id"])
    if rx.jobs.begin(job_id) is not None:
        return  # a redelivered start of a finished job
    index = rx.index
    record = index.read_record() or index.view().record
    check_allowed(rx.settings, str(args["embedder"]))  # a task may come from anyone on Redis
    target_embedder = _embedder(rx, str(args["embedder"]))
    generation = record.generation + 1
    target = PhysicalIndex(collection=f"{index.home.collection}_g{generation}",
                           embedder=target_embedder.name, dim=target_embedder.dim)
    # A failed earlier attempt at this generation may have left a partial collection.
    index.discard(target.collection)
    index.physical(target.collection, target.dim)
    rx.fence.start_copying(generation)
    source = PhysicalIndex(collection=record.collection, embedder=record.embedder,
                           dim=record.dim)
    step = ReindexStep(
        job_id=job_id, tenant_id=str(args["tenant_id"]), request_id=args.get("request_id"),
        generation=generation, source=source, target=target,
        donors=[source, *record.previous], batch_size=int(args["batch_size"]),
        total=index.physical(source.collection).count_all(),
    )
    log.info("reindex_started", source=source.collection, target=target.collection,
             embedder=target.embedder, total=step.total)
    _progress(rx, step, "copying")
    _send(rx, TaskName.REINDEX_BATCH, {"step": step.model_dump(mode="json")})


def copy_batch(rx: Reindexing, args: dict[str, Any]) -> None:
    step = ReindexStep.model_validate(args)
    if not _still_ours(rx, step.job_id):
        return
    source = rx.index.physical(step.source.collection)
    points, next_offset = source.scan(step.offset, step.batch_size, with_vectors=True)
    reused, embedded = _copy(rx, step, points)
    step.done += len(points)
    step.reused += reused
    step.embedded += embedded
    step.offset = next_offset
    step.total = max(step.total, step.done)
    rx.redis.expire(LOCK, _LOCK_TTL_S)
    if next_offset is not None:
        _progress(rx, step, "copying")
        _send(rx, TaskName.REINDEX_BATCH, {"step": step.model_dump(mode="json")})
        return
    _progress(rx, step, "catching_up")
    _send(rx, TaskName.REINDEX_SWITCH, {"step": step.model_dump(mode="json")})


def switch(rx: Reindexing, args: dict[str, Any]) -> dict[str, Any]:
    step = ReindexStep.model_validate(args)
    if not _still_ours(rx, step.job_id):
        return {}
    fence = rx.fence
    replayed = 0
    for _ in range(_MAX_ROUNDS):
        if fence.dirty_count() <= _CLOSE_AT:
            break
        replayed += _replay(rx, step, fence.pop_dirty(512))
    _progress(rx, step, "switching")
    if not fence.close(timeout_s=rx.settings.user_lock_wait_s):
        raise TransientError("writes did not pause for the switch; trying again")
    switched = False
    try:
        while members := fence.pop_dirty(512):
            try:
                replayed += _replay(rx, step, members)
            except BaseException:
                fence.push_dirty(members)
                raise
        index = rx.index
        old = index.read_record() or index.view().record
        keep = PhysicalIndex(collection=old.collection, embedder=old.embedder, dim=old.dim)
        record = IndexRecord(collection=step.target.collection, embedder=step.target.embedder,
                             dim=step.target.dim, generation=step.generation, previous=[keep])
        index.commit(record)
        fence.finish(step.generation)
        switched = True
    finally:
        if not switched:
            fence.reopen()
    # Older generations than the one kept as a donor are no longer read by anyone.
    for gone in old.previous:
        if gone.collection not in (keep.collection, record.collection):
            index.discard(gone.collection)
    result = {"generation": step.generation, "collection": record.collection,
              "embedder": record.embedder, "dim": record.dim, "points": step.done,
              "reused": step.reused, "embedded": step.embedded, "replayed": replayed}
    _progress(rx, step, "done")
    rx.jobs.mark_succeeded(step.job_id, result)
    _release(rx, step.job_id)
    log.info("reindex_switched", **result)
    return result


def fail(rx: Reindexing, job_id: str, error: dict[str, Any]) -> None:
    """A step failed for good: stop recording writes, free the lock, fail the job."""
    rx.fence.finish(None)
    rx.jobs.mark_failed(job_id, error)
    _release(rx, job_id)


# ---- copying --------------------------------------------------------------------------


def _copy(rx: Reindexing, step: ReindexStep, points: Sequence[StoredPoint]) -> tuple[int, int]:
    """Write `points` (from the source) to the target; returns (reused, embedded)."""
    if not points:
        return 0, 0
    target = rx.index.physical(step.target.collection)
    vectors: dict[str, _Vectors] = {}
    if step.source.embedder == step.target.embedder:
        vectors = {p.id: (p.dense, p.parts) for p in points if p.dense is not None}
    else:
        vectors = _from_donors(rx, step, points)
    # A long memory from a store without parts is embedded again, in parts, and so is a
    # fact written before facts were read by their topics (`extraction.topics`).
    in_parts = rx.settings.long_memory_parts and target.supports_parts
    readings = {p.id: stored_reading(p.payload) for p in points}
    missing = [p for p in points if p.id not in vectors
               or (in_parts and vectors[p.id][1] is None
                   and (readings[p.id] is not None
                        or len(split_parts(str(p.payload.get("content", "")))) > 1))]
    if missing:
        model = _embedder(rx, step.target.embedder)
        fresh = embed_memories(model, [str(p.payload.get("content", "")) for p in missing],
                               in_parts, [readings[p.id] for p in missing])
        vectors.update({p.id: (v.dense.tolist(), v.parts_list())
                        for p, v in zip(missing, fresh, strict=True)})
    for owner, group in _by_owner(points).items():
        # Points written before memories carried their language, or their passages' keyword
        # counts, gain them here.
        points_data = []
        for p in group:
            content = str(p.payload.get("content", ""))
            sparse, fields = keyword_fields(content)
            payload = {k: v for k, v in p.payload.items() if k != PASSAGES_FIELD}
            points_data.append(PointData(
                p.id, {**payload, "embedding_model": step.target.embedder,
                       "cjk_share": round(cjk_share(content), 3), **fields},
                vectors[p.id][0], sparse, vectors[p.id][1]))
        target.upsert(owner, points_data)
    return len(points) - len(missing), len(missing)


def stored_reading(payload: dict[str, Any]) -> str | None:
    """The topic reading of a stored fact (`extraction.topics`), a fact stored before kinds
    existed included; None for any other memory."""
    kind = payload.get("kind") or inferred_kind(payload.get("source"), payload.get("type"))
    return fact_reading(kind, str(payload.get("content", "")))


def _from_donors(
    rx: Reindexing, step: ReindexStep, points: Sequence[StoredPoint]
) -> dict[str, _Vectors]:
    """Vectors of the target model already stored for the same id and the same text."""
    found: dict[str, _Vectors] = {}
    for donor in step.donors:
        if donor.embedder != step.target.embedder or donor.dim != step.target.dim:
            continue
        store = rx.index.physical(donor.collection)
        for owner, group in _by_owner([p for p in points if p.id not in found]).items():
            hashes = {p.id: p.payload.get("content_hash") for p in group}
            for old in store.get(owner, list(hashes), with_vectors=True):
                if old.dense is not None and old.payload.get("content_hash") == hashes[old.id]:
                    found[old.id] = (old.dense, old.parts)
    return found


def _replay(rx: Reindexing, step: ReindexStep, members: Sequence[str]) -> int:
    """Copy again what writes touched during the copy; what they deleted goes too."""
    wanted: dict[Owner, list[str]] = defaultdict(list)
    for member in members:
        owner, memory_id = parse_member(member)
        wanted[owner].append(memory_id)
    source = rx.index.physical(step.source.collection)
    target = rx.index.physical(step.target.collection)
    for owner, ids in wanted.items():
        ids = list(dict.fromkeys(ids))
        found = source.get(owner, ids, with_vectors=True)
        _copy(rx, step, found)
        gone = set(ids) - {p.id for p in found}
        if gone:
            target.delete(owner, sorted(gone))
    return len(members)


def _by_owner(points: Sequence[StoredPoint]) -> dict[Owner, list[StoredPoint]]:
    groups: dict[Owner, list[StoredPoint]] = defaultdict(list)
    for p in points:
        groups[Owner(tenant_id=str(p.payload["tenant_id"]),
                     user_id=str(p.payload["user_id"]))].append(p)
    return groups


# ---- bookkeeping ----------------------------------------------------------------------


def _embedder(rx: Reindexing, spec: str) -> Embedder:
    return make_embedder(spec, rx.settings)


def _progress(rx: Reindexing, step: ReindexStep, phase: str) -> None:
    rx.jobs.set_progress(step.job_id, {
        "phase": phase, "done": step.done, "total": step.total, "reused": step.reused,
        "embedded": step.embedded, "embedder": step.target.embedder,
        "collection": step.target.collection, "generation": step.generation,
    })


def _still_ours(rx: Reindexing, job_id: str) -> bool:
    """A step of a job that no longer holds the lock (failed, or finished) does nothing."""
    return _text(rx.redis.get(LOCK)) == job_id


def _release(rx: Reindexing, job_id: str) -> None:
    if _still_ours(rx, job_id):
        rx.redis.delete(LOCK)


def _send(rx: Reindexing, task: TaskName, kwargs: dict[str, Any]) -> None:
    send(rx.celery, task, kwargs)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


__all__ = ["begin", "copy_batch", "fail", "start", "status", "switch"]
