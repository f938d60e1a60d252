"""One contract, two adapters: Qdrant Edge and qdrant-client (local mode)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memoryd.platform.errors import EmbeddingModelMismatch
from memoryd.records.models import AuditEvent, MemoryRecord, Owner, Scope
from memoryd.store import DENSE, PARTS, SPARSE, PointData, Store, VectorQuery
from memoryd.store.client import QdrantClientStore
from memoryd.store.conditions import Between, Match
from memoryd.store.edge import EdgeStore
from memoryd.store.scoring_table import ACCESS, ASSISTANT, SCORING_FIELDS

DIM = 8
ALICE = Owner(tenant_id="t1", user_id="alice")
BOB = Owner(tenant_id="t1", user_id="bob")
MALLORY = Owner(tenant_id="t2", user_id="alice")  # same user id, other tenant


def open_store(kind: str, root: Path) -> Store:
    if kind == "edge":
        return EdgeStore(root, "memories")
    if kind == "edge-field-cache":
        # As shipped: searches read the candidates' scoring fields from memory.
        return EdgeStore(root, "memories", cache_points=50)
    return QdrantClientStore("memories", path=root)


@pytest.fixture(params=["edge", "edge-field-cache", "qdrant-client"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = open_store(request.param, tmp_path)
    s.ensure_schema("test-model", DIM)
    yield s
    s.close()


def vec(seed: int) -> list[float]:
    v = np.random.default_rng(seed).normal(size=DIM)
    return (v / np.linalg.norm(v)).tolist()


def point(owner: Owner, content: str, seed: int, minutes: int = 0, **fields: object) -> PointData:
    at = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    record = MemoryRecord(
        id=str(uuid.uuid4()), tenant_id=owner.tenant_id, user_id=owner.user_id, content=content,
        content_hash=content, occurred_at=at, created_at=at, updated_at=at,
        embedding_model="test-model", **fields,  # type: ignore[arg-type]
    )
    return PointData(record.id, record.to_payload(), vec(seed), ([1, 2], [1.0, 1.0]))


def test_owner_scoping_on_every_call(store: Store) -> None:
    mine = point(ALICE, "alice fact", 1)
    store.upsert(ALICE, [mine])
    store.upsert(BOB, [point(BOB, "bob fact", 1)])
    store.upsert(MALLORY, [point(MALLORY, "other tenant fact", 1)])
    assert [p.payload["content"] for p in store.search(ALICE, vec(1), [], 10)] == ["alice fact"]
    assert store.get(BOB, [mine.id]) == []
    assert store.get(MALLORY, [mine.id]) == []
    store.delete(BOB, [mine.id])
    store.set_payload(MALLORY, [mine.id], {"content": "hacked"})
    assert store.get(ALICE, [mine.id])[0].payload["content"] == "alice fact"
    assert store.count(ALICE) == 1 and store.count(BOB) == 1 and store.count(MALLORY) == 1


def test_upsert_refuses_a_point_of_another_owner(store: Store) -> None:
    with pytest.raises(ValueError):
        store.upsert(ALICE, [point(BOB, "bob fact", 1)])


def test_same_id_upsert_replaces(store: Store) -> None:
    p = point(ALICE, "v1", 1)
    store.upsert(ALICE, [p])
    p.payload["content"] = "v2"
    store.upsert(ALICE, [p])
    assert store.count(ALICE) == 1
    assert store.get(ALICE, [p.id])[0].payload["content"] == "v2"


def test_search_filters_threshold_and_hybrid(store: Store) -> None:
    store.upsert(ALICE, [
        point(ALICE, "global one", 1),
        point(ALICE, "project one", 2, scope=Scope.PROJECT, project="p1"),
    ])
    only_project = store.search(ALICE, vec(2), [Match("project", "p1")], 10)
    assert [p.payload["content"] for p in only_project] == ["project one"]
    assert store.search(ALICE, vec(1), [], 10, score_threshold=0.999)[0].payload["content"] == (
        "global one"
    )
    dense, keywords = store.search_many(
        ALICE, [], [VectorQuery(DENSE, vec(1)), VectorQuery(SPARSE, ([1], [1.0]))], 10
    )
    assert dense[0].payload["content"] == "global one"
    assert {p.payload["content"] for p in keywords} == {"global one", "project one"}


def scoring_view(store: Store, owner: Owner, seed: int) -> dict[str, tuple[object, ...]]:
    found = store.search_candidates(owner, [], [VectorQuery(DENSE, vec(seed))], 100)
    [(ids, _)] = found.lists
    assert ids == found.ids  # one list: the candidates are that list, in its order
    return {
        point_id: (*found.fields[i, :ACCESS + 1].tolist(), found.thread_of(i))
        for i, point_id in enumerate(found.ids)
    }


def test_candidates_are_the_ranked_lists(store: Store) -> None:
    """search_candidates ranks exactly as search_many does, each list in its own order."""
    store.upsert(ALICE, [point(ALICE, f"fact {i}", i) for i in range(12)])
    store.upsert(BOB, [point(BOB, "bob's", 3)])
    queries = [VectorQuery(DENSE, vec(3)), VectorQuery(SPARSE, ([1], [1.0]))]
    lists = store.search_many(ALICE, [Match("state", "active")], queries, 5)
    found = store.search_candidates(ALICE, [Match("state", "active")], queries, 5)
    assert [ids for ids, _ in found.lists] == [[p.id for p in hits] for hits in lists]
    for (_, scores), hits in zip(found.lists, lists, strict=True):
        assert scores.tolist() == pytest.approx([p.score for p in hits])
    assert found.ids == list(dict.fromkeys(p.id for hits in lists for p in hits))
    assert found.fields.shape == (len(found.ids), len(SCORING_FIELDS))
    assert store.search_candidates(ALICE, [], [], 5).ids == []


def test_candidates_know_an_assistants_turn_by_its_sources(store: Store) -> None:
    """The speaker column is read from `sources[].role` alone, in every store."""
    said = {"user": [{"role": "user", "at": "2024-01-01T00:00:00Z"}],
            "assistant": [{"role": "assistant", "at": "2024-01-01T00:00:00Z",
                           "metadata": {"turn": "s1:2"}}]}
    points = {who: point(ALICE, f"{who} turn", 3, sources=sources)
              for who, sources in said.items()}
    store.upsert(ALICE, list(points.values()))
    found = store.search_candidates(ALICE, [], [VectorQuery(DENSE, vec(3))], 5)
    column = dict(zip(found.ids, found.fields[:, ASSISTANT].tolist(), strict=True))
    assert column == {points["user"].id: 0.0, points["assistant"].id: 1.0}


def test_scoring_fields_follow_every_write(store: Store) -> None:
    """Searches that read only the scoring fields (served from memory by the field cache
    where there is one) see each write at once, as a read of the store itself would."""
    points = [point(ALICE, f"fact {i}", i, thread_id="th", thread_seq=i, importance=3)
              for i in range(4)]
    store.upsert(ALICE, points)
    first = scoring_view(store, ALICE, 0)
    assert set(first) == {p.id for p in points}
    occurred = datetime.fromisoformat(points[0].payload["occurred_at"]).timestamp()
    assert first[points[0].id] == (occurred, 3.0, 0.0, ("th", 0))
    assert scoring_view(store, ALICE, 0) == first  # read again (from the cache, if any)

    store.set_payload(ALICE, [points[1].id], {"importance": 9, "access_count": 4})
    points[2].payload["thread_seq"] = 7
    store.upsert(ALICE, [points[2]])
    store.delete(ALICE, [points[3].id])
    after = scoring_view(store, ALICE, 0)
    assert set(after) == {points[0].id, points[1].id, points[2].id}
    assert after[points[1].id][1:3] == (9.0, 4.0)
    assert after[points[2].id][3] == ("th", 7)
    assert after[points[0].id] == first[points[0].id]
    # Another owner's search never sees these points, cached or not.
    assert scoring_view(store, BOB, 0) == {}


def test_get_with_vectors_and_datetime_range(store: Store) -> None:
    early, late = point(ALICE, "early", 1, minutes=0), point(ALICE, "late", 2, minutes=60)
    store.upsert(ALICE, [early, late])
    got = store.get(ALICE, [early.id], with_vectors=True)[0]
    assert got.dense is not None and np.allclose(got.dense, early.dense, atol=1e-5)
    cut = datetime(2024, 1, 1, 0, 30, tzinfo=UTC)
    found = store.find(ALICE, [Between("occurred_at", gt=cut)], 10)
    assert [p.payload["content"] for p in found] == ["late"]


def test_delete_where_returns_ids(store: Store) -> None:
    a, b = point(ALICE, "t1 a", 1, thread_id="t1"), point(ALICE, "t2 b", 2, thread_id="t2")
    store.upsert(ALICE, [a, b])
    assert store.delete_where(ALICE, [Match("thread_id", "t1")]) == [a.id]
    assert [p.id for p in store.find(ALICE, [], 10)] == [b.id]


def test_keyset_pages_cover_everything_once(store: Store) -> None:
    points = [point(ALICE, f"m{i}", i, minutes=i // 3, importance=1 + i % 10) for i in range(23)]
    store.upsert(ALICE, points)
    for sort in ("created_at", "importance", "updated_at"):
        seen: list[str] = []
        after = None
        while True:
            page, after = store.page(ALICE, [], 5, sort, after)
            seen.extend(p.id for p in page)
            if after is None:
                break
        assert sorted(seen) == sorted(p.id for p in points), sort
        assert len(seen) == len(set(seen))
    first, _ = store.page(ALICE, [], 3, "importance", None)
    assert [p.payload["importance"] for p in first] == [10, 10, 9]


def test_audit_trail_and_erasure(store: Store) -> None:
    events = [
        AuditEvent(memory_id="m1", tenant_id="t1", user_id="alice", event="ADD", after="secret",
                   at=datetime(2024, 1, 1, tzinfo=UTC)),
        AuditEvent(memory_id="m1", tenant_id="t1", user_id="alice", event="UPDATE",
                   before="secret", after="secret 2", at=datetime(2024, 1, 2, tzinfo=UTC)),
    ]
    store.append_audit(events)
    assert [e.event for e in store.audit_of(ALICE, "m1")] == ["ADD", "UPDATE"]
    assert store.audit_of(MALLORY, "m1") == []
    store.erase_audit_content(ALICE, ["m1"])
    trail = store.audit_of(ALICE, "m1")
    assert [(e.event, e.before, e.after) for e in trail] == [("ADD", None, None),
                                                              ("UPDATE", None, None)]


@pytest.mark.parametrize("kind", ["edge", "qdrant-client"])
def test_reopen_keeps_data_and_refuses_another_model(kind: str, tmp_path: Path) -> None:
    first = open_store(kind, tmp_path)
    first.ensure_schema("test-model", DIM)
    first.upsert(ALICE, [point(ALICE, "kept", 1)])
    first.close()
    again = open_store(kind, tmp_path)
    again.ensure_schema("test-model", DIM)
    assert [p.payload["content"] for p in again.find(ALICE, [], 10)] == ["kept"]
    again.close()
    other = open_store(kind, tmp_path)
    with pytest.raises(EmbeddingModelMismatch) as err:
        other.ensure_schema("other-model", 16)
    assert "test-model" in err.value.message and "other-model" in err.value.message
    other.close()


def test_scan_counts_users_and_siblings(store: Store) -> None:
    """The maintenance calls re-embedding uses: every point in pages, user counts per
    tenant, and a sibling collection of another dimension on the same engine."""
    for i in range(5):
        store.upsert(ALICE, [point(ALICE, f"alice {i}", i)])
    store.upsert(BOB, [point(BOB, "bob", 9)])
    store.upsert(MALLORY, [point(MALLORY, "mallory", 9)])
    seen, offset = [], None
    while True:
        page, offset = store.scan(offset, 3, with_vectors=True)
        assert all(p.dense is not None and len(p.dense) == DIM for p in page)
        seen.extend(p.payload["content"] for p in page)
        if offset is None:
            break
    assert sorted(seen) == sorted([f"alice {i}" for i in range(5)] + ["bob", "mallory"])
    assert store.count_all() == 7
    assert sorted(store.user_counts("t1", 10)) == [("alice", 5), ("bob", 1)]
    assert store.user_counts("t2", 10) == [("alice", 1)]

    other = store.sibling("memories_g1")
    other._create_if_missing(DIM * 2)
    wide = PointData(str(uuid.uuid4()), point(BOB, "wide", 1).payload, vec(1) * 2)
    other.upsert(BOB, [wide])
    assert [p.id for p in other.get(BOB, [wide.id])] == [wide.id]
    assert store.get(BOB, [wide.id]) == [] and store.count_all() == 7
    other.drop()
    assert store.count_all() == 7


def test_a_long_memory_is_found_by_its_best_part(store: Store) -> None:
    assert store.supports_parts
    whole, answer, other = vec(30), vec(31), vec(32)
    long = point(ALICE, "a long memory", 30)
    long.dense, long.parts = whole, [other, answer]
    short = point(ALICE, "a short memory", 33)
    bobs = point(BOB, "bob's long", 30)
    bobs.parts = [answer]
    store.upsert(ALICE, [long, short])
    store.upsert(BOB, [bobs])
    # Parts are read back with the vectors, and only for the point that has them.
    got = {p.payload["content"]: p for p in store.get(ALICE, [long.id, short.id],
                                                      with_vectors=True)}
    assert np.allclose(got["a long memory"].parts or [], [other, answer], atol=1e-6)
    assert got["a short memory"].parts is None
    # The passages alone, as the context block reads them: owner-scoped, float32 rows.
    rows = store.passage_vectors(ALICE, [long.id, short.id, bobs.id])
    assert list(rows) == [long.id] and rows[long.id].dtype == np.float32
    assert np.allclose(rows[long.id], [other, answer], atol=1e-6)
    assert store.passage_vectors(BOB, [long.id]) == {}
    assert store.passage_vectors(ALICE, []) == {}
    lists = store.search_candidates(ALICE, [], [VectorQuery(PARTS, answer)], 10)
    [(ids, scores)] = lists.lists
    assert ids == [long.id]  # one entry a memory, owner-scoped, short ones absent
    assert scores[0] == pytest.approx(1.0, abs=1e-5)  # MaxSim of one query vector: its best
    # A payload change keeps the parts; deleting the memory takes them with it.
    store.set_payload(ALICE, [long.id], {"importance": 9})
    assert store.get(ALICE, [long.id], with_vectors=True)[0].parts is not None
    store.delete(ALICE, [long.id])
    assert store.search_candidates(ALICE, [], [VectorQuery(PARTS, answer)], 10).lists == [
        ([], pytest.approx(np.zeros(0)))]


@pytest.mark.parametrize("kind", ["edge", "qdrant-client"])
def test_a_store_created_without_parts_still_opens_and_writes(
    kind: str, tmp_path: Path
) -> None:
    if kind == "edge":
        import qdrant_edge as qe

        path = tmp_path / "memories"
        path.mkdir()
        qe.EdgeShard.create(str(path), qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )).close()
    else:
        from qdrant_client import QdrantClient
        from qdrant_client import models as qm

        client = QdrantClient(path=str(tmp_path))
        client.create_collection(
            "memories", vectors_config={DENSE: qm.VectorParams(size=DIM,
                                                               distance=qm.Distance.COSINE)},
            sparse_vectors_config={SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)})
        client.close()
    store = open_store(kind, tmp_path)
    try:
        store.ensure_schema("test-model", DIM)
        assert not store.supports_parts  # until `memoryd reindex` builds a new generation
        long = point(ALICE, "a long memory", 40)
        long.parts = [vec(41), vec(42)]
        store.upsert(ALICE, [long])  # stored without its parts, not refused
        assert store.passage_vectors(ALICE, [long.id]) == {}
        [got] = store.get(ALICE, [long.id], with_vectors=True)
        assert got.parts is None and got.dense is not None
    finally:
        store.close()
