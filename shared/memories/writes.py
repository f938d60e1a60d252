"""The write path: dedup, conflict-free writes under a per-user lock, audit.

Every function here runs in a worker. Ids are deterministic and each point
records the job that wrote it, so a retried or redelivered task finds its own
earlier writes and reports them as its own instead of writing twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from redis import Redis

from memoryd.embeddings.parts import MemoryVector, embed_memories
from memoryd.extraction.interaction import candidates_for
from memoryd.extraction.redaction import redact
from memoryd.extraction.topics import fact_reading
from memoryd.index.generations import View
from memoryd.jobs.forgetting import ForgetSpan, record_forget, refuse_forgotten, scrub_jobs
from memoryd.memories.erasure import Erasure, after_forget
from memoryd.memories.locks import user_lock
from memoryd.memories.retention import live_conditions
from memoryd.memories.versions import version_chain
from memoryd.platform import failpoints
from memoryd.platform.errors import NotFound
from memoryd.platform.settings import Settings
from memoryd.platform.text_pace import TextPacer
from memoryd.records.candidate import Candidate
from memoryd.records.commands import (
    DeleteCommand,
    ForgetCommand,
    IngestCommand,
    SaveCommand,
    UpdateCommand,
)
from memoryd.records.identity import content_hash, event_id, keyed_memory_id, memory_id, turn_id
from memoryd.records.models import (
    AuditEvent,
    AuditKind,
    DuplicateKind,
    MemoryKind,
    MemoryRecord,
    MemorySource,
    MemoryType,
    Owner,
    SaveOutcome,
    Scope,
    Source,
    inferred_kind,
    merge_sources,
    utcnow,
)
from memoryd.records.schemas import MemoryView, SaveResult
from memoryd.retrieval.keywords import PASSAGES_FIELD, keyword_fields
from memoryd.store import PointData
from memoryd.store.conditions import AnyOf, Between, Condition, Match, NoneOf
from memoryd.webhooks.service import forget_user_deliveries


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
# The most episodes (of a forgotten thread or range) and facts (drawn from them) a forget
# reads in one scroll: one user's, far above any real conversation.
CASCADE_LIMIT = 100_000
# The most memories of a thread a late job moves back to take its place in the
# conversation (`MemoryWriter._in_arrival_order`); a job later than that stays at the end.
REORDER_LIMIT = 256


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

    def __init__(self, view: View, redis: Redis, settings: Settings, erasure: Erasure,
                 pacer: TextPacer) -> None:
        self.store = view.store
        self.writes = view.writes
        self.audit = view.audit
        self.embedder = view.embedder
        self.redis = redis
        self.settings = settings
        self.erasure = erasure
        self.pacer = pacer  # the process's (`Runtime.text_pacer`): the text passes take turns

    # ---- entry points (one per task) -----------------------------------------

    def ingest(self, cmd: IngestCommand, job_id: str) -> dict[str, Any]:
        candidates = candidates_for(cmd, self.pacer, job_id=job_id)
        results = self.write(cmd.owner, cmd.scope, cmd.project, candidates, job_id,
                             actor=cmd.actor)
        return with_dropped(summarize(results, cmd.extract.value, cmd.episodes), cmd)

    def save(self, cmd: SaveCommand, job_id: str) -> dict[str, Any]:
        candidate = Candidate(
            content=cmd.content.strip(), type=cmd.type,
            occurred_at=cmd.occurred_at or cmd.received_at,
            source=cmd.source, importance=cmd.importance, tags=list(dict.fromkeys(cmd.tags)),
            key=cmd.key, thread_id=cmd.thread_id, metadata=dict(cmd.metadata or {}),
            expires_at=cmd.expires_at, kind=MemoryKind.NOTE,
            sources=[MemorySource(thread_id=cmd.thread_id, job_id=job_id,
                                  at=cmd.received_at)],
        )
        [result] = self.write(cmd.owner, cmd.scope, cmd.project, [candidate], job_id,
                              actor=cmd.actor)
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
                [vector] = self.embed([after.content], [after.kind])
                dense, parts = vector.dense.tolist(), vector.parts_list()
            self.writes.upsert(owner, [_point(after, dense, parts)])
            self._audit(owner, after.id, AuditKind.UPDATE, before.content, after.content, job_id,
                        cmd.actor)
        return {"outcome": "updated", "memory": MemoryView.of(after).model_dump(mode="json")}

    def delete(self, cmd: DeleteCommand, job_id: str) -> dict[str, Any]:
        found = self.delete_versions(cmd.owner, cmd.memory_id, job_id, cmd.actor)
        result: dict[str, Any] = {"deleted": 1 if found else 0,
                                  "ids": [cmd.memory_id] if found else []}
        if found:
            result.update(facts_forgotten=found.facts_forgotten,
                          facts_unlinked=found.facts_unlinked)
        return result

    def delete_versions(
        self, owner: Owner, memory_id: str, job_id: str, actor: str | None = None
    ) -> Deleted:
        """Forget a memory and every version of it (shared/memories/conflicts.py), their
        content in the trail too; the ids deleted, none when the memory is gone already.

        An episode takes with it the facts drawn only from it (and their versions); a fact
        drawn from other episodes too stays, without this episode's link and sources."""
        span = ForgetSpan()
        contents: list[str] = []
        deleted = Deleted()
        with self.locked(owner):
            ids = version_chain(self.store, owner, memory_id)
            if ids:
                points = self.store.get(owner, ids)
                cascade = self._drawn_from(owner, [
                    MemoryRecord.from_payload(p.id, p.payload) for p in points])
                facts = [mid for fid in cascade.forget
                         for mid in version_chain(self.store, owner, fid)]
                gone = list(dict.fromkeys([*ids, *facts]))
                contents = [str(p.payload.get("content") or "")
                            for p in self.store.get(owner, gone)]
                span = ForgetSpan(ids=gone)
                record_forget(self.redis, owner, span)
                self.writes.delete(owner, gone)
                self._unlink(owner, cascade)
                self.audit.erase_audit_content(owner, gone)
                for mid in gone:
                    self._audit(owner, mid, AuditKind.DELETE, None, None, job_id, actor)
                deleted = Deleted(ids, cascade.forget, [r.id for r, _ in cascade.unlink])
        if ids:
            self.after_forget(owner, span, contents)
        return deleted

    def forget(self, cmd: ForgetCommand, job_id: str) -> dict[str, Any]:
        owner = cmd.owner
        conds: list[Condition] = []
        if cmd.thread_id is not None:
            conds.append(Match("thread_id", cmd.thread_id))
        if cmd.before is not None or cmd.after is not None:
            conds.append(Between("occurred_at", lt=cmd.before, gt=cmd.after))
        span = ForgetSpan(thread_id=cmd.thread_id, before=cmd.before, after=cmd.after)
        contents: list[str] = []
        with self.locked(owner):
            # First the epoch: a job accepted before now that waits for this lock then
            # finds the forget and writes nothing it covers (shared/jobs/forgetting.py).
            record_forget(self.redis, owner, span)
            episodes = ([MemoryRecord.from_payload(p.id, p.payload)
                         for p in self.store.find(owner, [*conds, Match("kind", "episode")],
                                                         CASCADE_LIMIT)]
                        if conds else [])
            ids = self.writes.delete_where(owner, conds)
            # Facts outside the span drawn only from episodes it removed go with them; those
            # drawn from other episodes too lose the removed links (docs/usage.md).
            cascade = self._drawn_from(owner, episodes)
            if cascade.forget:
                extra = ForgetSpan(ids=cascade.forget)
                contents = [str(p.payload.get("content") or "")
                            for p in self.store.get(owner, cascade.forget)]
                record_forget(self.redis, owner, extra)
                self.writes.delete(owner, cascade.forget)
                ids = [*ids, *cascade.forget]
            self._unlink(owner, cascade)
            self.audit.erase_audit_content(owner, ids)
            self.audit.append_audit([
                AuditEvent(memory_id=i, tenant_id=owner.tenant_id, user_id=owner.user_id,
                           event=AuditKind.DELETE, job_id=job_id, actor="forget")
                for i in ids
            ])
        self.after_forget(owner, span, contents)
        return {"deleted": len(ids)}

    def _drawn_from(self, owner: Owner, gone: Sequence[MemoryRecord]) -> _Cascade:
        """What forgetting the memories `gone` does to the facts drawn from the episodes
        among them: a fact with no other episode is forgotten; another loses the links to
        them and the sources it shares with them (same job and message)."""
        episodes = {r.id: r for r in gone if r.kind is MemoryKind.EPISODE}
        cascade = _Cascade()
        if not episodes:
            return cascade
        found = self.store.find(owner, [AnyOf("episodes", tuple(episodes))], CASCADE_LIMIT)
        said = [s for r in episodes.values() for s in r.sources]
        for point in found:
            if point.id in episodes:
                continue
            fact = MemoryRecord.from_payload(point.id, point.payload)
            left = [e for e in fact.episodes if e not in episodes]
            if not left:
                cascade.forget.append(fact.id)
                continue
            sources = [s for s in fact.sources
                       if not any(s.same_message(e) for e in said)]
            cascade.unlink.append((fact, fact.payload_changes(
                episodes=left, sources=sources, updated_at=utcnow())))
        return cascade

    def _unlink(self, owner: Owner, cascade: _Cascade) -> None:
        for fact, changes in cascade.unlink:
            self.writes.set_payload(owner, [fact.id], changes)

    def after_forget(self, owner: Owner, span: ForgetSpan, contents: list[str]) -> None:
        """The texts leave the user's job records and webhook deliveries now, and the disk
        by the erasure bound (docs/erasure.md)."""
        scrub_jobs(self.redis, owner, span, contents, self.settings.job_ttl_s)
        forget_user_deliveries(self.redis, self.settings, owner.tenant_id, owner.user_id)
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
                supersedes=old.id, kind=c.kind or old.kind, sources=c.sources,
                episodes=c.episodes,
            )
            self.writes.upsert(owner, [_point(record, vector.dense.tolist(),
                                              vector.parts_list())])
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
        actor: str | None = None,
    ) -> list[WriteResult]:
        """`actor`: who the audit events name (the command's; None: "system")."""
        if not candidates:
            return []
        # Every write path ends here, so nothing is stored unredacted: explicit saves and
        # imports as well as extraction (which redacts earlier, before any LLM call).
        candidates = [replace(c, content=redact(c.content)) for c in candidates]
        # Embedding is the slow part: do it before taking the user's lock.
        if vectors is None:
            vectors = self.embed([c.content for c in candidates], [c.kind for c in candidates])
        results = []
        pending = _Pending()
        with self.locked(owner):
            refuse_forgotten(self.redis, owner, scope.value, project, candidates, job_id)
            next_seq = self._next_thread_seq(
                owner, {c.thread_id for c in candidates if c.sequenced})
            # The episode each message of this job became: the facts drawn from a message
            # link to it (a fact's `episodes`).
            episode_of: dict[tuple[str | None, int], str] = {}
            # The memories this job placed in each thread, in order (`_in_arrival_order`).
            placed: dict[str, list[str]] = {}
            for candidate, vector in zip(candidates, vectors, strict=True):
                if candidate.kind is MemoryKind.FACT and not candidate.episodes:
                    linked = [episode_of[(s.job_id, s.message_index)] for s in candidate.sources
                              if s.message_index is not None
                              and (s.job_id, s.message_index) in episode_of]
                    candidate = replace(candidate, episodes=list(dict.fromkeys(linked)))
                seq = (next_seq.get(candidate.thread_id)
                       if candidate.thread_id and candidate.sequenced else None)
                result = self._write_one(owner, scope, project, candidate, vector, job_id, seq,
                                         pending)
                if seq is not None and result.memory.thread_seq == seq:
                    next_seq[candidate.thread_id] += 1
                    placed.setdefault(str(candidate.thread_id), []).append(result.memory.id)
                if candidate.turn_role is not None:
                    for source in candidate.sources:
                        if source.message_index is not None:
                            episode_of[(source.job_id, source.message_index)] = result.memory.id
                results.append(result)
            self._in_arrival_order(owner, placed, pending)
            # One upsert and one audit append for the whole job, still under the lock; then
            # the provenance that repeats added to memories stored before this job.
            self.writes.upsert(owner, pending.points)
            for mid, (stored, current) in pending.patched.items():
                self.writes.set_payload(owner, [mid], stored.payload_changes(
                    sources=current.sources, episodes=current.episodes,
                    updated_at=current.updated_at))
            self.audit.append_audit([e.model_copy(update={"actor": actor}) for e in pending.events]
                                    if actor else pending.events)
        return results

    def _in_arrival_order(
        self, owner: Owner, placed: dict[str, list[str]], pending: _Pending
    ) -> None:
        """Each thread's order is the order its interactions reached the gateway, whatever
        order the workers wrote them in.

        Jobs of one user can run at once (the user's share of the memory queue, the bulk
        queue's threads), so a later turn may take the lock first. The memories this job
        placed at the thread's end (`placed`) then move in front of the stored ones created
        after this job arrived (`created_ts`, the gateway's `received_at` for what an
        interaction brought), which move back by as many places: a hit's next turn and
        its neighbours are the conversation's. Bounded: past `REORDER_LIMIT` later
        memories, the job's stay at the end."""
        for thread, ids in placed.items():
            mine = [pending.records[i] for i in ids if i in pending.records]
            if not mine:
                continue
            # At the payload's own precision (`created_ts`, milliseconds), so a memory that
            # arrived in the same millisecond is not "later".
            arrived = round(min(r.created_at for r in mine).timestamp(), 3)
            later = [p for p in self.store.find(
                owner, [Match("thread_id", thread), Between("created_ts", gt=arrived)],
                REORDER_LIMIT + 1, order_by="thread_seq", descending=False)
                if p.id not in pending.records and p.payload.get("thread_seq") is not None]
            if not later or len(later) > REORDER_LIMIT:
                continue
            first = min(int(p.payload["thread_seq"]) for p in later)
            for offset, record in enumerate(mine):
                pending.replace(record.model_copy(update={"thread_seq": first + offset}))
            for p in later:
                self.writes.set_payload(owner, [p.id], {
                    "thread_seq": int(p.payload["thread_seq"]) + len(mine)})

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
        elif c.turn_role is not None:
            # A turn of the default extraction: the same turn posted again is one memory,
            # which gains the repeat as another source (identity.turn_id).
            point_id = turn_id(owner.tenant_id, owner.user_id, scope.value, project, c.thread_id,
                               c.turn_role.value, chash, c.occurred_at.isoformat())
            earlier = self._stored(owner, point_id, pending)
            if earlier is not None:
                earlier = self._provenance(owner, earlier, c, pending)
                if earlier.job_id == job_id:
                    return self._own_earlier_write(owner, SaveOutcome.ADDED, earlier, job_id,
                                                   pending)
                return self._duplicate(owner, earlier, DuplicateKind.EXACT, job_id, pending)
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
                                       pending, facts_only=c.kind is MemoryKind.FACT)
            if dup is not None:
                record, kind = dup
                # The fact said again keeps its content, and gains this saying's sources.
                record = self._provenance(owner, record, c, pending)
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
            kind=c.kind or inferred_kind(c.source, c.type), sources=c.sources,
            episodes=c.episodes,
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
        if point_id in pending.patched:
            return pending.patched[point_id][1]
        found = self.store.get(owner, [point_id])
        return MemoryRecord.from_payload(found[0].id, found[0].payload) if found else None

    def _provenance(
        self, owner: Owner, record: MemoryRecord, c: Candidate, pending: _Pending
    ) -> MemoryRecord:
        """`record` with the candidate's sources and episodes added (those it lacks): a
        turn posted again, or a fact said again, keeps one memory that names every saying.
        The change is issued with the job's writes (`_Pending`)."""
        if record.id in pending.patched:
            record = pending.patched[record.id][1]
        elif record.id in pending.records:
            record = pending.records[record.id]
        sources = merge_sources(record.sources, c.sources)
        episodes = list(dict.fromkeys([*record.episodes, *c.episodes]))
        if len(sources) == len(record.sources) and episodes == record.episodes:
            return record
        current = record.model_copy(update={"sources": sources, "episodes": episodes,
                                            "updated_at": utcnow()})
        if record.id in pending.records:
            pending.replace(current)
        else:
            stored = pending.patched[record.id][0] if record.id in pending.patched else record
            pending.patched[record.id] = (stored, current)
        return current

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
        facts_only: bool = False,
    ) -> tuple[MemoryRecord, DuplicateKind] | None:
        """The memory `content` repeats, among the stored ones and those this job wrote;
        `facts_only`: a fact repeats no episode (the turn it was drawn from is another
        memory, however alike)."""
        store = self.store
        # An expired memory is as good as gone: the same fact again is a new memory.
        conds = [*range_conditions(scope, project),
                 *live_conditions(self.settings, owner.tenant_id)]
        if facts_only:
            conds.append(NoneOf((Match("kind", MemoryKind.EPISODE.value),)))
        chash = content_hash(content)
        exact = store.find(owner, [*conds, Match("content_hash", chash)], limit=1)
        if exact:
            return MemoryRecord.from_payload(exact[0].id, exact[0].payload), DuplicateKind.EXACT
        same = pending.with_hash(chash, facts_only)
        if same is not None:
            return same, DuplicateKind.EXACT
        threshold = dedup_threshold(self.settings.dedup_threshold, self.embedder.name)
        found = store.search(owner, vector.tolist(), conds, limit=3, score_threshold=threshold)
        near = [(p.score, MemoryRecord.from_payload(p.id, p.payload)) for p in found]
        near += pending.near(vector, threshold, facts_only)
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

    def embed(self, texts: list[str], kinds: Sequence[MemoryKind | None] | None = None
              ) -> list[MemoryVector]:
        """Vectors of `texts` (a long one's parts too, and a fact's topic reading: `kinds`,
        one per text, None when none is a fact): done before taking the user's lock, being
        the slow part of a write."""
        failpoints.reach(failpoints.EMBED_DOCUMENTS)
        readings = None if kinds is None else [
            fact_reading(kind, text) for text, kind in zip(texts, kinds, strict=True)]
        return embed_memories(self.embedder, texts, self.settings.long_memory_parts, readings)

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
class Deleted:
    """A forget of one memory: the versions deleted (empty: it was gone already), the facts
    forgotten with it, and those that only lost their link to it."""

    ids: list[str] = field(default_factory=list)
    facts_forgotten: list[str] = field(default_factory=list)
    facts_unlinked: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def _point(record: MemoryRecord, dense: list[float] | None,
           parts: list[list[float]] | None) -> PointData:
    """The point that stores `record`: its payload, its vectors, and its keywords (the sparse
    vector and, for a long text, its passages' counts: `keywords.keyword_fields`)."""
    sparse, fields = keyword_fields(record.content)
    return PointData(record.id, {**record.to_payload(), **fields}, dense, sparse, parts)


