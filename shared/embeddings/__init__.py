"""Text embedding models behind one interface; pick one with `make_embedder(spec, settings)`."""

from memoryd.embeddings.base import Embedder
from memoryd.embeddings.cache import CachedQueryEmbedder
from memoryd.embeddings.factory import make_embedder

__all__ = ["CachedQueryEmbedder", "Embedder", "make_embedder"]
