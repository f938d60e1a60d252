"""The write path: dedup, conflict-free writes under a per-user lock, audit.

Every function here runs in a worker. Ids are deterministic and each point
records the job that wrote it, so a retried or redelivered task finds its own
earlier writes and reports them as its own instead of writing twice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from redis import Redis

from shared.embeddings.parts import MemoryVector, embed_memories
from shared.extraction.interaction import candidates_for
from shared.extraction.redaction import redact
from shared.index.generations import View
from shared.jobs.forgetting import ForgetSpan, record_forget, refuse_forgotten, scrub_jobs
from shared.memories.erasure import Erasure, after_forget
from shared.memories.locks import user_lock
from shared.memories.retention import live_conditions
from shared.memories.versions import version_chain
from shared.platform import failpoints
from shared.platform.errors import NotFound
from shared.platform.settings import Settings
from shared.records.candidate import Candidate
from shared.records.commands import (
    DeleteCommand,
    ForgetCommand,
    IngestCommand,
    SaveCommand,
    UpdateCommand,
)
from shared.records.identity import content_hash, event_id, keyed_memory_id, memory_id
from shared.records.models import (
    AuditEvent,
    AuditKind,
    DuplicateKind,
    MemoryRecord,
    MemoryType,
    Owner,
    SaveOutcome,
    Scope,
    Source,
    utcnow,
)
from shared.records.schemas import MemoryView, SaveResult
from shared.retrieval.keywords import keyword_vector
from shared.store import PointData
from shared.store.conditions import Between, Condition, Match


@dataclass
class WriteResult:
    outcome: SaveOutcome
    memory: MemoryRecord
    duplicate_of: str | None = None
    duplicate_kind: DuplicateKind | None = None

    def to_save_result(self) -> SaveResult:
        if self.outcome is SaveOutcome.DUPLICATE:
            return SaveResult(outcome=self.outcome, duplicate_of=self.duplicate_of,
                              duplicate_kind=self.duplicate_kind)
        return SaveResult(outcome=self.outcome, memory=MemoryView.of(self.memory))


# Measured on pairs of distinct facts ("我住在北京" / "我住在上海", "my sister / my brother
# lives in Lisbon") and of paraphrases: distinct facts reach 0.971 under e5-small and 0.921
# under USE, paraphrases go down to 0.972 and 0.907. A missed duplicate costs a redundant
# memory; a false one loses a memory, so the bar sits above the highest distinct pair.
DEFAULT_DEDUP_THRESHOLD = {"e5-small": 0.98, "use": 0.95}
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def dedup_threshold(settings_value: float | None, embedder: str) -> float:
    if settings_value is not None:
        return settings_value
    return DEFAULT_DEDUP_THRESHOLD.get(embedder, 0.95)


def same_numbers(a: str, b: str) -> bool:
    """Two texts that state different numbers are different facts, however close in meaning."""
    return set(_NUMBER.findall(a)) == set(_NUMBER.findall(b))


def range_conditions(scope: Scope, project: str | None) -> list[Condition]:
    """The dedup range: one scope, one project."""
    conds: list[Condition] = [Match("scope", scope.value)]
    if project is not None:
        conds.append(Match("project", project))
    return conds


class MemoryWriter:
    """Every write of one task, on the index view it resolved inside a write region: read
    from its store, written through its fenced writes, embedded by its model, audited in its
    trail; under the user's lock in `redis`, forgets followed by `erasure`."""

    def __init__(self, view: View, redis: Redis, settings: Settings, erasure: Erasure) -> None:
        self.store = view.store
        self.writes = view.writes
        self.audit = view.audit
        self.embedder = view.embedder
        self.redis = redis
        self.settings = settings
        self.erasure = erasure

    # ---- entry points (one per task) -----------------------------------------

    def ingest(self, cmd: IngestCommand, job_id: str) -> dict[str, Any]:
        candidates = candidates_for(cmd)
        results = self.write(cmd.owner, cmd.scope, cmd.project, candidates, job_id)
        return with_dropped(summarize(results, cmd.extract.value), cmd)

    def save(self, cmd: SaveCommand, job_id: str) -> dict[str, Any]:
        candidate = Candidate(
            content=cmd.content.strip(), type=cmd.type,
            occurred_at=cmd.occurred_at or cmd.received_at,
            source=cmd.source, importance=cmd.importance, tags=list(dict.fromkeys(cmd.tags)),
            key=cmd.key, thread_id=cmd.thread_id, metadata=dict(cmd.metadata or {}),
            expires_at=cmd.expires_at,
        )
        [result] = self.write(cmd.owner, cmd.scope, cmd.project, [candidate], job_id)
        return result.to_save_result().to_json()

    def update(self, cmd: UpdateCommand, job_id: str) -> dict[str, Any]:
        owner = cmd.owner
        with self.locked(owner):
            found = self.store.get(owner, [cmd.memory_id], with_vectors=True)
            if not found:
                raise NotFound(f"no memory {cmd.memory_id}", field="memory_id")
            point = found[0]
            before = MemoryRecord.from_payload(point.id, point.payload)
            changes = cmd.changes.model_dump(exclude_unset=True)
            if "content" in changes:
                changes["content"] = redact(changes["content"].strip())
                changes["content_hash"] = content_hash(changes["content"])
            if "tags" in changes:
                changes["tags"] = list(dict.fromkeys(changes["tags"]))
            after = before.model_copy(update={**changes, "updated_at": utcnow(), "job_id": job_id})
            after = MemoryRecord.model_validate(after.model_dump())
            # An upsert replaces every vector of the point: unchanged text keeps its own.
            dense, parts = point.dense, point.parts
            if after.content != before.content or dense is None:
                [vector] = self.embed([after.content])
                dense, parts = vector.dense.tolist(), vector.parts_list()
            sparse = keyword_vector(after.content)
            self.writes.upsert(owner, [PointData(after.id, after.to_payload(), dense, sparse,
                                                 parts)])
            self._audit(owner, after.id, AuditKind.UPDATE, before.content, after.content, job_id)
        return {"outcome": "updated", "memory": MemoryView.of(after).model_dump(mode="json")}

    def delete(self, cmd: DeleteCommand, job_id: str) -> dict[str, Any]:
        found = self.delete_versions(cmd.owner, cmd.memory_id, job_id)
        return {"deleted": 1 if found else 0, "ids": [cmd.memory_id] if found else []}

    def delete_versions(
        self, owner: Owner, memory_id: str, job_id: str, actor: str | None = None
    ) -> list[str]:
        """Forget a memory and every version of it (shared/memories/conflicts.py), their
        content in the trail too; the ids deleted, none when the memory is gone already."""
        span = ForgetSpan()
        contents: list[str] = []
        with self.locked(owner):
            ids = version_chain(self.store, owner, memory_id)
            if ids:
                contents = [str(p.payload.get("content") or "")
                            for p in self.store.get(owner, ids)]
                span = ForgetSpan(ids=ids)
                record_forget(self.redis, owner, span)
                self.writes.delete(owner, ids)
                self.audit.erase_audit_content(owner, ids)
                for mid in ids:
                    self._audit(owner, mid, AuditKind.DELETE, None, None, job_id, actor)
        if ids:
            self.after_forget(owner, span, contents)
        return ids

    def forget(self, cmd: ForgetCommand, job_id: str) -> dict[str, Any]:
        owner = cmd.owner
        conds: list[Condition] = []
        if cmd.thread_id is not None:
            conds.append(Match("thread_id", cmd.thread_id))
        if cmd.before is not None or cmd.after is not None:
            conds.append(Between("occurred_at", lt=cmd.before, gt=cmd.after))
        span = ForgetSpan(thread_id=cmd.thread_id, before=cmd.before, after=cmd.after)
        with self.locked(owner):
            # First the epoch: a job accepted before now that waits for this lock then
            # finds the forget and writes nothing it covers (shared/jobs/forgetting.py).
            record_forget(self.redis, owner, span)
            ids = self.writes.delete_where(owner, conds)
            self.audit.erase_audit_content(owner, ids)
            self.audit.append_audit([
                AuditEvent(memory_id=i, tenant_id=owner.tenant_id, user_id=owner.user_id,
                           event=AuditKind.DELETE, job_id=job_id, actor="forget")
                for i in ids
            ])
        self.after_forget(owner, span, [])
        return {"deleted": len(ids)}

    def after_forget(self, owner: Owner, span: ForgetSpan, contents: list[str]) -> None:
        """The texts leave the user's job records now, and the disk by the erasure bound."""
        scrub_jobs(self.redis, owner, span, contents, self.settings.job_ttl_s)
        after_forget(self.erasure)

    # ---- decisions an extractor made about existing memories ---------------------

    def supersede(
        self,
        owner: Owner,
        target_id: str,
        candidate: Candidate,
        vector: MemoryVector,
        job_id: str,
        actor: str | None = None,
    ) -> dict[str, Any]:
        """`candidate` becomes the new version of `target_id`; the old one stays, marked,
        out of search. Content equal to the target's only refreshes it."""
        with self.locked(owner):
            found = self.store.get(owner, [target_id])
            if not found or found[0].payload.get("state") == "superseded":
                return {"outcome": "skipped", "memory_id": target_id,
                        "reason": "the target is no longer a current memory"}
            old = MemoryRecord.from_payload(found[0].id, found[0].payload)
            refuse_forgotten(self.redis, owner, old.scope.value, old.project, [candidate], job_id)
            chash = content_hash(candidate.content)
            if chash == old.content_hash:
                return self._refresh_locked(owner, old, job_id, actor)
            now = utcnow()
            c = candidate
            record = MemoryRecord(
                id=memory_id(owner.tenant_id, owner.user_id, old.scope.value, old.project, chash),
                tenant_id=owner.tenant_id, user_id=owner.user_id, content=c.content,
                content_hash=chash, type=c.type, category=c.category, scope=old.scope,
                project=old.project, thread_id=c.thread_id, tags=old.tags,
                importance=c.importance, confidence=c.confidence, source=c.source,
                occurred_at=c.occurred_at, created_at=now, updated_at=now,
                embedding_model=self.embedder.name, job_id=job_id, metadata=c.metadata,
                supersedes=old.id,
            )
            self.writes.upsert(owner, [PointData(
                record.id, record.to_payload(), vector.dense.tolist(),
                keyword_vector(record.content), vector.parts_list())])
            self.writes.set_payload(owner, [old.id], old.payload_changes(superseded_by=record.id))
            self._audit(owner, record.id, AuditKind.UPDATE, old.content, record.content, job_id,
                        actor)
        return {"outcome": "updated", "memory_id": record.id, "supersedes": old.id,
                "content": record.content}

    def refresh(
        self, owner: Owner, target: MemoryRecord, job_id: str, actor: str | None = None
    ) -> dict[str, Any]:
        """The memory was said again: it stays as it is, seen now."""
        with self.locked(owner):
            return self._refresh_locked(owner, target, job_id, actor)

    def _refresh_locked(
        self, owner: Owner, target: MemoryRecord, job_id: str, actor: str | None
    ) -> dict[str, Any]:
        self.writes.set_payload(owner, [target.id], target.payload_changes(updated_at=utcnow()))
        self._audit(owner, target.id, AuditKind.NOOP, target.content, target.content, job_id,
                    actor)
        return {"outcome": "noop", "memory_id": target.id, "content": target.content}

    def mark_conflict(self, owner: Owner, new: MemoryRecord, old: MemoryRecord) -> None:
        """`new` contradicts `old`: both stay, each pointing at the other (shown in search)."""
        with self.locked(owner):
            found = self.store.get(owner, [old.id])
            if not found:
                return
            current = MemoryRecord.from_payload(found[0].id, found[0].payload)
            self.writes.set_payload(owner, [old.id], current.payload_changes(
                conflicts_with=[*current.conflicts_with, new.id]))
            self.writes.set_payload(owner, [new.id], new.payload_changes(
                conflicts_with=[*new.conflicts_with, old.id]))

    # ---- the shared write decision --------------------------------------------

    def write(
        self,
        owner: Owner,
        scope: Scope,
        project: str | None,
        candidates: Sequence[Candidate],
        job_id: str,
        vectors: Sequence[MemoryVector] | None = None,
    ) -> list[WriteResult]:
        if not candidates:
            return []
        # Every write path ends here, so nothing is stored unredacted: explicit saves and
        # imports as well as extraction (which redacts earlier, before any LLM call).
        candidates = [replace(c, content=redact(c.content)) for c in candidates]
        # Embedding is the slow part: do it before taking the user's lock.
        if vectors is None:
            vectors = self.embed([c.content for c in candidates])
        results = []
        pending = _Pending()
        with self.locked(owner):
            refuse_forgotten(self.redis, owner, scope.value, project, candidates, job_id)
            next_seq = self._next_thread_seq(owner, {c.thread_id for c in candidates})
            for candidate, vector in zip(candidates, vectors, strict=True):
                result = self._write_one(
                    owner, scope, project, candidate, vector, job_id,
                    next_seq.get(candidate.thread_id) if candidate.thread_id else None,
                    pending,
                )
                if candidate.thread_id and result.memory.thread_seq == next_seq.get(
                    candidate.thread_id
                ):
                    next_seq[candidate.thread_id] += 1
                results.append(result)
            # One upsert and one audit append for the whole job, still under the lock.
            self.writes.upsert(owner, pending.points)
            self.audit.append_audit(pending.events)
        return results

    def _next_thread_seq(self, owner: Owner, threads: set[str | None]) -> dict[str | None, int]:
        """Position of the next memory in each thread: retrieval finds a hit's neighbours by it.

        Read from the store under the user's lock, so it survives any Redis loss.
        """
        seqs: dict[str | None, int] = {}
        for thread in threads - {None}:
            last = self.store.find(owner, [Match("thread_id", str(thread))], limit=1,
                                      order_by="thread_seq")
            seqs[thread] = int(last[0].payload.get("thread_seq") or 0) + 1 if last else 1
        return seqs

    def _write_one(
        self,
        owner: Owner,
        scope: Scope,
        project: str | None,
        c: Candidate,
        vector: MemoryVector,
        job_id: str,
        thread_seq: int | None,
        pending: _Pending,
    ) -> WriteResult:
        chash = content_hash(c.content)
        now = utcnow()
        previous: MemoryRecord | None = None
        if c.key is not None:
            point_id = keyed_memory_id(owner.tenant_id, owner.user_id, scope.value, project, c.key)
            previous = self._stored(owner, point_id, pending)
            if previous is not None:
                if previous.job_id == job_id:
                    return self._own_earlier_write(owner, SaveOutcome.UPDATED, previous, job_id,
                                                   pending)
                if previous.content_hash == chash:
                    return self._duplicate(owner, previous, DuplicateKind.EXACT, job_id, pending)
        elif c.type is MemoryType.EPISODIC:
            # An event is its words at its time: the same words later are another event.
            point_id = event_id(owner.tenant_id, owner.user_id, scope.value, project, chash,
                                c.occurred_at.isoformat())
            earlier = self._stored(owner, point_id, pending)
            if earlier is not None:
                if earlier.job_id == job_id:
                    return self._own_earlier_write(owner, SaveOutcome.ADDED, earlier, job_id,
                                                   pending)
                return self._duplicate(owner, earlier, DuplicateKind.EXACT, job_id, pending)
        else:
            point_id = memory_id(owner.tenant_id, owner.user_id, scope.value, project, chash)
            dup = self._find_duplicate(owner, scope, project, c.content, vector.dense,
                                       pending)
            if dup is not None:
                record, kind = dup
                if record.job_id == job_id:
                    return self._own_earlier_write(owner, SaveOutcome.ADDED, record, job_id,
                                                   pending)
                return self._duplicate(owner, record, kind, job_id, pending)

        record = MemoryRecord(
            id=point_id, tenant_id=owner.tenant_id, user_id=owner.user_id, content=c.content,
            content_hash=chash, type=c.type, category=c.category, scope=scope, project=project,
            thread_id=c.thread_id, thread_seq=thread_seq if c.thread_id else None,
            key=c.key, tags=c.tags, importance=c.importance,
            confidence=c.confidence, source=c.source, occurred_at=c.occurred_at,
            created_at=previous.created_at if previous else (c.created_at or now), updated_at=now,
            embedding_model=self.embedder.name, job_id=job_id, metadata=c.metadata,
            enabled=c.enabled,
            expires_at=c.expires_at,
        )
        pending.add(record, vector)
        if previous is not None:
            pending.events.append(_event(owner, record.id, AuditKind.UPDATE, previous.content,
                                         record.content, job_id))
            return WriteResult(SaveOutcome.UPDATED, record)
        pending.events.append(_event(owner, record.id, AuditKind.ADD, None, record.content,
                                     job_id))
        return WriteResult(SaveOutcome.ADDED, record)

    def _stored(self, owner: Owner, point_id: str, pending: _Pending) -> MemoryRecord | None:
        """The memory `point_id` as this job left it so far: written earlier in it, or stored."""
        if point_id in pending.records:
            return pending.records[point_id]
        found = self.store.get(owner, [point_id])
        return MemoryRecord.from_payload(found[0].id, found[0].payload) if found else None

    def _own_earlier_write(
        self,
        owner: Owner,
        outcome: SaveOutcome,
        record: MemoryRecord,
        job_id: str,
        pending: _Pending,
    ) -> WriteResult:
        """The job finds its own point (written earlier in this run, or by a delivery that
        died between the point and its audit, a SIGKILL): report it as its outcome, and
        write the audit event if none is there yet."""
        events = [*self.audit.audit_of(owner, record.id),
                  *(e for e in pending.events if e.memory_id == record.id)]
        written = (AuditKind.ADD, AuditKind.UPDATE)
        if not any(e.job_id == job_id and e.event in written for e in events):
            kind = AuditKind.ADD if outcome is SaveOutcome.ADDED else AuditKind.UPDATE
            pending.events.append(_event(owner, record.id, kind, None, record.content, job_id))
        return WriteResult(outcome, record)

    def _find_duplicate(
        self,
        owner: Owner,
        scope: Scope,
        project: str | None,
        content: str,
        vector: np.ndarray,
        pending: _Pending,
    ) -> tuple[MemoryRecord, DuplicateKind] | None:
        """The memory `content` repeats, among the stored ones and those this job wrote."""
        store = self.store
        # An expired memory is as good as gone: the same fact again is a new memory.
        conds = [*range_conditions(scope, project),
                 *live_conditions(self.settings, owner.tenant_id)]
        chash = content_hash(content)
        exact = store.find(owner, [*conds, Match("content_hash", chash)], limit=1)
        if exact:
            return MemoryRecord.from_payload(exact[0].id, exact[0].payload), DuplicateKind.EXACT
        same = pending.with_hash(chash)
        if same is not None:
            return same, DuplicateKind.EXACT
        threshold = dedup_threshold(self.settings.dedup_threshold, self.embedder.name)
        found = store.search(owner, vector.tolist(), conds, limit=3, score_threshold=threshold)
        near = [(p.score, MemoryRecord.from_payload(p.id, p.payload)) for p in found]
        near += pending.near(vector, threshold)
        near.sort(key=lambda hit: hit[0], reverse=True)
        for score, record in near[:3]:
            if score >= threshold and same_numbers(content, record.content):
                return record, DuplicateKind.SEMANTIC
        return None

    def _duplicate(
        self,
        owner: Owner,
        record: MemoryRecord,
        kind: DuplicateKind,
        job_id: str,
        pending: _Pending,
    ) -> WriteResult:
        pending.events.append(_event(owner, record.id, AuditKind.NOOP, record.content,
                                     record.content, job_id))
        return WriteResult(
            SaveOutcome.DUPLICATE, record, duplicate_of=record.id, duplicate_kind=kind
        )

    # ---- helpers --------------------------------------------------------------

    def embed(self, texts: list[str]) -> list[MemoryVector]:
        """Vectors of `texts` (a long one's parts too): done before taking the user's lock,
        being the slow part of a write."""
        failpoints.reach(failpoints.EMBED_DOCUMENTS)
        return embed_memories(self.embedder, texts, self.settings.long_memory_parts)

    def locked(self, owner: Owner) -> AbstractContextManager[None]:
        """The user's write lock: every read-decide-write of one user's memories holds it."""
        return user_lock(
            self.redis, owner, self.settings.user_lock_timeout_s, self.settings.user_lock_wait_s
        )

    def _audit(
        self,
        owner: Owner,
        mid: str,
        event: AuditKind,
        before: str | None,
        after: str | None,
        job_id: str,
        actor: str | None = None,
    ) -> None:
        self.audit.append_audit([_event(owner, mid, event, before, after, job_id, actor)])


