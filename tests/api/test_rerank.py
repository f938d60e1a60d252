"""The optional rerank step, against a local server speaking the rerank protocol."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fake_rerank_server import FakeRerankServer
from helpers import save, search

from memoryd.platform.errors import RerankerNotConfigured
from memoryd.platform.settings import Settings
from memoryd.retrieval.rerank import HttpReranker


@pytest.fixture()
def reranker(fake_reranker: FakeRerankServer) -> Iterator[FakeRerankServer]:
    fake_reranker.reset()
    yield fake_reranker
    fake_reranker.reset()


@pytest.fixture()
def seeded(api: httpx.Client, user: str) -> str:
    for content in ("Caroline went to the LGBTQ support group on Tuesday",
                    "Caroline adopted a dog named Biscuit",
                    "用户下个月要去杭州出差"):
        assert save(api, user, content).status_code == 201
    return user


def test_rerank_reorders_and_explains(
    api: httpx.Client, seeded: str, reranker: FakeRerankServer
) -> None:
    query = "When did Caroline go to the support group?"
    plain = search(api, seeded, query, top_k=3)
    assert plain[0]["memory"]["content"].startswith("Caroline went")
    assert reranker.requests == []  # off unless asked for

    reranker.favour = "Biscuit"
    hits = search(api, seeded, query, top_k=3, rerank=True, explain=True)
    assert hits[0]["memory"]["content"] == "Caroline adopted a dog named Biscuit"
    top = hits[0]["explanation"]
    assert top["rerank"] == pytest.approx(0.95) and top["relevance"] == pytest.approx(0.95)
    assert hits[0]["score"] == pytest.approx(top["final"], abs=1e-5)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    sent = reranker.requests[-1]
    assert sent["path"] == "/v1/rerank" and sent["body"]["query"] == query
    assert "用户下个月要去杭州出差" in sent["body"]["documents"]


def test_logits_are_mapped_into_unit_range_and_min_score_applies_after(
    api: httpx.Client, seeded: str, reranker: FakeRerankServer
) -> None:
    reranker.favour, reranker.logits = "杭州", True
    hits = search(api, seeded, "出差去哪里", top_k=3, rerank=True, explain=True)
    assert hits[0]["memory"]["content"] == "用户下个月要去杭州出差"
    assert hits[0]["explanation"]["rerank"] == pytest.approx(1 / (1 + 2.718281828 ** -3), 1e-4)
    assert all(0 <= h["score"] <= 1 for h in hits)
    only = search(api, seeded, "出差去哪里", top_k=3, rerank=True, min_score=0.5)
    assert [h["memory"]["content"] for h in only] == ["用户下个月要去杭州出差"]


def test_reranker_failure_is_a_503_with_its_code(
    api: httpx.Client, seeded: str, reranker: FakeRerankServer
) -> None:
    reranker.fail_status = 500
    response = api.post("/v1/search", json={"user_id": seeded, "query": "Caroline",
                                            "rerank": True})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "reranker_unavailable"
    assert len(search(api, seeded, "Caroline")) >= 2  # plain search unaffected


def test_rerank_needs_a_configured_reranker() -> None:
    with pytest.raises(RerankerNotConfigured) as caught:
        HttpReranker(Settings(rerank_url=None))
    assert caught.value.field == "rerank" and caught.value.status == 422
