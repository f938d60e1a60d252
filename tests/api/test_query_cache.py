"""The query-embedding cache is per tenant: one tenant's search never warms another's."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from helpers import search

from memoryd.embeddings import CachedQueryEmbedder


def test_a_query_is_cached_for_its_tenant_only(
    stack: Any, api: httpx.Client, api_b: httpx.Client, user: str
) -> None:
    cache = stack.runtime.index.view().query_embedder
    assert isinstance(cache, CachedQueryEmbedder)
    query = f"where did I leave the {uuid.uuid4().hex} key?"
    search(api, user, query)
    assert cache.cached("tenant-a", query)
    # Tenant B asking the same words is a miss: its took_ms says nothing about A.
    assert not cache.cached("tenant-b", query)
    search(api_b, user, query)
    assert cache.cached("tenant-b", query)


def test_the_same_text_in_two_scopes_is_two_entries(stack: Any) -> None:
    cache = CachedQueryEmbedder(stack.runtime.index.view().query_embedder.inner, size=4)
    one = cache.embed_query_for("t1", "favourite colour")
    assert cache.cached("t1", "favourite colour") and not cache.cached("t2", "favourite colour")
    two = cache.embed_query_for("t2", "favourite colour")
    assert (one == two).all()  # the same vector, computed for each tenant
    assert len(cache._entries) == 2
