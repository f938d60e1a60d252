"""The embedded store's in-memory scoring fields: what it keeps, and when it refuses to."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from shared.models import Owner
from shared.store import DENSE, SCORING_FIELDS, PointData, VectorQuery
from shared.store.edge import EdgeStore
from shared.store.field_cache import FieldCache

FIELDS = ("importance", "thread_id")


def test_lookup_returns_the_asked_fields_and_the_missing_ids() -> None:
    cache = FieldCache(FIELDS, 10)
    assert cache.fill(cache.generation, {"a": {"importance": 3, "thread_id": "t", "x": 1},
                                         "b": {"importance": 5}})
    found, missing = cache.lookup(["a", "b", "c"], ["importance"])
    assert found == {"a": {"importance": 3}, "b": {"importance": 5}}
    assert missing == ["c"]
    # A field the point does not have stays absent, as in the store's own payload.
    found, _ = cache.lookup(["b"], FIELDS)
    assert found == {"b": {"importance": 5}}


def test_a_fill_begun_before_a_write_is_refused() -> None:
    cache = FieldCache(FIELDS, 10)
    before = cache.generation  # a search reads the store...
    cache.forget(["a"])  # ...a write lands and invalidates...
    assert not cache.fill(before, {"a": {"importance": 1}})  # ...so its old read is dropped
    assert cache.lookup(["a"], FIELDS) == ({}, ["a"])
    assert cache.fill(cache.generation, {"a": {"importance": 2}})
    assert cache.lookup(["a"], FIELDS)[0] == {"a": {"importance": 2}}


def test_forget_drops_the_named_ids_or_all() -> None:
    cache = FieldCache(FIELDS, 10)
    cache.fill(cache.generation, {i: {"importance": 1} for i in "abc"})
    cache.forget(["a"])
    assert cache.lookup("abc", FIELDS)[1] == ["a"]
    cache.forget(None)
    assert len(cache) == 0


def test_covers_only_its_fields_and_a_full_cache_starts_over() -> None:
    cache = FieldCache(FIELDS, 3)
    assert cache.covers(["importance"]) and cache.covers(FIELDS)
    assert not cache.covers(["importance", "content"]) and not cache.covers(None)
    cache.fill(cache.generation, {i: {"importance": 1} for i in "abc"})
    cache.fill(cache.generation, {"d": {"importance": 2}})
    assert len(cache) == 1 and cache.lookup(["d"], FIELDS)[0] == {"d": {"importance": 2}}


def test_off_when_sized_zero() -> None:
    cache = FieldCache(FIELDS, 0)
    assert not cache.enabled and not cache.covers(["importance"])
    assert not cache.fill(cache.generation, {"a": {"importance": 1}})


def test_an_opened_store_reads_the_fields_in_and_searches_use_them(tmp_path: Path) -> None:
    """After a restart the first searches find the scoring fields in memory already."""
    owner = Owner(tenant_id="t1", user_id="alice")
    first = EdgeStore(tmp_path, "memories", cached_fields=SCORING_FIELDS, cache_points=100)
    first.ensure_schema("test-model", 4)
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")) for i in range(30)]
    first.upsert(owner, [
        PointData(i, {"tenant_id": "t1", "user_id": "alice", "importance": n, "state": "active"},
                  [1.0, float(n), 0.0, 0.0])
        for n, i in enumerate(ids)
    ])
    first.close()

    again = EdgeStore(tmp_path, "memories", cached_fields=SCORING_FIELDS, cache_points=100)
    again.ensure_schema("test-model", 4)
    assert again._warming is not None
    again._warming.join(timeout=30)
    assert len(again._fields) == 30
    [hits] = again.search_many(owner, [], [VectorQuery(DENSE, [1.0, 29.0, 0.0, 0.0])], 3,
                               ["importance"])
    assert [h.payload for h in hits] == [{"importance": 29}, {"importance": 28},
                                         {"importance": 27}]
    again.close()
    assert len(again._fields) == 0


def test_searches_racing_writes_never_keep_a_value_the_writes_replaced(tmp_path: Path) -> None:
    """Searches fill the cache while a writer changes the field over and over; once the
    writer stops, every search reads its last value. (Whether a fill that read the shard
    before a write may land after it is decided by the generation, tested above; this
    race is too narrow to hit on purpose here.)"""
    owner = Owner(tenant_id="t1", user_id="alice")
    store = EdgeStore(tmp_path, "memories", cached_fields=SCORING_FIELDS, cache_points=1000)
    store.ensure_schema("test-model", 4)
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"r{i}")) for i in range(40)]
    store.upsert(owner, [
        PointData(i, {"tenant_id": "t1", "user_id": "alice", "importance": 0, "state": "active"},
                  [1.0, float(n), 1.0, 0.0])
        for n, i in enumerate(ids)
    ])
    query = [VectorQuery(DENSE, [1.0, 20.0, 1.0, 0.0])]
    stop = threading.Event()
    errors: list[BaseException] = []

    def search_until_stopped() -> None:
        try:
            while not stop.is_set():
                store.search_many(owner, [], query, 40, ["importance"])
        except BaseException as exc:  # reported after join
            errors.append(exc)

    searchers = [threading.Thread(target=search_until_stopped) for _ in range(3)]
    for thread in searchers:
        thread.start()
    for value in range(1, 31):
        store.set_payload(owner, ids[value % 2::2], {"importance": value})
    stop.set()
    for thread in searchers:
        thread.join(timeout=30)
    assert not errors
    [hits] = store.search_many(owner, [], query, 40, ["importance"])
    assert len(hits) == 40
    # The last write to the odd ids was 29, to the even ids 30.
    assert {h.id: h.payload["importance"] for h in hits} == {
        point_id: 30 if n % 2 == 0 else 29 for n, point_id in enumerate(ids)
    }
    store.close()
