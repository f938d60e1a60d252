"""An embedded store made before decision 0029 (Qdrant's IDF modifier on the keyword
vectors) moves to the current configuration when it opens: every point is kept, keyword
scores become the plain product of the query's reference IDF and the stored BM25 weights,
and no other user's data moves them any more."""

from __future__ import annotations

import json
from pathlib import Path

import qdrant_edge as qe

from memoryd.records.models import Owner
from memoryd.retrieval.keywords import keyword_vector, query_keyword_vector, token_id
from memoryd.store import DENSE, SPARSE, PointData, VectorQuery
from memoryd.store.edge import EdgeStore, _dense_params
from tests.support.points import DIM
from tests.support.points import point as support_point

ALICE = Owner(tenant_id="t1", user_id="alice")
CROWD = Owner(tenant_id="t2", user_id="crowd")
ALICE_TEXTS = ["My cat Pepper sleeps on the piano", "Melanie paints sunsets at the lake",
               "我每天早上在公园里跑步", "The piano teacher is called Ruth"]
QUERY = "Who paints at the lake, and whose cat sleeps on the piano? 公园跑步"


def point(owner: Owner, content: str, seed: int) -> PointData:
    return support_point(owner, content, seed, keyword_vector(content))


def legacy_shard(path: Path, points: list[PointData]) -> None:
    """A memory shard as the code before decision 0029 made it: sparse vectors under
    Qdrant's IDF modifier."""
    path.mkdir(parents=True)
    shard = qe.EdgeShard.create(str(path), qe.EdgeConfig(
        vectors=_dense_params(DIM),
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}))
    try:
        shard.update(qe.UpdateOperation.upsert_points([
            qe.Point(p.id, {DENSE: p.dense, SPARSE: qe.SparseVector(*p.sparse)}, p.payload)
            for p in points if p.dense is not None and p.sparse is not None]))
        shard.flush()
    finally:
        shard.close()


def keyword_scores(store: EdgeStore) -> dict[str, float]:
    query = query_keyword_vector(QUERY)
    assert query is not None
    [hits] = store.search_many(ALICE, [], [VectorQuery(SPARSE, query)], 10)
    return {str(h.payload["content"]): h.score for h in hits}


def expected_scores(points: list[PointData]) -> dict[str, float]:
    """The dot product of the query's reference IDF weights and each memory's BM25
    weights: nothing read from the store."""
    query = query_keyword_vector(QUERY)
    assert query is not None
    weights = dict(zip(*query, strict=True))
    scores = {}
    for p in points:
        assert p.sparse is not None
        score = sum(weights.get(i, 0.0) * w for i, w in zip(*p.sparse, strict=True))
        if score > 0:
            scores[str(p.payload["content"])] = score
    return scores


def test_a_store_made_with_qdrant_idf_moves_to_the_reference_idf(tmp_path: Path) -> None:
    alice = [point(ALICE, text, i) for i, text in enumerate(ALICE_TEXTS)]
    crowd = [point(CROWD, f"the cat and the piano by the lake, note {i}", 100 + i)
             for i in range(40)]
    legacy_shard(tmp_path / "memories", alice + crowd)
    config = json.loads((tmp_path / "memories" / "edge_config.json").read_text())
    assert config["sparse_vectors"][SPARSE] == {"modifier": "idf"}

    store = EdgeStore(tmp_path, "memories")
    try:
        store.ensure_schema("test-model", DIM)
        config = json.loads((tmp_path / "memories" / "edge_config.json").read_text())
        assert config["sparse_vectors"][SPARSE].get("modifier") in (None, "none")
        assert store.count(ALICE, []) == len(alice)
        assert store.count(CROWD, []) == len(crowd)
        expected = expected_scores(alice)
        scores = keyword_scores(store)
        assert scores.keys() == expected.keys() and len(scores) == 4
        # The user's own statistics count Alice's points alone (a crowd of 40 holds "piano").
        piano, ruth = token_id("piano"), token_id("ruth")
        assert store.keyword_holders(ALICE, [piano, ruth], 256) == [2, 1]
        assert store.keyword_holders(ALICE, [piano], 1) == [1]
        for content, score in scores.items():
            assert abs(score - expected[content]) < 1e-4 * expected[content]
        # Another user's data no longer moves Alice's keyword scores.
        store.upsert(CROWD, [point(CROWD, f"piano cat lake sunsets {i}", 200 + i)
                             for i in range(200)])
        assert keyword_scores(store) == scores
    finally:
        store.close()
    # Opened again: nothing left to move, the points and scores are the same.
    again = EdgeStore(tmp_path, "memories")
    try:
        again.ensure_schema("test-model", DIM)
        assert again.count(ALICE, []) == len(alice)
        assert keyword_scores(again) == scores
    finally:
        again.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "memories", "memories_audit"]


def test_a_qdrant_collection_with_the_idf_modifier_loses_it_at_open(tmp_path: Path) -> None:
    """The Qdrant (server) store, here on qdrant-client's local engine: the collection's
    sparse modifier is changed in place, as Qdrant applies it at query time."""
    from qdrant_client import QdrantClient
    from qdrant_client import models as qm

    from memoryd.store.client import QdrantClientStore

    alice = [point(ALICE, text, i) for i, text in enumerate(ALICE_TEXTS)]
    store = QdrantClientStore("memories", path=tmp_path / "q")
    store.ensure_schema("test-model", DIM)
    store.upsert(ALICE, alice)
    store.close()
    legacy = QdrantClient(path=str(tmp_path / "q"))
    try:  # the configuration the code before decision 0029 created
        legacy.update_collection("memories", sparse_vectors_config={
            SPARSE: qm.SparseVectorParams(modifier=qm.Modifier.IDF)})
    finally:
        legacy.close()

    store = QdrantClientStore("memories", path=tmp_path / "q")
    try:
        store.ensure_schema("test-model", DIM)
        query = query_keyword_vector(QUERY)
        assert query is not None
        [hits] = store.search_many(ALICE, [], [VectorQuery(SPARSE, query)], 10)
        expected = expected_scores(alice)
        assert {str(h.payload["content"]) for h in hits} == expected.keys()
        for h in hits:
            assert abs(h.score - expected[str(h.payload["content"])]) < 1e-4 * h.score
    finally:
        store.close()
    opened = QdrantClient(path=str(tmp_path / "q"))
    try:
        sparse = opened.get_collection("memories").config.params.sparse_vectors or {}
        assert sparse[SPARSE].modifier == qm.Modifier.NONE
    finally:
        opened.close()
