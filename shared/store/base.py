"""The `Store` interface. Owner scoping is added here, once, for every adapter.

Adapters implement the protected `_`-methods over raw conditions; the public
methods are the only way in, and each one prepends the tenant and user filter.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memoryd.platform import failpoints
from memoryd.platform.errors import EmbeddingModelMismatch
from memoryd.records.models import AuditEvent, Owner
from memoryd.store.conditions import AllOf, AnyOf, Between, Condition, IdIn, Match, NoneOf
from memoryd.store.scoring_table import (
    SCORING_FIELDS,
    RankedLists,
    ScoringTable,
    ranked_lists,
    union_ids,
)

DENSE = "dense"
SPARSE = "keywords"
# A long memory's passages, one vector each, scored by MaxSim (shared/embeddings/parts.py).
# Short memories have none; a store created before parts existed has no such vector and
# gains it at the next `memoryd reindex`.
PARTS = "parts"

KEYWORD_FIELDS = (
    "user_id", "scope", "project", "type", "category", "tags", "thread_id", "key",
    "content_hash", "source", "state", "kind", "episodes",
)
DATETIME_FIELDS = ("occurred_at", "created_at", "updated_at", "expires_at")
FLOAT_FIELDS = ("created_ts", "updated_ts", "importance_rank", "expires_ts", "cjk_share")
# (field, index kind): every filtered field is indexed, the tenant first.
MEMORY_INDEXES: tuple[tuple[str, str], ...] = (
    ("tenant_id", "tenant"),
    *((name, "keyword") for name in KEYWORD_FIELDS),
    *((name, "datetime") for name in DATETIME_FIELDS),
    *((name, "float") for name in FLOAT_FIELDS),
    ("importance", "integer"),
    ("thread_seq", "integer"),
)
AUDIT_INDEXES: tuple[tuple[str, str], ...] = (
    ("tenant_id", "keyword"), ("user_id", "keyword"), ("memory_id", "keyword"), ("at_ts", "float"),
)
SORT_FIELDS = {
    "created_at": "created_ts", "updated_at": "updated_ts", "importance": "importance_rank",
}
AUDIT_META_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "memoryd:store-meta"))


@dataclass
class PointData:
    id: str
    payload: dict[str, Any]
    dense: list[float] | None = None
    sparse: tuple[list[int], list[float]] | None = None
    parts: list[list[float]] | None = None


@dataclass(frozen=True)
class VectorQuery:
    """A query on one named vector: `DENSE` or `PARTS` (a list) or `SPARSE` (indices,
    values)."""

    using: str
    vector: list[float] | tuple[list[int], list[float]]


@dataclass
class StoredPoint:
    id: str
    payload: dict[str, Any]
    score: float = 0.0
    dense: list[float] | None = field(default=None, repr=False)
    parts: list[list[float]] | None = field(default=None, repr=False)


def stored_point(record: Any, score: float = 0.0) -> StoredPoint:
    """A point as either Qdrant binding returns it (id, payload, named vectors)."""
    dense = parts = None
    if isinstance(record.vector, dict):
        if DENSE in record.vector:
            dense = list(record.vector[DENSE])
        if record.vector.get(PARTS):
            parts = [list(v) for v in record.vector[PARTS]]
    return StoredPoint(str(record.id), dict(record.payload or {}), score, dense, parts)


def passage_rows(records: Iterable[Any]) -> dict[str, np.ndarray]:
    """Each record's `PARTS` vectors as one float32 matrix, by id (records without any are
    left out), from a read of that vector alone."""
    found: dict[str, np.ndarray] = {}
    for record in records:
        rows = record.vector.get(PARTS) if isinstance(record.vector, dict) else None
        if rows is not None and len(rows) > 0:  # a list or an array, whichever binding
            found[str(record.id)] = np.asarray(rows, dtype=np.float32)
    return found


def owner_conditions(owner: Owner) -> tuple[Condition, ...]:
    return (Match("tenant_id", owner.tenant_id), Match("user_id", owner.user_id))


def scoped(owner: Owner, conditions: Sequence[Condition] = ()) -> AllOf:
    return AllOf((*owner_conditions(owner), *conditions))


class Store(ABC):
    """Memories and their audit trail, always read and written for one owner."""

    def __init__(self, collection: str) -> None:
        self.collection = collection

    @property
    def supports_parts(self) -> bool:
        """Whether the collection holds long memories' `PARTS` (created with them)."""
        return False

    def _vector_names(self) -> list[str]:
        """The named vectors a read `with_vectors` returns."""
        return [DENSE, PARTS] if self.supports_parts else [DENSE]

    # ---- public, owner-scoped -------------------------------------------------

    def upsert(self, owner: Owner, points: Sequence[PointData]) -> None:
        for point in points:
            if (point.payload.get("tenant_id"), point.payload.get("user_id")) != (
                owner.tenant_id,
                owner.user_id,
            ):
                raise ValueError(f"point {point.id} does not belong to {owner}")
        if points:
            self._upsert(points)
            failpoints.reach(failpoints.STORE_UPSERT)

    def get(
        self, owner: Owner, ids: Sequence[str], with_vectors: bool = False
    ) -> list[StoredPoint]:
        if not ids:
            return []
        found, _ = self._scroll(scoped(owner, [IdIn(tuple(ids))]), len(ids), None, with_vectors)
        return found

    def passage_vectors(self, owner: Owner, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Each of `ids`' passage vectors (`PARTS`, one row per passage, float32), by id,
        for those of the owner's memories that hold them; nothing else is read (no payload,
        no whole-text vector). Empty when the collection keeps no passages."""
        if not ids or not self.supports_parts:
            return {}
        return self._passages(scoped(owner, [IdIn(tuple(ids))]), len(ids))

    def find(
        self, owner: Owner, conditions: Sequence[Condition], limit: int,
        order_by: str | None = None, descending: bool = True,
    ) -> list[StoredPoint]:
        found, _ = self._scroll(scoped(owner, conditions), limit, order_by, False, descending)
        return found

    def search(
        self,
        owner: Owner,
        dense: list[float],
        conditions: Sequence[Condition],
        limit: int,
        score_threshold: float | None = None,
    ) -> list[StoredPoint]:
        """Nearest points by the dense vector alone (dedup, and the dense retrieval mode)."""
        [hits] = self._search_batch(
            scoped(owner, conditions), [VectorQuery(DENSE, dense)], limit, score_threshold, None
        )
        return hits

    def search_many(
        self, owner: Owner, conditions: Sequence[Condition], queries: Sequence[VectorQuery],
        limit: int, fields: Sequence[str] | None = None,
    ) -> list[list[StoredPoint]]:
        """One store call, one ranked list per query (dense, keywords), same filter.
        `fields`: the payload fields to return (None: all; empty: none, ids and scores).

        The lists are fused by the caller rather than inside Qdrant, so that every
        component of a score stays known (explanations, calibration).
        """
        if not queries:
            return []
        return self._search_batch(scoped(owner, conditions), queries, limit, None, fields)

    def search_candidates(
        self, owner: Owner, conditions: Sequence[Condition], queries: Sequence[VectorQuery],
        limit: int,
    ) -> RankedLists:
        """`search_many` for rescoring: the lists' ids and scores, and every candidate's
        scoring fields (`SCORING_FIELDS`) as columns."""
        return self._search_candidates(scoped(owner, conditions), queries, limit)

    def find_across_owners(
        self, conditions: Sequence[Condition], limit: int
    ) -> list[StoredPoint]:
        """Maintenance only (the retention purge): points of any owner matching `conditions`.

        It returns ids and payloads; every change still goes through the owner-scoped
        methods, with the owner read from the point.
        """
        if not conditions:
            raise ValueError("find_across_owners needs at least one condition")
        found, _ = self._scroll(AllOf(tuple(conditions)), limit, None, False)
        return found

    def count(self, owner: Owner, conditions: Sequence[Condition] = ()) -> int:
        return self._count(scoped(owner, conditions))

    def keyword_holders(self, owner: Owner, ids: Sequence[int], cap: int) -> list[int]:
        """For each keyword id, how many of the owner's points hold it, counted up to `cap`
        (the user's own keyword statistics, docs/decisions/0029)."""
        if not ids:
            return []
        return self._keyword_holders(scoped(owner, []), ids, cap)

    def _keyword_holders(self, cond: AllOf, ids: Sequence[int], cap: int) -> list[int]:
        # A one-term keyword list per id, ids and scores only: a point is in it when it
        # holds the term (its weight, and so its score, is positive).
        lists = self._search_batch(
            cond, [VectorQuery(SPARSE, ([i], [1.0])) for i in ids], cap, None, ())
        return [sum(1 for p in hits if p.score > 0) for hits in lists]

    def count_all(self) -> int:
        """Every stored memory of every owner: a number for /metrics, never their content."""
        return self._count(AllOf(()))

    def set_payload(self, owner: Owner, ids: Sequence[str], payload: dict[str, Any]) -> None:
        if ids:
            self._set_payload(scoped(owner, [IdIn(tuple(ids))]), payload)

    def delete(self, owner: Owner, ids: Sequence[str]) -> None:
        if ids:
            self._delete(scoped(owner, [IdIn(tuple(ids))]))

    def delete_where(self, owner: Owner, conditions: Sequence[Condition]) -> list[str]:
        """Delete what matches and return the ids, so the caller can audit them."""
        ids: list[str] = []
        while True:
            batch, _ = self._scroll(scoped(owner, conditions), 256, None, False)
            if not batch:
                return ids
            batch_ids = [p.id for p in batch]
            self._delete(scoped(owner, [IdIn(tuple(batch_ids))]))
            ids.extend(batch_ids)

    def page(
        self,
        owner: Owner,
        conditions: Sequence[Condition],
        limit: int,
        sort: str,
        after: tuple[float, list[str]] | None,
    ) -> tuple[list[StoredPoint], tuple[float, list[str]] | None]:
        """Keyset pagination, newest (or most important) first.

        The position is the last sort value and the ids already returned at that
        value, so inserts between pages neither repeat nor skip items.
        """
        sort_field = SORT_FIELDS[sort]
        conds = list(conditions)
        if after is not None:
            value, seen = after
            conds.append(Between(sort_field, lte=value))
            if seen:
                conds.append(NoneOf((IdIn(tuple(seen)),)))
        found, _ = self._scroll(scoped(owner, conds), limit + 1, sort_field, False, True)
        more = len(found) > limit
        found = found[:limit]
        if not more or not found:
            return found, None
        last = float(found[-1].payload[sort_field])
        at_last = [p.id for p in found if float(p.payload[sort_field]) == last]
        if after is not None and after[0] == last:
            at_last = [*after[1], *at_last]
        return found, (last, at_last)

    # ---- audit ----------------------------------------------------------------

    def append_audit(self, events: Sequence[AuditEvent]) -> None:
        if events:
            self._append_audit(events)

    def erase_audit_content(self, owner: Owner, memory_ids: Sequence[str]) -> None:
        """After a deletion the trail keeps that things happened, never what was said."""
        for start in range(0, len(memory_ids), 256):
            chunk = tuple(memory_ids[start:start + 256])
            self._redact_audit(scoped(owner, [AnyOf("memory_id", chunk)]))

    def audit_of(self, owner: Owner, memory_id: str, limit: int = 1000) -> list[AuditEvent]:
        conds = scoped(owner, [Match("memory_id", memory_id)])
        return self._read_audit(conds, limit)

    def user_counts(self, tenant_id: str, limit: int) -> list[tuple[str, int]]:
        """A tenant's user ids with their memory counts (at most `limit`, most memories first)."""
        return self._facet(AllOf((Match("tenant_id", tenant_id),)), "user_id", limit)

    # ---- maintenance (re-embedding): every tenant, so never reachable from a request ----

    def scan(
        self, offset: str | None, limit: int, with_vectors: bool = False
    ) -> tuple[list[StoredPoint], str | None]:
        """All points in id order, a page at a time; `offset` is the previous page's next one."""
        return self._scan(offset, limit, with_vectors)

    # ---- lifecycle ------------------------------------------------------------

    def create_if_missing(self, dim: int) -> None:
        """Create the collection (and its indexes) for vectors of `dim`, if it is not there."""
        self._create_if_missing(dim)

    def read_meta(self) -> dict[str, Any] | None:
        """The collection's metadata document (the embedder, the index record), if any."""
        return self._read_meta()

    def write_meta(self, meta: dict[str, Any]) -> None:
        self._write_meta(meta)

    def ensure_schema(self, embedding_model: str, dim: int) -> None:
        """Create what is missing; refuse a store built with another model."""
        self._create_if_missing(dim)
        meta = self._read_meta()
        if meta is None:
            self._write_meta({"embedding_model": embedding_model, "dim": dim})
            return
        if meta.get("embedding_model") != embedding_model or meta.get("dim") != dim:
            raise EmbeddingModelMismatch(
                f"the store was built with embedder {meta.get('embedding_model')!r} "
                f"({meta.get('dim')}-d) but {embedding_model!r} ({dim}-d) is configured; "
                "re-embed the store or configure the original embedder"
            )

    def compact(self) -> dict[str, Any]:
        """Rewrite this store's files so that nothing deleted or erased survives in them
        (shared/memories/erasure.py). The embedded shard does (EdgeStore); a Qdrant server owns its
        files, and its own optimizer and WAL retention bound how long they keep old bytes."""
        return {"skipped": "the store's files belong to the Qdrant server"}

    @abstractmethod
    def ping(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    # ---- adapter primitives ---------------------------------------------------

    @abstractmethod
    def sibling(self, collection: str) -> Store:
        """Another memory collection on the same engine and connection (re-embedding builds
        one); it has no audit trail of its own: that stays with the store it came from."""

    @abstractmethod
    def drop(self) -> None:
        """Remove this store's memory collection for good (an old re-embedding generation)."""

    @abstractmethod
    def _create_if_missing(self, dim: int) -> None: ...

    @abstractmethod
    def _read_meta(self) -> dict[str, Any] | None: ...

    @abstractmethod
    def _write_meta(self, meta: dict[str, Any]) -> None: ...

    @abstractmethod
    def _upsert(self, points: Sequence[PointData]) -> None: ...

    @abstractmethod
    def _scroll(
        self, cond: AllOf, limit: int, order_by: str | None, with_vectors: bool,
        descending: bool = True,
    ) -> tuple[list[StoredPoint], str | None]: ...

    @abstractmethod
    def _passages(self, cond: AllOf, limit: int) -> dict[str, np.ndarray]: ...

    @abstractmethod
    def _search_batch(
        self, cond: AllOf, queries: Sequence[VectorQuery], limit: int,
        score_threshold: float | None, fields: Sequence[str] | None,
    ) -> list[list[StoredPoint]]: ...

    def _search_candidates(
        self, cond: AllOf, queries: Sequence[VectorQuery], limit: int
    ) -> RankedLists:
        results = self._search_batch(cond, queries, limit, None, SCORING_FIELDS) if queries else []
        table = ScoringTable(capacity=sum(map(len, results)))
        table.add({p.id: p.payload for hits in results for p in hits})
        lists = [([p.id for p in hits], np.array([p.score for p in hits], dtype=np.float64))
                 for hits in results]
        ids = union_ids(lists)
        return ranked_lists(lists, ids, table.rows_of(ids), table)

    @abstractmethod
    def _count(self, cond: AllOf) -> int: ...

    @abstractmethod
    def _scan(
        self, offset: str | None, limit: int, with_vectors: bool
    ) -> tuple[list[StoredPoint], str | None]: ...

    @abstractmethod
    def _facet(self, cond: AllOf, key: str, limit: int) -> list[tuple[str, int]]: ...

    @abstractmethod
    def _set_payload(self, cond: AllOf, payload: dict[str, Any]) -> None: ...

    @abstractmethod
    def _delete(self, cond: AllOf) -> None: ...

    @abstractmethod
    def _append_audit(self, events: Sequence[AuditEvent]) -> None: ...

    @abstractmethod
    def _redact_audit(self, cond: AllOf) -> None: ...

    @abstractmethod
    def _read_audit(self, cond: AllOf, limit: int) -> list[AuditEvent]: ...


def audit_point_id(event: AuditEvent) -> str:
    return str(uuid.uuid5(
        uuid.NAMESPACE_URL,
        f"{event.memory_id}|{event.event}|{event.job_id}|{event.at.isoformat()}",
    ))


def audit_payload(event: AuditEvent) -> dict[str, Any]:
    payload = event.model_dump(mode="json")
    payload["at_ts"] = event.at.timestamp()
    return payload