@dataclass
class _Pending:
    """The points and audit events of one `write` call, issued together at its end; its
    later candidates find the earlier ones here as they would in the store."""

    points: list[PointData] = field(default_factory=list)
    events: list[AuditEvent] = field(default_factory=list)
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, record: MemoryRecord, vector: MemoryVector) -> None:
        self.points = [p for p in self.points if p.id != record.id]
        self.points.append(PointData(record.id, record.to_payload(), vector.dense.tolist(),
                                     keyword_vector(record.content), vector.parts_list()))
        self.records[record.id] = record
        self.vectors[record.id] = vector.dense

    def with_hash(self, chash: str) -> MemoryRecord | None:
        return next((r for r in self.records.values() if r.content_hash == chash), None)

    def near(self, vector: np.ndarray, threshold: float) -> list[tuple[float, MemoryRecord]]:
        """(cosine similarity, record) of those at least `threshold` alike, as the store's
        cosine search scores them."""
        hits = []
        norm = float(np.linalg.norm(vector)) or 1.0
        for mid, other in self.vectors.items():
            score = float(np.dot(vector, other)) / (norm * (float(np.linalg.norm(other)) or 1.0))
            if score >= threshold:
                hits.append((score, self.records[mid]))
        return hits


def _event(
    owner: Owner,
    mid: str,
    kind: AuditKind,
    before: str | None,
    after: str | None,
    job_id: str,
    actor: str | None = None,
) -> AuditEvent:
    return AuditEvent(memory_id=mid, tenant_id=owner.tenant_id, user_id=owner.user_id,
                      event=kind, before=before, after=after, job_id=job_id,
                      **({"actor": actor} if actor else {}))


def summarize(results: Sequence[WriteResult], mode: str) -> dict[str, Any]:
    counts = {o.value: 0 for o in SaveOutcome}
    for r in results:
        counts[r.outcome.value] += 1
    return {
        "extract": mode,
        **counts,
        "memories": [
            {"id": r.memory.id, "outcome": r.outcome.value, "content": r.memory.content,
             **({"duplicate_of": r.duplicate_of, "duplicate_kind": r.duplicate_kind.value}
                if r.duplicate_kind else {})}
            for r in results
        ],
    }


def with_dropped(result: dict[str, Any], cmd: IngestCommand) -> dict[str, Any]:
    """The job result, saying which messages were dropped as empty once normalised
    (positions in the request), when any was."""
    dropped = cmd.dropped_messages
    if dropped:
        result["dropped_messages"] = [
            {"index": i, "reason": "empty once normalised"} for i in dropped]
    return result


__all__ = ["MemoryWriter", "WriteResult", "summarize", "with_dropped", "Source"]

