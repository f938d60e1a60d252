"""The memory store: one interface, two adapters (Qdrant Edge, qdrant-client)."""

from __future__ import annotations

from memoryd.platform.settings import Settings
from memoryd.store.base import (
    DENSE,
    PARTS,
    SPARSE,
    PointData,
    Store,
    StoredPoint,
    VectorQuery,
)
from memoryd.store.edge import EdgeStore
from memoryd.store.scoring_table import SCORING_FIELDS, RankedLists


def make_store(settings: Settings) -> Store:
    if settings.store_backend == "qdrant":
        # Imported only when chosen: qdrant-client takes seconds to import, and the embedded
        # mode (Qdrant Edge) never uses it.
        from memoryd.store.client import QdrantClientStore  # noqa: PLC0415

        return QdrantClientStore(
            settings.collection,
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None,
            path=settings.qdrant_local_path,
            timeout_s=settings.qdrant_timeout_s,
        )
    return EdgeStore(settings.edge_path, settings.collection,
                     search_threads=settings.edge_search_threads,
                     cache_points=settings.edge_field_cache_points)


__all__ = [
    "DENSE", "PARTS", "SCORING_FIELDS", "SPARSE", "PointData", "RankedLists", "Store",
    "StoredPoint", "VectorQuery",
    "make_store",
]
