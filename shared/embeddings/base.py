"""The embedder contract shared by every model backend."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryd.embeddings.lengths import estimated_tokens, window
from memoryd.platform.errors import EmbedderError

FloatArray = npt.NDArray[np.float32]


class Embedder(ABC):
    """Turns text into L2-normalised float32 vectors.

    `name` is the spec string that identifies the model: it is recorded next to stored vectors
    so that a collection written by one model is never searched with another.
    """

    name: str
    batch_size: int = 32
    # The most tokens of a query the model reads (specials included): the query's end, since
    # a multi-line query's last line is its current turn (shared/retrieval/query_text.py).
    # One of e5's windows; 8 KB of English prose is about 1,700.
    query_tokens: int = 512

    @property
    @abstractmethod
    def dim(self) -> int:
        """Length of every vector this model returns."""

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        """Embed passages for storage; shape (len(texts), dim), rows L2-normalised."""

    @abstractmethod
    def embed_query(self, text: str) -> FloatArray:
        """Embed a search query; shape (dim,), L2-normalised."""

    def count_tokens(self, text: str, query: bool = False) -> float:
        """How many tokens the model reads for `text` as a passage (or a query), its
        specials included: counted by the model's tokenizer where it has one in process,
        else estimated (shared/embeddings/lengths.py)."""
        return estimated_tokens(text) + 2

    def query_window(self, text: str) -> str:
        """What of a query the model reads: its last `query_tokens` tokens, cut at a word
        boundary. Every query is bounded this way, so no query costs more than one window,
        whatever its shape or length; its keywords are still taken from the whole."""
        return window(text, self.query_tokens, lambda t: self.count_tokens(t, query=True),
                      keep_end=True)

    def embed_query_for(self, scope: str, text: str) -> FloatArray:
        """`embed_query` on behalf of `scope` (a tenant): a cache keeps each scope's own."""
        return self.embed_query(text)

    def warm_up(self) -> None:  # noqa: B027 - an optional hook, a no-op unless overridden
        """Load an in-process model now, so the first search does not pay for it. Remote
        models do nothing here: a startup should not depend on, or pay for, a hosted API."""

    def close(self) -> None:  # noqa: B027 - an optional hook, a no-op unless overridden
        """Release network clients; local models hold nothing worth releasing early."""

    def session(self) -> AbstractContextManager[None]:
        """Wraps one caller's whole unit of work that embeds (a search request). A model
        whose callers share the cores (e5's lanes) counts the open sessions to know that
        others are about to call it; for the rest it does nothing."""
        return nullcontext()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class BatchingEmbedder(Embedder):
    """Implements the public contract once: input checks, batching, shape checks, normalising.

    Backends provide `_encode_documents` (one batch, at most `batch_size` texts) and
    `_encode_query`, and may return raw, unnormalised model output.
    """

    def __init__(self, batch_size: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size

    @abstractmethod
    def _encode_documents(self, texts: list[str]) -> Any:
        """Raw document vectors for one batch, shape (len(texts), dim)."""

    @abstractmethod
    def _encode_query(self, text: str) -> Any:
        """Raw query vector, shape (dim,)."""

    def embed_documents(self, texts: Sequence[str]) -> FloatArray:
        items = text_list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            parts.append(self._checked(self._encode_documents(batch), (len(batch), self.dim)))
        return l2_normalize(parts[0] if len(parts) == 1 else np.concatenate(parts))

    def embed_query(self, text: str) -> FloatArray:
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes a string, got {type(text).__name__}")
        return l2_normalize(self._checked(self._encode_query(self.query_window(text)),
                                          (self.dim,)))

    def _checked(self, raw: Any, shape: tuple[int, ...]) -> FloatArray:
        # `shape` is built after the backend call on purpose: remote models learn `dim` from
        # their first response, so evaluating it earlier would cost an extra probe request.
        array = np.asarray(raw, dtype=np.float32)
        if array.shape != shape:
            raise EmbedderError(
                f"{self.name} returned vectors of shape {array.shape}, expected {shape}"
            )
        if not np.isfinite(array).all():
            # A NaN stored in the index would silently poison every similarity it touches.
            raise EmbedderError(f"{self.name} returned non-finite values")
        return array


def text_list(texts: Sequence[str]) -> list[str]:
    # A bare string is a Sequence[str] too; embedding it character by character is never meant.
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of strings, not a single string")
    items = list(texts)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"texts[{index}] is {type(item).__name__}, expected str")
    return items


def l2_normalize(vectors: FloatArray) -> FloatArray:
    """Unit-length rows (or vector); an all-zero row stays zero instead of turning into NaN."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    out = np.zeros_like(vectors, dtype=np.float32)
    np.divide(vectors, norms, out=out, where=norms > 0)
    return out
