"""The store every process uses: the memory collection of the active index generation.

A re-embedding (`shared/index/reindex.py`) builds a new physical collection beside the live one
and then moves the pointer. The pointer is a durable record in the home store's metadata
(the collection named by `MEMORYD_COLLECTION`, which also keeps the audit trail for every
generation); with qdrant-client the alias `<collection>_active` follows it, for operators
and snapshots. The model name and dimension in the record are the store's embedder from
then on: a process started with another `MEMORYD_EMBEDDER` logs a warning and follows
the record, since a restart after a re-embedding must not take the service down.

Each request and each task sees one generation from start to end (a `View`, pinned in a
context variable): a query embedded by the old model is never sent to the new collection.
Mutations run inside a write region of the fence (`shared/index/write_fence.py`), which is how
the switch knows no write is in flight and which ids changed during the copy.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, Field

from memoryd.embeddings import CachedQueryEmbedder, Embedder
from memoryd.index.write_fence import WriteFence
from memoryd.platform.errors import TransientError
from memoryd.platform.logs import get_logger
from memoryd.records.models import AuditEvent, Owner
from memoryd.store.base import PointData, Store
from memoryd.store.conditions import Condition

log = get_logger("memoryd.store")

ALIAS_SUFFIX = "_active"


class PhysicalIndex(BaseModel):
    collection: str
    embedder: str
    dim: int


class IndexRecord(PhysicalIndex):
    """The active generation, and the older ones kept as vector donors (newest first)."""

    generation: int = 0
    previous: list[PhysicalIndex] = Field(default_factory=list)


class StoreSwitched(TransientError):
    code = "store_switched"


class AuditTrail(Protocol):
    """Where every decision on a memory is recorded: the home store, for all generations."""

    def append_audit(self, events: Sequence[AuditEvent]) -> None: ...
    def erase_audit_content(self, owner: Owner, memory_ids: Sequence[str]) -> None: ...
    def audit_of(self, owner: Owner, memory_id: str, limit: int = 1000) -> list[AuditEvent]: ...


class FencedWrites:
    """The mutations of one generation's store, each inside the fence's write region (the
    caller holds it: `IndexRouter.writing`), with the ids it changes recorded for a copy in
    progress. Every write of live memories goes through here; reads go to the store."""

    def __init__(self, store: Store, dim: int, fence: Callable[[], WriteFence]) -> None:
        self._store = store
        self._dim = dim
        self._fence = fence

    def upsert(self, owner: Owner, points: Sequence[PointData]) -> None:
        if not points:
            return
        for point in points:
            if point.dense is not None and len(point.dense) != self._dim:
                # Embedded by a model this generation does not use.
                raise StoreSwitched("the store switched embedders during this write; retry")
        self._fence().touch(owner, [p.id for p in points])
        self._store.upsert(owner, points)

    def set_payload(self, owner: Owner, ids: Sequence[str], payload: dict[str, Any]) -> None:
        self._fence().touch(owner, ids)
        self._store.set_payload(owner, ids, payload)

    def delete(self, owner: Owner, ids: Sequence[str]) -> None:
        self._fence().touch(owner, ids)
        self._store.delete(owner, ids)

    def delete_where(self, owner: Owner, conditions: Sequence[Condition]) -> list[str]:
        """Delete what matches, a batch at a time, and return the ids (to audit them)."""
        deleted: list[str] = []
        while True:
            batch = [p.id for p in self._store.find(owner, conditions, 256)]
            if not batch:
                return deleted
            self.delete(owner, batch)
            deleted.extend(batch)


@dataclass(frozen=True)
class View:
    """One generation, as a request or a task sees it from start to end."""

    generation: int
    store: Store  # its collection: reads
    writes: FencedWrites  # its collection: writes, inside a write region
    audit: AuditTrail  # the home store's trail
    embedder: Embedder
    query_embedder: Embedder
    record: IndexRecord


_pinned: contextvars.ContextVar[View | None] = contextvars.ContextVar(
    "memoryd_index_view", default=None
)


class IndexRouter:
    """The active generation's view of the store, switched by a re-embedding: it holds the
    home store (metadata, the audit trail) and every physical collection opened."""

    def __init__(
        self,
        home: Store,
        make_embedder: Callable[[str], Embedder],
        fence: Callable[[], WriteFence],
        query_cache_size: int,
        check_every_s: float = 1.0,
    ) -> None:
        self.home = home
        self._make_embedder = make_embedder
        self._fence_factory = fence
        self._cache_size = query_cache_size
        self._check_every = check_every_s
        self._lock = threading.RLock()
        self._physical: dict[str, Store] = {home.collection: home}
        self._view: View | None = None
        self._checked_at = 0.0

    # ---- generations ----------------------------------------------------------------

    def open(self, configured: Embedder) -> View:
        """Read the record (or start one from the configured embedder) and install it."""
        self.home.create_if_missing(configured.dim)
        record = self.read_record()
        if record is None:
            self.home.ensure_schema(configured.name, configured.dim)
            record = IndexRecord(collection=self.home.collection, embedder=configured.name,
                                 dim=configured.dim)
        elif record.embedder != configured.name:
            log.warning("embedder_follows_reindex", configured=configured.name,
                        store=record.embedder, generation=record.generation)
        self._point_alias(record.collection)
        return self._install(record)

    def read_record(self) -> IndexRecord | None:
        meta = self.home.read_meta()
        if meta is None or "index" not in meta:
            return None
        return IndexRecord.model_validate(meta["index"])

    def commit(self, record: IndexRecord) -> View:
        """Make `record` the active generation: durable record first, then this process."""
        self.home.write_meta({"embedding_model": record.embedder, "dim": record.dim,
                               "index": record.model_dump(mode="json")})
        self._point_alias(record.collection)
        return self._install(record)

    def physical(self, collection: str, dim: int | None = None) -> Store:
        """The store of one physical collection, opened (and created, given `dim`) once."""
        with self._lock:
            store = self._physical.get(collection)
            if store is None:
                store = self._physical[collection] = self.home.sibling(collection)
            if dim is not None:
                store.create_if_missing(dim)
            return store

    def discard(self, collection: str) -> None:
        """Drop an old generation's collection (never the home one: it keeps the audit)."""
        if collection == self.home.collection:
            return
        with self._lock:
            store = self._physical.pop(collection, None) or self.home.sibling(collection)
        store.drop()

    def _install(self, record: IndexRecord) -> View:
        with self._lock:
            embedder = self._make_embedder(record.embedder)
            store = self.physical(record.collection, record.dim)
            view = View(
                generation=record.generation,
                store=store,
                writes=FencedWrites(store, record.dim, self._fence_factory),
                audit=self.home,
                embedder=embedder,
                query_embedder=CachedQueryEmbedder(embedder, self._cache_size),
                record=record,
            )
            self._view = view
            self._checked_at = time.monotonic()
            return view

    def _point_alias(self, collection: str) -> None:
        point = getattr(self.home, "point_alias", None)
        if point is not None:
            point(self.home.collection + ALIAS_SUFFIX, collection)

    def alias(self) -> tuple[str, str | None] | None:
        """(alias, the collection Qdrant resolves it to); None where there are no aliases."""
        target = getattr(self.home, "alias_target", None)
        if target is None:
            return None
        name = self.home.collection + ALIAS_SUFFIX
        return name, target(name)

    def refresh(self, generation: int | None = None) -> View:
        """Follow a switch made by another process (`generation`: the fence's number)."""
        view = self._current()
        wanted = self._fence_factory().generation() if generation is None else generation
        if wanted > view.generation:
            record = self.read_record()
            if record is not None and record.generation > view.generation:
                return self._install(record)
        self._checked_at = time.monotonic()
        return view

    def _current(self) -> View:
        if self._view is None:
            raise RuntimeError("the store is not open")
        return self._view

    def check_due(self) -> bool:
        return time.monotonic() - self._checked_at >= self._check_every

    def view(self) -> View:
        """The pinned view, else the active one (checked against Redis about once a second)."""
        pinned = _pinned.get()
        if pinned is not None:
            return pinned
        if self.check_due():
            try:
                return self.refresh()
            except Exception as exc:  # a Redis blip must not fail reads: keep the last view
                log.warning("index_check_failed", error=str(exc))
                self._checked_at = time.monotonic()
        return self._current()

    @contextmanager
    def pinned(self) -> Iterator[View]:
        """One generation for a whole request."""
        if _pinned.get() is not None:
            yield _pinned.get()  # type: ignore[misc]
            return
        token = _pinned.set(self.view())
        try:
            yield _pinned.get()  # type: ignore[misc]
        finally:
            _pinned.reset(token)

    @contextmanager
    def writing(self) -> Iterator[View]:
        """A write region: the generation cannot switch until it ends."""
        with self._fence_factory().region() as region:
            pinned = _pinned.get()
            if pinned is not None and pinned.generation == region.generation:
                yield pinned
                return
            view = self._current()
            if view.generation != region.generation:
                view = self.refresh(region.generation)
            token = _pinned.set(view)
            try:
                yield view
            finally:
                _pinned.reset(token)

    # ---- lifecycle ------------------------------------------------------------------

    def ping(self) -> None:
        self.view().store.ping()
        self.home.ping()

    def close(self) -> None:
        with self._lock:
            for store in self._physical.values():
                store.close()
            self._view = None

    def compact(self) -> dict[str, Any]:
        with self._lock:
            stores = dict(self._physical)
        return {name: store.compact() for name, store in stores.items()}
