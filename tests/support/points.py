"""Store points for tests that write a shard directly: a memory record with a seeded unit
vector, as the write path would store it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np

from memoryd.records.models import MemoryRecord, Owner
from memoryd.store import PointData

DIM = 8


def unit_vector(seed: int, dim: int = DIM) -> list[float]:
    v = np.random.default_rng(seed).normal(size=dim)
    return (v / np.linalg.norm(v)).tolist()


def point(owner: Owner, content: str, seed: int,
          keywords: tuple[list[int], list[float]] = ([1, 2], [1.0, 1.0])) -> PointData:
    """A memory of `owner` saying `content`, dated 2024-01-01, its dense vector from `seed`
    and its keyword vector `keywords`."""
    at = datetime(2024, 1, 1, tzinfo=UTC)
    record = MemoryRecord(
        id=str(uuid.uuid4()), tenant_id=owner.tenant_id, user_id=owner.user_id, content=content,
        content_hash=content, occurred_at=at, created_at=at, updated_at=at,
        embedding_model="test-model",
    )
    return PointData(record.id, record.to_payload(), unit_vector(seed), keywords)
