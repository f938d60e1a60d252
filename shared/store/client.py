"""Store adapter over `qdrant-client`: a Qdrant server, or the client's local mode in tests."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memoryd.platform.errors import StoreRejected, StoreUnavailable
from memoryd.platform.logs import get_logger
from memoryd.records.models import AuditEvent
from memoryd.store.base import (
    AUDIT_INDEXES,
    AUDIT_META_ID,
    DENSE,
    MEMORY_INDEXES,
    PARTS,
    SPARSE,
    PointData,
    Store,
    StoredPoint,
    VectorQuery,
    audit_payload,
    audit_point_id,
    passage_rows,
    stored_point,
)
from memoryd.store.conditions import (
    AllOf,
    AnyOf,
    Between,
    Condition,
    IdIn,
    Match,
    NoneOf,
    OneOf,
    as_float,
    is_datetime_range,
    iso,
)

T = TypeVar("T")
_SCHEMA = {
    "keyword": qm.PayloadSchemaType.KEYWORD, "datetime": qm.PayloadSchemaType.DATETIME,
    "float": qm.PayloadSchemaType.FLOAT,
    "integer": qm.PayloadSchemaType.INTEGER,
}
_AUDIT_VECTOR = "unit"
# Keyword vectors without Qdrant's IDF: the query carries a fixed reference IDF instead,
# so no stored data moves a user's keyword scores (docs/decisions/0029).
_SPARSE_CONFIG = {SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.NONE)}
log = get_logger("memoryd.store.client")


def versions_compatible(client: str, server: str) -> bool:
    """Qdrant's rule for a client and a server: the same major version, minor versions at
    most one apart. A version that does not parse as `major.minor…` is not compatible."""
    try:
        (c_major, c_minor), (s_major, s_minor) = (
            tuple(int(part) for part in v.split(".")[:2]) for v in (client, server))
    except ValueError:
        return False
    return c_major == s_major and abs(c_minor - s_minor) <= 1


def _reason(exc: UnexpectedResponse) -> str:
    """Qdrant's own words for a refusal (`status.error`), else the start of its answer."""
    try:
        error = exc.structured().get("status", {}).get("error")
    except (ValueError, AttributeError):
        error = None
    return str(error) if error else exc.content[:200].decode("utf-8", "replace")


def _translate(cond: Condition) -> Any:
    if isinstance(cond, Match):
        return qm.FieldCondition(key=cond.key, match=qm.MatchValue(value=cond.value))
    if isinstance(cond, AnyOf):
        return qm.FieldCondition(key=cond.key, match=qm.MatchAny(any=list(cond.values)))
    if isinstance(cond, Between):
        if is_datetime_range(cond):
            rng: Any = qm.DatetimeRange(
                gte=iso(cond.gte), lte=iso(cond.lte), gt=iso(cond.gt), lt=iso(cond.lt)
            )
        else:
            rng = qm.Range(
                gte=as_float(cond.gte), lte=as_float(cond.lte),
                gt=as_float(cond.gt), lt=as_float(cond.lt),
            )
        return qm.FieldCondition(key=cond.key, range=rng)
    if isinstance(cond, IdIn):
        return qm.HasIdCondition(has_id=list(cond.ids))
    if isinstance(cond, AllOf):
        return qm.Filter(must=[_translate(c) for c in cond.conditions])
    if isinstance(cond, OneOf):
        return qm.Filter(should=[_translate(c) for c in cond.conditions])
    if isinstance(cond, NoneOf):
        return qm.Filter(must_not=[_translate(c) for c in cond.conditions])
    raise TypeError(f"unknown condition {cond!r}")


def _vector(query: VectorQuery) -> Any:
    if isinstance(query.vector, tuple):
        return qm.SparseVector(indices=query.vector[0], values=query.vector[1])
    if query.using == PARTS:
        return [query.vector]  # one query vector against each memory's parts (MaxSim)
    return query.vector


def _filter(cond: AllOf) -> qm.Filter:
    return qm.Filter(must=[_translate(c) for c in cond.conditions])


