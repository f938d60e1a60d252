"""Store adapter for an embedded Qdrant Edge shard (one process owns the files)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np
import qdrant_edge as qe

from memoryd.platform.errors import ConfigurationError, StoreUnavailable
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
from memoryd.store.scoring_table import (
    SCORING_FIELDS,
    RankedLists,
    ScoringCache,
    ScoringTable,
    ranked_lists,
    union_ids,
)

log = get_logger("memoryd.store.edge")

_AUDIT_VECTOR = "unit"
_SCHEMA = {
    "keyword": qe.PayloadSchemaType.Keyword, "datetime": qe.PayloadSchemaType.Datetime,
    "float": qe.PayloadSchemaType.Float,
    "integer": qe.PayloadSchemaType.Integer,
}


def _translate(cond: Condition) -> Any:
    if isinstance(cond, Match):
        if isinstance(cond.value, bool):
            # qdrant-edge-py 0.9 matches no boolean value at all: refuse rather than miss.
            raise TypeError(f"cannot filter {cond.key} on a boolean in Qdrant Edge")
        return qe.FieldCondition(cond.key, match=qe.MatchValue(cond.value))
    if isinstance(cond, AnyOf):
        return qe.FieldCondition(cond.key, match=qe.MatchAny(list(cond.values)))
    if isinstance(cond, Between):
        if is_datetime_range(cond):
            rng: Any = qe.RangeDateTime(
                gte=iso(cond.gte), lte=iso(cond.lte), gt=iso(cond.gt), lt=iso(cond.lt)
            )
        else:
            rng = qe.RangeFloat(
                gte=as_float(cond.gte), lte=as_float(cond.lte),
                gt=as_float(cond.gt), lt=as_float(cond.lt),
            )
        return qe.FieldCondition(cond.key, range=rng)
    if isinstance(cond, IdIn):
        return qe.HasIdCondition(set(cond.ids))
    if isinstance(cond, AllOf):
        return qe.Filter(must=[_translate(c) for c in cond.conditions])
    if isinstance(cond, OneOf):
        return qe.Filter(should=[_translate(c) for c in cond.conditions])
    if isinstance(cond, NoneOf):
        return qe.Filter(must_not=[_translate(c) for c in cond.conditions])
    raise TypeError(f"unknown condition {cond!r}")


def _vector(query: VectorQuery) -> Any:
    if isinstance(query.vector, tuple):
        return qe.SparseVector(query.vector[0], query.vector[1])
    if query.using == PARTS:
        return [query.vector]  # one query vector against each memory's parts (MaxSim)
    return query.vector


def _dense_params(dim: int) -> dict[str, qe.EdgeVectorParams]:
    return {
        DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
        PARTS: qe.EdgeVectorParams(
            size=dim, distance=qe.Distance.Cosine,
            multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim)),
    }


def _sparse_params() -> dict[str, qe.EdgeSparseVectorParams]:
    # No engine IDF: the query carries a fixed reference IDF, so no stored data moves a
    # user's keyword scores (docs/decisions/0029).
    return {SPARSE: qe.EdgeSparseVectorParams()}


def _filter(cond: AllOf) -> qe.Filter:
    return qe.Filter(must=[_translate(c) for c in cond.conditions])


def _ids_of(cond: AllOf) -> tuple[str, ...] | None:
    """The ids a write's filter is limited to (the public writes always name them)."""
    for c in cond.conditions:
        if isinstance(c, IdIn):
            return c.ids
    return None


