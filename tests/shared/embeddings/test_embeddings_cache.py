"""CachedQueryEmbedder, with a small real Embedder that counts its calls."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from memoryd.embeddings import CachedQueryEmbedder, Embedder
from memoryd.embeddings.base import FloatArray


class CountingEmbedder(Embedder):
    name = "counting"
    batch_size = 7

    def __init__(self) -> None:
        self.query_calls: list[str] = []
        self.document_calls = 0
        self.closed = False

    @property
    def dim(self) -> int:
        return 4

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        self.document_calls += 1
        if not texts:
            return np.zeros((0, 4), np.float32)
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> FloatArray:
        self.query_calls.append(text)
        vector = np.array([len(text), 1.0, 0.0, 0.0], dtype=np.float32)
        return vector / np.linalg.norm(vector)

    def close(self) -> None:
        self.closed = True


def test_delegates_identity_and_documents() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, 4)
    assert (cached.name, cached.dim, cached.batch_size) == ("counting", 4, 7)
    cached.embed_documents(["a", "bb"])
    cached.embed_documents(["a", "bb"])
    assert inner.document_calls == 2  # documents are never cached
    cached.close()
    assert inner.closed


def test_hit_returns_equal_vector_without_calling_inner() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, 4)
    first = cached.embed_query("hello")
    second = cached.embed_query("hello")
    np.testing.assert_array_equal(first, second)
    assert inner.query_calls == ["hello"]


def test_keys_are_exact_text() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, 4)
    for text in ["hello", "hello ", "Hello"]:
        cached.embed_query(text)
    assert inner.query_calls == ["hello", "hello ", "Hello"]


def test_evicts_least_recently_used() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, 2)
    cached.embed_query("a")
    cached.embed_query("b")
    cached.embed_query("a")  # hit: "a" becomes most recent, so "b" is next out
    cached.embed_query("c")  # evicts "b"
    assert inner.query_calls == ["a", "b", "c"]
    cached.embed_query("a")  # still cached
    assert inner.query_calls == ["a", "b", "c"]
    cached.embed_query("b")  # was evicted, evicts "c"
    assert inner.query_calls == ["a", "b", "c", "b"]
    cached.embed_query("c")
    assert inner.query_calls == ["a", "b", "c", "b", "c"]


def test_size_zero_disables_caching() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, 0)
    cached.embed_query("x")
    cached.embed_query("x")
    assert inner.query_calls == ["x", "x"]


def test_negative_size_is_rejected() -> None:
    with pytest.raises(ValueError):
        CachedQueryEmbedder(CountingEmbedder(), -1)


def test_callers_cannot_corrupt_the_cache() -> None:
    cached = CachedQueryEmbedder(CountingEmbedder(), 4)
    first = cached.embed_query("abc")
    expected = first.copy()
    first[:] = 99.0
    again = cached.embed_query("abc")
    np.testing.assert_array_equal(again, expected)
    again[:] = -1.0
    np.testing.assert_array_equal(cached.embed_query("abc"), expected)


def test_clear() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, 4)
    cached.embed_query("x")
    cached.clear()
    cached.embed_query("x")
    assert inner.query_calls == ["x", "x"]


def test_thread_safety_under_contention() -> None:
    inner = CountingEmbedder()
    cached = CachedQueryEmbedder(inner, 3)
    texts = [f"q{i % 5}" * (i % 5 + 1) for i in range(50)]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for text in texts:
                vector = cached.embed_query(text)
                np.testing.assert_allclose(vector, inner.embed_query(text))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cached._entries) <= 3
