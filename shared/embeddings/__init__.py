"""Text embedding models behind one interface; pick one with `make_embedder(spec, settings)`."""

from shared.embeddings.base import Embedder
from shared.embeddings.cache import CachedQueryEmbedder
from shared.embeddings.factory import make_embedder

__all__ = ["CachedQueryEmbedder", "Embedder", "make_embedder"]