class _WriteGate:
    """Writes share it; a compaction holds it alone, so that no write lands in a shard
    while its live points are being copied. A thread already inside enters again."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._inside = 0
        self._closed = False
        self._mine = threading.local()

    @contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._mine, "depth", 0)
        if depth == 0:
            with self._cond:
                while self._closed:
                    self._cond.wait()
                self._inside += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            if depth == 0:
                with self._cond:
                    self._inside -= 1
                    self._cond.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        with self._cond:
            while self._closed:
                self._cond.wait()
            self._closed = True
            while self._inside:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


# A compaction builds `<shard>.compacting`, renames it `<shard>.ready` once complete, then
# swaps it in (the old files go to `<shard>.old`, removed once the old shard is closed).
_BUILDING, _READY, _OLD = ".compacting", ".ready", ".old"
# A replaced shard stays open this long for reads that started on it before the swap
# (a read is one shard call: milliseconds).
RETIRE_AFTER_S = 1.0
_COPY_PAGE = 2000


def _undecodable(exc: Exception) -> bool:
    """The engine could read the point's bytes but not decode its payload (the binding
    raises plain Exceptions: "Failed to decode value: ... recursion limit exceeded")."""
    text = str(exc).lower()
    return "decode" in text or "deserializ" in text or "recursion limit" in text


def settle_compaction(path: Path) -> None:
    """Finish or undo a compaction a crash interrupted: a complete copy replaces the
    shard, an incomplete one and the replaced files are removed."""
    ready, old = path.with_name(path.name + _READY), path.with_name(path.name + _OLD)
    if ready.exists():
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
        ready.rename(path)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(path.with_name(path.name + _BUILDING), ignore_errors=True)


class EdgeStore(Store):
    """`search_threads`: the shard's own search pool. One by default: the query embedder
    already keeps the cores busy, and a second thread made the shard's two-list query no
    faster (docs/decisions/0009-request-path-overheads.md).

    `cache_points`: how many points' scoring fields (`SCORING_FIELDS`) searches read from
    memory instead of the shard (`shared/store/scoring_table.py`; 0: off). A thread reads
    them in once the shard is open, so that the first searches after a start find them too
    (100k points: about a second of one core, once)."""

    def __init__(
        self, root: Path, collection: str, *, audit: bool = True, search_threads: int = 1,
        cache_points: int = 0,
    ) -> None:
        super().__init__(collection)
        self._root = root
        self._search_threads = search_threads
        self._fields = ScoringCache(cache_points)
        self._warming: threading.Thread | None = None
        self._stop_warming = threading.Event()
        self._mem: qe.EdgeShard | None = None
        self._audit: qe.EdgeShard | None = None
        self._with_audit = audit
        self._lock = threading.Lock()
        self._writes = _WriteGate()
        self._compacting = threading.Lock()
        self._configs: dict[str, qe.EdgeConfig] = {}
        self._retired: list[tuple[qe.EdgeShard, Path]] = []
        self._parts = False

    def sibling(self, collection: str) -> EdgeStore:
        return EdgeStore(self._root, collection, audit=False,
                         search_threads=self._search_threads, cache_points=self._fields.capacity)

    def drop(self) -> None:
        self.close()
        shutil.rmtree(self._root / self.collection, ignore_errors=True)

    @property
    def _shard(self) -> qe.EdgeShard:
        if self._mem is None:
            raise StoreUnavailable("the embedded store is closed")
        return self._mem

    @property
    def _audit_shard(self) -> qe.EdgeShard:
        if self._audit is None:
            raise StoreUnavailable("the embedded store is closed")
        return self._audit

    def _open(self, path: Path, config: qe.EdgeConfig, reopen: qe.EdgeConfig) -> qe.EdgeShard:
        """`reopen` sets what may change on an existing shard (its search threads); it
        leaves the dense vectors out, so that a store of another model still opens and
        `ensure_schema` can name both models."""
        try:
            settle_compaction(path)
            if (path / "wal").exists():
                return qe.EdgeShard.load(str(path), reopen)
            path.mkdir(parents=True, exist_ok=True)
            return qe.EdgeShard.create(str(path), config)
        except Exception as exc:  # the binding raises plain Exceptions
            if "WouldBlock" in str(exc) or "lock" in str(exc).lower():
                raise ConfigurationError(
                    f"the embedded store at {path} is open in another process; "
                    "embedded mode runs in one process (stop the other memoryd first)"
                ) from exc
            raise

    def _create_if_missing(self, dim: int) -> None:
        with self._lock:
            if self._mem is not None:
                return
            sparse = _sparse_params()
            mem_config = qe.EdgeConfig(
                vectors=_dense_params(dim), sparse_vectors=sparse,
                max_search_threads=self._search_threads,
            )
            path = self._root / self.collection
            self._migrate_keyword_idf(path)
            self._mem = self._open(
                path, mem_config,
                qe.EdgeConfig(sparse_vectors=sparse, max_search_threads=self._search_threads),
            )
            self._parts = PARTS in self._config_of(path).vectors
            self._start_warming()
            if not self._with_audit:
                self._ensure_indexes(((self._mem, MEMORY_INDEXES),))
                return
            audit_config = qe.EdgeConfig(
                vectors={_AUDIT_VECTOR: qe.EdgeVectorParams(size=1, distance=qe.Distance.Dot)},
                max_search_threads=self._search_threads,
            )
            self._audit = self._open(self._root / f"{self.collection}_audit", audit_config,
                                     audit_config)
            self._ensure_indexes(
                ((self._shard, MEMORY_INDEXES), (self._audit_shard, AUDIT_INDEXES))
            )

    # ---- compaction: forgotten text out of every file --------------------------------

    def compact(self) -> dict[str, Any]:
        """Rebuild each shard from its live points alone, then swap it in.

        Deleting a point, or nulling a payload field, leaves the old bytes in the shard's
        segment files and its write-ahead log until Qdrant happens to rewrite them (a WAL
        file holds 32 MB of updates). A rebuilt shard holds only what is live now: after
        the swap no file under the shard's directory contains a deleted point or an erased
        payload. Writes wait meanwhile (reads go on); cost: one copy of the shard.
        A point whose payload cannot be read is left out and reported (`unreadable`,
        ids per shard) instead of stopping the compaction (`_copy_page`).
        """
        with self._lock:
            shards = [(self._root / self.collection, "_mem")]
            if self._with_audit:
                shards.append((self._root / f"{self.collection}_audit", "_audit"))
        copied: dict[str, Any] = {}
        unreadable: dict[str, list[str]] = {}
        started = time.monotonic()
        with self._compacting:
            with self._writes.alone():
                for path, attr in shards:
                    old = getattr(self, attr)
                    if old is None:
                        continue
                    skipped: list[str] = []
                    copied[path.name] = self._rebuild(old, path, attr, skipped)
                    if skipped:
                        unreadable[path.name] = skipped
            # Writes go on now; reads that began on a replaced shard end before it closes.
            time.sleep(RETIRE_AFTER_S if copied else 0.0)
            self._close_retired()
        report: dict[str, Any] = {"points": copied,
                                  "seconds": round(time.monotonic() - started, 3)}
        if unreadable:
            report["unreadable"] = unreadable
        return report

    @staticmethod
    def _copy_page(old: qe.EdgeShard, offset: Any, shard: str,
                   unreadable: list[str]) -> tuple[list[Any], Any]:
        """One page of points to copy, whole. A point whose payload the engine cannot
        decode (JSON nested past its recursion limit, written before metadata was bounded)
        cannot be copied: it is left out, its id added to `unreadable` and logged, and the
        rest of the page is copied, so one such point never stops an erasure. Its bytes
        leave the disk with the old shard; every read of it already failed."""
        try:
            return cast(tuple[list[Any], Any], old.scroll(qe.ScrollRequest(
                offset=offset, limit=_COPY_PAGE, with_payload=True, with_vector=True)))
        except Exception:  # the binding raises plain Exceptions; find the point(s)
            pass
        bare, next_offset = old.scroll(qe.ScrollRequest(
            offset=offset, limit=_COPY_PAGE, with_payload=False, with_vector=True))
        records: list[Any] = []
        for record in bare:
            try:
                [whole] = old.retrieve([record.id], True, False)
            except Exception as exc:  # noqa: BLE001  (no payload text in the log)
                if not _undecodable(exc):
                    raise  # anything else fails the compaction; the old shard stays whole
                unreadable.append(str(record.id))
                log.warning("edge_point_unreadable", shard=shard, point_id=str(record.id),
                            error=type(exc).__name__)
                continue
            records.append(qe.Point(record.id, record.vector or {}, whole.payload))
        return records, next_offset

    def _migrate_keyword_idf(self, path: Path) -> None:
        """Move a shard made before decision 0029 (Qdrant's IDF modifier on its keyword
        vectors) to the current configuration. The engine opens a shard only with the
        modifier it was made with, so the shard is copied, as a compaction copies it, into
        one without the modifier; the stored vectors (BM25 document weights) are the same.
        A crash midway leaves the old shard whole (`settle_compaction`)."""
        settle_compaction(path)
        config = path / "edge_config.json"
        if not config.exists():
            return
        sparse = json.loads(config.read_text()).get("sparse_vectors") or {}
        if not any(str((spec or {}).get("modifier", "")).lower() == "idf"
                   for spec in sparse.values()):
            return
        started = time.monotonic()
        legacy = {name: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf) for name in sparse}
        old = qe.EdgeShard.load(str(path), qe.EdgeConfig(
            sparse_vectors=legacy, max_search_threads=self._search_threads))
        unreadable: list[str] = []
        try:
            count = self._copy_shard(old, path, "_mem", unreadable)
        finally:
            old.close()
        settle_compaction(path)
        log.info("keyword_idf_migrated", shard=path.name, points=count,
                 unreadable=len(unreadable), seconds=round(time.monotonic() - started, 3))

    def _rebuild(self, old: qe.EdgeShard, path: Path, attr: str,
                 unreadable: list[str]) -> int:
        count = self._copy_shard(old, path, attr, unreadable)
        with self._lock:
            old.flush()
            self._retired.append((old, path.with_name(path.name + _OLD)))
            settle_compaction(path)  # the complete copy replaces the shard's files
            setattr(self, attr, qe.EdgeShard.load(str(path), self._reopen_config(attr)))
        return count

    def _copy_shard(self, old: qe.EdgeShard, path: Path, attr: str,
                    unreadable: list[str]) -> int:
        """Copy `old`'s live points into a new shard beside `path` (current configuration),
        left as `<path>.ready` for `settle_compaction` to swap in."""
        building = path.with_name(path.name + _BUILDING)
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        config = self._config_of(path)
        new = qe.EdgeShard.create(str(building), config)
        count = 0
        try:
            # Indexes first: kept up point by point, cheaper here than built at the end.
            indexes = MEMORY_INDEXES if attr == "_mem" else AUDIT_INDEXES
            self._ensure_indexes(((new, indexes),))
            offset: Any = None
            while True:
                records, offset = self._copy_page(old, offset, path.name, unreadable)
                if records:
                    new.update(qe.UpdateOperation.upsert_points(
                        [qe.Point(r.id, r.vector or {}, r.payload) for r in records]))
                    count += len(records)
                if offset is None:
                    break
            new.flush()
        finally:
            new.close()
        building.rename(path.with_name(path.name + _READY))
        return count

    def _config_of(self, path: Path) -> qe.EdgeConfig:
        """The shard's own configuration, as it recorded it (dense size, sparse, distance)."""
        raw = json.loads((path / "edge_config.json").read_text())
        vectors = {
            name: qe.EdgeVectorParams(
                size=int(spec["size"]),
                distance=qe.Distance.Dot if str(spec["distance"]).lower() == "dot"
                else qe.Distance.Cosine,
                multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim)
                if spec.get("multivector_config") else None)
            for name, spec in (raw.get("vectors") or {}).items()
        }
        sparse = {name: qe.EdgeSparseVectorParams()
                  for name in (raw.get("sparse_vectors") or {})}
        return qe.EdgeConfig(vectors=vectors, sparse_vectors=sparse or None,
                             max_search_threads=self._search_threads)

    def _reopen_config(self, attr: str) -> qe.EdgeConfig:
        if attr == "_mem":
            return qe.EdgeConfig(sparse_vectors=_sparse_params(),
                                 max_search_threads=self._search_threads)
        return qe.EdgeConfig(
            vectors={_AUDIT_VECTOR: qe.EdgeVectorParams(size=1, distance=qe.Distance.Dot)},
            max_search_threads=self._search_threads,
        )

    def _close_retired(self) -> None:
        """Close the replaced shards and remove their files (after a crash, the next open
        removes them)."""
        with self._lock:
            retired, self._retired = self._retired, []
        for shard, files in retired:
            try:
                shard.close()
            except Exception as exc:  # the binding raises plain Exceptions
                log.warning("edge_retired_close_failed", error=str(exc))
            shutil.rmtree(files, ignore_errors=True)

    def _start_warming(self) -> None:
        if not self._fields.enabled:
            return
        self._stop_warming.clear()
        self._warming = threading.Thread(target=self._warm_fields, daemon=True,
                                         name=f"edge-warm-{self.collection}")
        self._warming.start()

    def _warm_fields(self, page: int = 2000) -> None:
        selector = qe.PayloadSelector.Include(list(SCORING_FIELDS))
        offset: Any = None
        try:
            while not self._stop_warming.is_set() and self._mem is not None:
                generation = self._fields.generation
                records, offset = self._mem.scroll(qe.ScrollRequest(
                    offset=offset, limit=page, with_payload=selector, with_vector=False))
                # A page that a write overlapped is not kept; searches read those points.
                self._fields.fill(generation, {str(r.id): dict(r.payload or {})
                                               for r in records})
                if offset is None or len(self._fields) + page > self._fields.capacity:
                    return
        except Exception as exc:  # the binding raises plain Exceptions; a warm-up is optional
            log.warning("edge_field_cache_warm_failed", error=str(exc))

    def _ensure_indexes(
        self, shards: Sequence[tuple[qe.EdgeShard, tuple[tuple[str, str], ...]]]
    ) -> None:
        for shard, indexes in shards:
            existing = set(shard.info().payload_schema)
            for name, kind in indexes:
                if name in existing:
                    continue
                schema: Any = (
                    qe.KeywordIndexParams(is_tenant=True) if kind == "tenant" else _SCHEMA[kind]
                )
                shard.update(qe.UpdateOperation.create_field_index(name, schema))

    def _meta_file(self) -> Path:
        return self._root / f"{self.collection}.meta.json"

    def _read_meta(self) -> dict[str, Any] | None:
        path = self._meta_file()
        if not path.exists():
            return None
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def _write_meta(self, meta: dict[str, Any]) -> None:
        tmp = self._meta_file().with_suffix(".tmp")
        tmp.write_text(json.dumps(meta))
        tmp.replace(self._meta_file())
        # Keep a copy beside the audit trail too, the same record the server adapter keeps.
        with self._writes.shared():
            self._audit_shard.update(qe.UpdateOperation.upsert_points(
                [qe.Point(AUDIT_META_ID, {_AUDIT_VECTOR: [1.0]}, {"kind": "meta", **meta})]
            ))

    def ping(self) -> None:
        self._shard.info()

    def close(self) -> None:
        self._stop_warming.set()
        if self._warming is not None and self._warming is not threading.current_thread():
            self._warming.join()  # a page at most: the shard must not close under a read
        self._fields.forget(None)
        self._close_retired()
        with self._lock:
            for shard in (self._mem, self._audit):
                if shard is not None:
                    shard.flush()
                    shard.close()
            self._mem = self._audit = None

    def flush(self) -> None:
        self._shard.flush()
        if self._with_audit:
            self._audit_shard.flush()

    def _upsert(self, points: Sequence[PointData]) -> None:
        converted = []
        for p in points:
            vector: dict[str, Any] = {}
            if p.dense is not None:
                vector[DENSE] = p.dense
            if p.parts and self._parts:
                vector[PARTS] = p.parts
            if p.sparse is not None and p.sparse[0]:
                vector[SPARSE] = qe.SparseVector(p.sparse[0], p.sparse[1])
            converted.append(qe.Point(p.id, vector, p.payload))
        try:
            with self._writes.shared():
                self._shard.update(qe.UpdateOperation.upsert_points(converted))
        finally:
            self._fields.forget(p.id for p in points)

    def _scroll(
        self, cond: AllOf, limit: int, order_by: str | None, with_vectors: bool,
        descending: bool = True,
    ) -> tuple[list[StoredPoint], str | None]:
        order = None
        if order_by is not None:
            direction = qe.Direction.Desc if descending else qe.Direction.Asc
            order = qe.OrderBy(order_by, direction=direction)
        records, next_offset = self._shard.scroll(qe.ScrollRequest(
            limit=limit, filter=_filter(cond), with_payload=True,
            with_vector=self._vector_names() if with_vectors else False, order_by=order,
        ))
        return [self._point(r) for r in records], (str(next_offset) if next_offset else None)

    def _passages(self, cond: AllOf, limit: int) -> dict[str, np.ndarray]:
        records, _ = self._shard.scroll(qe.ScrollRequest(
            limit=limit, filter=_filter(cond), with_payload=False, with_vector=[PARTS]))
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
                        else qe.PayloadSelector.Include(list(fields)) if fields else False)
        requests = [
            qe.QueryRequest(
                limit=limit, query=qe.Query.Nearest(_vector(q), using=q.using), filter=flt,
                with_payload=payload, score_threshold=score_threshold,
            )
            for q in queries
        ]
        results = self._shard.query_batch(qe.QueryBatchRequest(requests))
        return [[self._point(r, r.score) for r in hits] for hits in results]

    def _keyword_holders(self, cond: AllOf, ids: Sequence[int], cap: int) -> list[int]:
        # The binding's results counted as they come: building a point per hit cost more
        # than the query itself (a 2,000-memory user, 8 terms: 7 ms against 51).
        flt = _filter(cond)
        results = self._shard.query_batch(qe.QueryBatchRequest([
            qe.QueryRequest(limit=cap, query=qe.Query.Nearest(qe.SparseVector([i], [1.0]),
                                                              using=SPARSE),
                            filter=flt, with_payload=False)
            for i in ids]))
        return [sum(1 for r in hits if r.score > 0) for hits in results]

    def _search_candidates(
        self, cond: AllOf, queries: Sequence[VectorQuery], limit: int
    ) -> RankedLists:
        """Ids and scores from the shard, the fields from the cache; what the cache lacks,
        one retrieve reads and the cache keeps."""
        if not self._fields.enabled:
            return super()._search_candidates(cond, queries, limit)
        generation = self._fields.generation  # before the shard is read: see ScoringCache
        table = self._fields.table  # this search's snapshot: a full cache starts a new one
        flt = _filter(cond)
        requests = [
            qe.QueryRequest(
                limit=limit, query=qe.Query.Nearest(_vector(q), using=q.using), filter=flt,
                with_payload=False,
            )
            for q in queries
        ]
        lists = []
        for hits in (self._shard.query_batch(qe.QueryBatchRequest(requests)) if requests
                     else []):
            lists.append(([str(r.id) for r in hits],
                          np.fromiter((r.score for r in hits), np.float64, len(hits))))
        ids = union_ids(lists)
        rows = table.rows_of(ids)  # once: a write's invalidation after this only reorders
        if rows.min(initial=0) >= 0:
            return ranked_lists(lists, ids, rows, table)
        wanted: list[qe.PointId] = [ids[i] for i in np.flatnonzero(rows < 0)]
        read = {str(r.id): dict(r.payload or {}) for r in self._shard.retrieve(
            wanted, qe.PayloadSelector.Include(list(SCORING_FIELDS)), False)}
        self._fields.fill(generation, read)
        # A point deleted between the query and the retrieve is left out, as a later query
        # would leave it out.
        extra = ScoringTable(table.threads, len(read))
        extra.add(read)
        return ranked_lists(lists, ids, rows, table, extra)

    def _count(self, cond: AllOf) -> int:
        return self._shard.count(qe.CountRequest(exact=True, filter=_filter(cond)))

    def _scan(
        self, offset: str | None, limit: int, with_vectors: bool
    ) -> tuple[list[StoredPoint], str | None]:
        records, next_offset = self._shard.scroll(qe.ScrollRequest(
            offset=offset, limit=limit, with_payload=True,
            with_vector=self._vector_names() if with_vectors else False,
        ))
        return [self._point(r) for r in records], (str(next_offset) if next_offset else None)

    def _facet(self, cond: AllOf, key: str, limit: int) -> list[tuple[str, int]]:
        found = self._shard.facet(qe.FacetRequest(key, limit=limit, exact=True,
                                                  filter=_filter(cond)))
        return [(str(hit.value), int(hit.count)) for hit in found.hits]

    def _set_payload(self, cond: AllOf, payload: dict[str, Any]) -> None:
        try:
            with self._writes.shared():
                self._shard.update(
                    qe.UpdateOperation.set_payload_by_filter(_filter(cond), payload))
        finally:
            if self._fields.touches(payload):
                self._fields.forget(_ids_of(cond))

    def _delete(self, cond: AllOf) -> None:
        try:
            with self._writes.shared():
                self._shard.update(qe.UpdateOperation.delete_points_by_filter(_filter(cond)))
        finally:
            self._fields.forget(_ids_of(cond))

    def _append_audit(self, events: Sequence[AuditEvent]) -> None:
        points = [
            qe.Point(audit_point_id(e), {_AUDIT_VECTOR: [1.0]}, audit_payload(e)) for e in events
        ]
        with self._writes.shared():
            self._audit_shard.update(qe.UpdateOperation.upsert_points(points))

    def _redact_audit(self, cond: AllOf) -> None:
        with self._writes.shared():
            self._audit_shard.update(qe.UpdateOperation.set_payload_by_filter(
                _filter(cond), {"before": None, "after": None}
            ))

    def _read_audit(self, cond: AllOf, limit: int) -> list[AuditEvent]:
        records, _ = self._audit_shard.scroll(qe.ScrollRequest(
            limit=limit, filter=_filter(cond), with_payload=True,
            order_by=qe.OrderBy("at_ts", direction=qe.Direction.Asc),
        ))
        return [AuditEvent.model_validate(r.payload) for r in records]
