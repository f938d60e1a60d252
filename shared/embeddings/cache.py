"""An LRU of query vectors: chat agents repeat the same recall queries many times."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractContextManager

from memoryd.embeddings.base import Embedder, FloatArray


class CachedQueryEmbedder(Embedder):
    """Delegates to `inner`, remembering the last `size` query vectors by scope and text.

    The scope is the tenant a search runs for: a hit is faster, so a cache shared across
    tenants would let one tenant learn from `took_ms` what another searched. `embed_query`
    without a scope is the process's own use (scope ""). Documents are never cached: they
    are embedded once, at write time.
    """

    def __init__(self, inner: Embedder, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache size must be >= 0, got {size}")
        self.inner = inner
        self.size = size
        self.name = inner.name
        self.batch_size = inner.batch_size
        self.query_tokens = inner.query_tokens
        self._entries: OrderedDict[tuple[str, str], FloatArray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> FloatArray:
        return self.embed_query_for("", text)

    def count_tokens(self, text: str, query: bool = False) -> float:
        return self.inner.count_tokens(text, query)

    def cached(self, scope: str, text: str) -> bool:
        """Whether `scope`'s query `text` would be answered from the cache."""
        with self._lock:
            return (scope, text) in self._entries

    def embed_query_for(self, scope: str, text: str) -> FloatArray:
        if self.size == 0:
            return self.inner.embed_query(text)
        key = (scope, text)
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached.copy()
        # Computed outside the lock so one slow query does not stall every other caller;
        # two threads missing on the same text at once just both compute it.
        vector = self.inner.embed_query(text).copy()
        with self._lock:
            self._entries[key] = vector
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return vector.copy()

    def session(self) -> AbstractContextManager[None]:
        return self.inner.session()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def close(self) -> None:
        self.inner.close()
