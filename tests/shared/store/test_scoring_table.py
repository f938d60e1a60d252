"""The candidates' scoring fields as columns, and the embedded store's cache of them."""

from __future__ import annotations

import math
import threading
import uuid
from datetime import datetime
from pathlib import Path

import numpy as np

from memoryd.records.models import Owner
from memoryd.store import DENSE, PointData, VectorQuery
from memoryd.store.edge import EdgeStore
from memoryd.store.scoring_table import (
    ACCESS,
    ASSISTANT,
    IMPORTANCE,
    OCCURRED,
    ScoringCache,
    ScoringTable,
    ThreadCodes,
    ranked_lists,
    scoring_row,
    union_ids,
)


def test_a_row_is_the_parsed_scoring_fields() -> None:
    threads = ThreadCodes()
    row = scoring_row({"occurred_at": "2024-04-01T14:00:00+02:00", "importance": 7,
                       "access_count": 3, "thread_id": "t", "thread_seq": 4, "x": 1,
                       "cjk_share": 0.4}, threads)
    assert row == (datetime.fromisoformat("2024-04-01T12:00:00+00:00").timestamp(), 7.0, 3.0,
                   float(threads.code("t")), 4.0, 0.4, 0.0)
    plain = scoring_row({"occurred_at": "2024-04-01T12:00:00Z"}, threads)
    # Defaults: importance 5, never accessed, in no thread, language unknown, no speaker.
    assert plain[1:5] == (5.0, 0.0, -1.0, 0.0) and math.isnan(plain[5]) and plain[6] == 0.0
    # An assistant's turn: every source is an assistant's message (the store reads only
    # `sources[].role`); a memory drawn from a user's message too is not one.
    said = [{"role": "assistant"}, {"role": "assistant"}]
    assert scoring_row({"sources": said}, threads)[ASSISTANT] == 1.0
    for sources in ([{"role": "assistant"}, {"role": "user"}], [{"role": None}], [], None,
                    "assistant", [["assistant"]]):
        assert scoring_row({"sources": sources}, threads)[ASSISTANT] == 0.0, sources
    # No time counts as new; a thread without a position is no thread.
    bare = scoring_row({"thread_id": "t", "importance": None, "access_count": None}, threads)
    assert math.isinf(bare[OCCURRED]) and bare[1:5] == (5.0, 0.0, -1.0, 0.0)


def test_a_table_grows_and_keeps_every_published_row() -> None:
    table = ScoringTable(capacity=2)
    table.add({f"p{i}": {"importance": i} for i in range(5)})
    table.add({"p9": {"importance": 9}})
    rows = table.rows_of(["p3", "nope", "p9"])
    assert rows[1] == -1
    assert table.data[rows[[0, 2]], IMPORTANCE].tolist() == [3.0, 9.0]
    table.forget(["p3"])
    assert table.rows_of(["p3"]).tolist() == [-1] and len(table) == 5


def test_ranked_lists_take_rows_from_the_table_then_the_extra_and_drop_the_rest() -> None:
    table = ScoringTable()
    table.add({"a": {"importance": 1}, "b": {"importance": 2}})
    extra = ScoringTable(table.threads)
    extra.add({"c": {"importance": 3}})
    lists = [(["a", "c"], np.array([0.9, 0.8])), (["d", "b", "a"], np.array([5.0, 4.0, 3.0]))]
    ids = union_ids(lists)
    assert ids == ["a", "c", "d", "b"]
    found = ranked_lists(lists, ids, table.rows_of(ids), table, extra)
    # "d" is in neither table: deleted after the lists were read, so it leaves every list.
    assert found.ids == ["a", "c", "b"]
    assert [point_ids for point_ids, _ in found.lists] == [["a", "c"], ["b", "a"]]
    assert found.lists[1][1].tolist() == [4.0, 3.0]
    assert found.fields[:, IMPORTANCE].tolist() == [1.0, 3.0, 2.0]


def test_a_fill_begun_before_a_write_is_refused() -> None:
    cache = ScoringCache(10)
    before = cache.generation  # a search reads the store...
    cache.forget(["a"])  # ...a write lands and invalidates...
    assert not cache.fill(before, {"a": {"importance": 1}})  # ...so its old read is dropped
    assert cache.table.rows_of(["a"]).tolist() == [-1]
    assert cache.fill(cache.generation, {"a": {"importance": 2}})
    assert cache.table.data[cache.table.rows_of(["a"]), IMPORTANCE].tolist() == [2.0]