def _passages_kept(payload: dict[str, Any]) -> dict[str, Any]:
    """The keyword passages a pending point already holds: a record changed again keeps its
    text, and so its passages (whose digest says so: `keywords.stored_passage_weights`)."""
    return {PASSAGES_FIELD: payload[PASSAGES_FIELD]} if PASSAGES_FIELD in payload else {}


@dataclass
class _Cascade:
    forget: list[str] = field(default_factory=list)
    unlink: list[tuple[MemoryRecord, dict[str, Any]]] = field(default_factory=list)


@dataclass
class _Pending:
    """The points and audit events of one `write` call, issued together at its end; its
    later candidates find the earlier ones here as they would in the store."""

    points: list[PointData] = field(default_factory=list)
    events: list[AuditEvent] = field(default_factory=list)
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    # Stored before this job, given more provenance by it: id -> (as stored, as it is now).
    patched: dict[str, tuple[MemoryRecord, MemoryRecord]] = field(default_factory=dict)

    def replace(self, record: MemoryRecord) -> None:
        """A record this job wrote, changed again before the upsert (vectors kept)."""
        self.records[record.id] = record
        self.points = [PointData(p.id, {**record.to_payload(), **_passages_kept(p.payload)},
                                 p.dense, p.sparse, p.parts)
                       if p.id == record.id else p for p in self.points]

    def add(self, record: MemoryRecord, vector: MemoryVector) -> None:
        self.points = [p for p in self.points if p.id != record.id]
        self.points.append(_point(record, vector.dense.tolist(), vector.parts_list()))
        self.records[record.id] = record
        self.vectors[record.id] = vector.dense

    def with_hash(self, chash: str, facts_only: bool = False) -> MemoryRecord | None:
        return next((r for r in self.records.values() if r.content_hash == chash
                     and not (facts_only and r.kind is MemoryKind.EPISODE)), None)

    def near(
        self, vector: np.ndarray, threshold: float, facts_only: bool = False
    ) -> list[tuple[float, MemoryRecord]]:
        """(cosine similarity, record) of those at least `threshold` alike, as the store's
        cosine search scores them."""
        hits = []
        norm = float(np.linalg.norm(vector)) or 1.0
        for mid, other in self.vectors.items():
            if facts_only and self.records[mid].kind is MemoryKind.EPISODE:
                continue
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


def summarize(
    results: Sequence[WriteResult], mode: str, episodes: bool = False
) -> dict[str, Any]:
    """A job's result; `episodes`: the default extraction's, which also counts its episodes
    and facts."""
    counts = {o.value: 0 for o in SaveOutcome}
    for r in results:
        counts[r.outcome.value] += 1
    kinds = {}
    if episodes:
        kinds = {"default": True,
                 "episodes": sum(r.memory.kind is MemoryKind.EPISODE for r in results),
                 "facts": sum(r.memory.kind is MemoryKind.FACT for r in results)}
    return {
        "extract": mode,
        **counts,
        **kinds,
        "memories": [
            {"id": r.memory.id, "outcome": r.outcome.value, "content": r.memory.content,
             "kind": r.memory.kind.value,
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