class QdrantClientStore(Store):
    """One client per process. Local mode is not thread-safe, so its calls are serialized."""

    def __init__(
        self,
        collection: str,
        *,
        url: str | None = None,
        api_key: str | None = None,
        path: Path | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        super().__init__(collection)
        self._audit_collection = f"{collection}_audit"
        if path is not None:
            self._client = QdrantClient(path=str(path))
            self._lock: threading.Lock | None = threading.Lock()
            self._remote = False
            # Local mode ignores payload indexes (and warns about each one).
            self._indexes = False
        else:
            # qdrant-client's own version check runs in a thread its constructor starts: a
            # server not up at that moment becomes a Python warning ("Failed to obtain server
            # version") however soon it answers, and a mismatch a warning with the versions
            # only in its text. The store checks when it is opened instead
            # (`_check_server_version`), after the server has answered.
            self._client = QdrantClient(url=url, api_key=api_key, timeout=int(max(timeout_s, 1)),
                                        check_compatibility=False)
            self._lock = None
            self._remote = True
            self._indexes = True
        self._shares_client = False
        self._parts = False

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            if self._lock is None:
                yield
            else:
                with self._lock:
                    yield
        except (ResponseHandlingException, ConnectionError, TimeoutError) as exc:
            raise StoreUnavailable(f"Qdrant is unreachable: {exc}") from exc
        except UnexpectedResponse as exc:
            if exc.status_code is not None and exc.status_code >= 500:
                raise StoreUnavailable(f"Qdrant answered {exc.status_code}") from exc
            # Re-raised as our own error: qdrant-client's does not survive Celery's pickling
            # (a failed job would read "ApiException: " and nothing else).
            raise StoreRejected(f"Qdrant answered {exc.status_code}: {_reason(exc)}") from exc

    def _call(self, fn: Callable[[], T]) -> T:
        with self._guard():
            return fn()

    def sibling(self, collection: str) -> QdrantClientStore:
        # One client (local mode locks its directory to one client per process).
        other = object.__new__(QdrantClientStore)
        Store.__init__(other, collection)
        other._audit_collection = self._audit_collection
        other._client, other._lock, other._indexes = self._client, self._lock, self._indexes
        other._remote = self._remote
        other._shares_client = True
        other._parts = False  # learnt from the collection by ensure_schema
        return other

    def drop(self) -> None:
        self._call(lambda: self._client.delete_collection(self.collection))

    def point_alias(self, alias: str, collection: str) -> None:
        """Point `alias` at `collection` in one request (delete + create is atomic in Qdrant).

        Every worker process does this when it opens the store, several at once on a fresh
        server: a request built on a stale read of the aliases is refused, and is redone
        from a fresh read unless the alias already says what this one wanted."""
        for attempt in range(3):
            target = self.alias_target(alias)
            if target == collection:
                return
            ops: list[Any] = []
            if target is not None:
                ops.append(qm.DeleteAliasOperation(delete_alias=qm.DeleteAlias(alias_name=alias)))
            ops.append(qm.CreateAliasOperation(
                create_alias=qm.CreateAlias(collection_name=collection, alias_name=alias)
            ))
            try:
                self._call(functools.partial(self._client.update_collection_aliases, ops))
                return
            except StoreRejected:
                if attempt == 2:
                    raise

    def alias_target(self, alias: str) -> str | None:
        aliases = self._call(lambda: self._client.get_aliases().aliases)
        return next((a.collection_name for a in aliases if a.alias_name == alias), None)

    def _check_server_version(self) -> None:
        """Log `qdrant_version_incompatible` when the server's version is outside what this
        qdrant-client supports (Qdrant's rule: `versions_compatible`). A warning, not a
        refusal: the calls memoryd makes may still work, and the operator decides."""
        server = self._call(self._client.info).version
        client = importlib.metadata.version("qdrant-client")
        if not versions_compatible(client, server):
            log.warning("qdrant_version_incompatible", server_version=server,
                        client_version=client,
                        hint="run a Qdrant server of the client's major version, at most one "
                             "minor version apart")

    def _create_if_missing(self, dim: int) -> None:
        if self._remote:  # local mode is the client's own engine: nothing to check
            self._check_server_version()
        if self._create_collection(
            self.collection,
            vectors_config={
                DENSE: qm.VectorParams(size=dim, distance=qm.Distance.COSINE),
                PARTS: qm.VectorParams(
                    size=dim, distance=qm.Distance.COSINE,
                    multivector_config=qm.MultiVectorConfig(
                        comparator=qm.MultiVectorComparator.MAX_SIM)),
            },
            sparse_vectors_config=_SPARSE_CONFIG,
        ):
            self._create_indexes(self.collection, MEMORY_INDEXES)
        params = self._call(lambda: self._client.get_collection(self.collection)).config.params
        self._parts = isinstance(params.vectors, dict) and PARTS in params.vectors
        sparse = (params.sparse_vectors or {}).get(SPARSE)
        if sparse is not None and sparse.modifier == qm.Modifier.IDF:
            # Made before decision 0029: Qdrant's collection-wide IDF would multiply the
            # query's reference IDF. The stored vectors hold BM25 document weights either
            # way; only the modifier changes (Qdrant applies it at query time).
            self._call(functools.partial(
                self._client.update_collection, self.collection,
                sparse_vectors_config=_SPARSE_CONFIG))
            log.info("keyword_idf_migrated", collection=self.collection)
        if self._create_collection(
            self._audit_collection,
            vectors_config={_AUDIT_VECTOR: qm.VectorParams(size=1, distance=qm.Distance.DOT)},
        ):
            self._create_indexes(self._audit_collection, AUDIT_INDEXES)

    def _create_collection(self, name: str, **config: Any) -> bool:
        """Create `name` unless it exists; True when it has to be (re)indexed.

        Worker processes starting together on a fresh server all see the collection missing
        and all ask to create it: Qdrant refuses all but one. A refusal is fine when the
        collection exists afterwards; the indexes are then asked for again (idempotent in
        Qdrant), as the winner may not have made them yet."""
        if self._call(lambda: self._client.collection_exists(name)):
            return False
        try:
            self._call(lambda: self._client.create_collection(name, **config))
        except StoreRejected:
            if not self._call(lambda: self._client.collection_exists(name)):
                raise
        return True

    def _create_indexes(self, collection: str, indexes: Sequence[tuple[str, str]]) -> None:
        if not self._indexes:
            return
        for name, kind in indexes:
            schema: Any = (
                qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)
                if kind == "tenant" else _SCHEMA[kind]
            )
            self._call(functools.partial(
                self._client.create_payload_index, collection, name, schema))

    def _read_meta(self) -> dict[str, Any] | None:
        found = self._call(lambda: self._client.retrieve(
            self._audit_collection, [AUDIT_META_ID], with_payload=True
        ))
        if not found or found[0].payload is None:
            return None
        return {k: v for k, v in found[0].payload.items() if k != "kind"}

    def _write_meta(self, meta: dict[str, Any]) -> None:
        point = qm.PointStruct(
            id=AUDIT_META_ID, vector={_AUDIT_VECTOR: [1.0]}, payload={"kind": "meta", **meta}
        )
        self._call(lambda: self._client.upsert(self._audit_collection, [point], wait=True))

    def ping(self) -> None:
        self._call(lambda: self._client.get_collections())

    def close(self) -> None:
        if self._shares_client:
            return
        with contextlib.suppress(Exception):
            self._client.close()

    def _upsert(self, points: Sequence[PointData]) -> None:
        converted = []
        for p in points:
            vector: dict[str, Any] = {}
            if p.dense is not None:
                vector[DENSE] = p.dense
            if p.parts and self._parts:
                vector[PARTS] = p.parts
            if p.sparse is not None and p.sparse[0]:
                vector[SPARSE] = qm.SparseVector(indices=p.sparse[0], values=p.sparse[1])
            converted.append(qm.PointStruct(id=p.id, vector=vector, payload=p.payload))
        self._call(lambda: self._client.upsert(self.collection, converted, wait=True))

    def _scroll(
        self, cond: AllOf, limit: int, order_by: str | None, with_vectors: bool,
        descending: bool = True,
    ) -> tuple[list[StoredPoint], str | None]:
        order = None
        if order_by is not None:
            order = qm.OrderBy(
                key=order_by,
                direction=qm.Direction.DESC if descending else qm.Direction.ASC,
            )
        records, next_offset = self._call(lambda: self._client.scroll(
            self.collection, scroll_filter=_filter(cond), limit=limit, with_payload=True,
            with_vectors=self._vector_names() if with_vectors else False, order_by=order,
        ))
        return [self._point(r) for r in records], (str(next_offset) if next_offset else None)

    def _passages(self, cond: AllOf, limit: int) -> dict[str, np.ndarray]:
        records, _ = self._call(lambda: self._client.scroll(
            self.collection, scroll_filter=_filter(cond), limit=limit, with_payload=False,
            with_vectors=[PARTS]))
        return passage_rows(records)

    @property
    def supports_parts(self) -> bool:
        return self._parts

    @staticmethod
    def _point(record: Any, score: float = 0.0) -> StoredPoint:
        return stored_point(record, score)

    def _search_batch(
        self, cond: AllOf, queries: Sequence[VectorQuery], limit: int,
        score_threshold: float | None, fields: Sequence[str] | None,
    ) -> list[list[StoredPoint]]:
        flt = _filter(cond)
        # `fields`: None for the whole payload, empty for none (ids and scores only).
        payload: Any = (True if fields is None
                        else qm.PayloadSelectorInclude(include=list(fields)) if fields else False)
        requests = [
            qm.QueryRequest(
                query=_vector(q), using=q.using, filter=flt, limit=limit, with_payload=payload,
                score_threshold=score_threshold,
            )
            for q in queries
        ]
        results = self._call(lambda: self._client.query_batch_points(self.collection, requests))
        return [[self._point(p, p.score) for p in r.points] for r in results]

    def _count(self, cond: AllOf) -> int:
        return self._call(lambda: self._client.count(
            self.collection, count_filter=_filter(cond), exact=True
        ).count)

    def _scan(
        self, offset: str | None, limit: int, with_vectors: bool
    ) -> tuple[list[StoredPoint], str | None]:
        records, next_offset = self._call(lambda: self._client.scroll(
            self.collection, offset=offset, limit=limit, with_payload=True,
            with_vectors=self._vector_names() if with_vectors else False,
        ))
        return [self._point(r) for r in records], (str(next_offset) if next_offset else None)

    def _facet(self, cond: AllOf, key: str, limit: int) -> list[tuple[str, int]]:
        found = self._call(lambda: self._client.facet(
            self.collection, key, facet_filter=_filter(cond), limit=limit, exact=True
        ))
        return [(str(hit.value), int(hit.count)) for hit in found.hits]

    def _set_payload(self, cond: AllOf, payload: dict[str, Any]) -> None:
        self._call(lambda: self._client.set_payload(
            self.collection, payload=payload, points=_filter(cond), wait=True
        ))

    def _delete(self, cond: AllOf) -> None:
        self._call(lambda: self._client.delete(
            self.collection, points_selector=qm.FilterSelector(filter=_filter(cond)), wait=True
        ))

    def _append_audit(self, events: Sequence[AuditEvent]) -> None:
        points = [
            qm.PointStruct(id=audit_point_id(e), vector={_AUDIT_VECTOR: [1.0]},
                           payload=audit_payload(e))
            for e in events
        ]
        self._call(lambda: self._client.upsert(self._audit_collection, points, wait=True))

    def _redact_audit(self, cond: AllOf) -> None:
        self._call(lambda: self._client.set_payload(
            self._audit_collection, payload={"before": None, "after": None},
            points=_filter(cond), wait=True,
        ))

    def _read_audit(self, cond: AllOf, limit: int) -> list[AuditEvent]:
        records, _ = self._call(lambda: self._client.scroll(
            self._audit_collection, scroll_filter=_filter(cond), limit=limit, with_payload=True,
            order_by=qm.OrderBy(key="at_ts", direction=qm.Direction.ASC),
        ))
        return [AuditEvent.model_validate(r.payload) for r in records]