def test_forget_drops_the_named_ids_or_all_and_a_full_cache_starts_over() -> None:
    cache = ScoringCache(3)
    cache.fill(cache.generation, {i: {"importance": 1} for i in "abc"})
    cache.forget(["a"])
    assert cache.table.rows_of(list("abc")).tolist()[0] == -1 and len(cache) == 2
    cache.forget(None)
    assert len(cache) == 0
    cache.fill(cache.generation, {i: {"importance": 1} for i in "abc"})
    held = cache.table
    cache.fill(cache.generation, {"d": {"importance": 2}})
    assert len(cache) == 1 and cache.table is not held
    assert len(held) == 3  # a search holding the old table still reads it whole


def test_rewritten_points_count_against_the_size_so_dead_rows_cannot_pile_up() -> None:
    cache = ScoringCache(4)
    for round_ in range(2):  # the same point written and read again, as access counts do
        cache.forget(["a"])
        cache.fill(cache.generation, {"a": {"importance": round_}})
    assert len(cache) == 1 and cache.table.used == 2
    first = cache.table
    for round_ in range(3):
        cache.forget(["a"])
        cache.fill(cache.generation, {"a": {"importance": round_}})
    assert cache.table is not first and cache.table.used <= 4
    assert cache.table.data[cache.table.rows_of(["a"]), IMPORTANCE].tolist() == [2.0]


def test_off_when_sized_zero() -> None:
    cache = ScoringCache(0)
    assert not cache.enabled
    assert not cache.fill(cache.generation, {"a": {"importance": 1}})


def test_touches_only_the_scoring_fields() -> None:
    assert ScoringCache.touches({"importance": 3, "tags": []})
    assert not ScoringCache.touches({"content": "x", "tags": []})
    assert ScoringCache.touches({"sources": [{"role": "user"}]})  # read as `sources[].role`


def importance_by_id(store: EdgeStore, owner: Owner, query: list[float],
                     limit: int) -> dict[str, float]:
    found = store.search_candidates(owner, [], [VectorQuery(DENSE, query)], limit)
    return dict(zip(found.ids, found.fields[:, IMPORTANCE].tolist(), strict=True))


def test_an_opened_store_reads_the_fields_in_and_searches_use_them(tmp_path: Path) -> None:
    """After a restart the first searches find the scoring fields in memory already."""
    owner = Owner(tenant_id="t1", user_id="alice")
    first = EdgeStore(tmp_path, "memories", cache_points=100)
    first.ensure_schema("test-model", 4)
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")) for i in range(30)]
    first.upsert(owner, [
        PointData(i, {"tenant_id": "t1", "user_id": "alice", "importance": n, "state": "active",
                      "access_count": 2},
                  [1.0, float(n), 0.0, 0.0])
        for n, i in enumerate(ids)
    ])
    first.close()

    again = EdgeStore(tmp_path, "memories", cache_points=100)
    again.ensure_schema("test-model", 4)
    assert again._warming is not None
    again._warming.join(timeout=30)
    assert len(again._fields) == 30
    found = again.search_candidates(owner, [], [VectorQuery(DENSE, [1.0, 29.0, 0.0, 0.0])], 3)
    assert found.fields[:, IMPORTANCE].tolist() == [29.0, 28.0, 27.0]
    assert found.fields[:, ACCESS].tolist() == [2.0, 2.0, 2.0]
    assert len(again._fields) == 30  # every candidate was held: nothing read, nothing added
    again.close()
    assert len(again._fields) == 0


def test_searches_racing_writes_never_keep_a_value_the_writes_replaced(tmp_path: Path) -> None:
    """Searches fill the cache while a writer changes the field over and over; once the
    writer stops, every search reads its last value. (Whether a fill that read the shard
    before a write may land after it is decided by the generation, tested above; this
    race is too narrow to hit on purpose here.)"""
    owner = Owner(tenant_id="t1", user_id="alice")
    store = EdgeStore(tmp_path, "memories", cache_points=1000)
    store.ensure_schema("test-model", 4)
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"r{i}")) for i in range(40)]
    store.upsert(owner, [
        PointData(i, {"tenant_id": "t1", "user_id": "alice", "importance": 0, "state": "active"},
                  [1.0, float(n), 1.0, 0.0])
        for n, i in enumerate(ids)
    ])
    query = [1.0, 20.0, 1.0, 0.0]
    stop = threading.Event()
    errors: list[BaseException] = []

    def search_until_stopped() -> None:
        try:
            while not stop.is_set():
                # Every point stays a candidate while its fields change.
                assert len(importance_by_id(store, owner, query, 40)) == 40
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
    # The last write to the odd ids was 29, to the even ids 30.
    assert importance_by_id(store, owner, query, 40) == {
        point_id: 30.0 if n % 2 == 0 else 29.0 for n, point_id in enumerate(ids)
    }
    store.close()
