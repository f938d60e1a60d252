"""The read path: search, list, get. Runs in the gateway; never writes."""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid

from shared import scoring
from shared.errors import InvalidInput, NotFound
from shared.keywords import query_keyword_vector
from shared.models import MemoryRecord, MemoryType, Owner, Scope, utcnow
from shared.runtime import Runtime
from shared.schemas import (
    MemoryPage,
    MemoryView,
    SearchHit,
    SearchMode,
    SearchRequest,
    SearchResponse,
)
from shared.store import DENSE, SPARSE, VectorQuery
from shared.store.conditions import AllOf, AnyOf, Between, Condition, Match, OneOf


def visibility(scope: Scope | None, project: str | None) -> list[Condition]:
    """What a search sees: the user's global memories plus the given project's."""
    project_cond = AllOf((Match("scope", Scope.PROJECT.value), Match("project", project or "")))
    if scope is Scope.GLOBAL or (scope is None and project is None):
        return [Match("scope", Scope.GLOBAL.value)]
    if scope is Scope.PROJECT:
        return [project_cond]
    return [OneOf((Match("scope", Scope.GLOBAL.value), project_cond))]


def search_conditions(req: SearchRequest) -> list[Condition]:
    conds: list[Condition] = [*visibility(req.scope, req.project), Match("state", "active")]
    if req.types:
        conds.append(AnyOf("type", tuple(t.value for t in req.types)))
    if req.tags:
        conds.append(AnyOf("tags", tuple(req.tags)))
    if req.categories:
        conds.append(AnyOf("category", tuple(req.categories)))
    if req.min_importance is not None:
        conds.append(Between("importance", gte=float(req.min_importance)))
    if req.occurred_after is not None or req.occurred_before is not None:
        conds.append(Between("occurred_at", gte=req.occurred_after, lt=req.occurred_before))
    return conds


def search(rt: Runtime, owner: Owner, req: SearchRequest) -> SearchResponse:
    started = time.perf_counter()
    weights = rt.search_weights
    queries: list[VectorQuery] = []
    if req.mode is not SearchMode.KEYWORD:
        queries.append(VectorQuery(DENSE, rt.query_embedder.embed_query(req.query).tolist()))
    keywords = query_keyword_vector(req.query) if req.mode is not SearchMode.DENSE else None
    if keywords is not None:
        queries.append(VectorQuery(SPARSE, keywords))
    # Fusion and rescoring reorder, so each list goes deeper than the page asked for.
    depth = max(req.top_k * 4, 40)
    lists = rt.store.search_many(owner, search_conditions(req), queries, depth)
    dense_hits = lists[0] if req.mode is not SearchMode.KEYWORD else []
    keyword_hits = lists[-1] if keywords is not None else []
    as_of = req.as_of or utcnow()
    scored = []
    for cand in scoring.merge(dense_hits, keyword_hits):
        record = MemoryRecord.from_payload(cand.point.id, cand.point.payload)
        rel = scoring.relevance(cand, req.mode, rt.embedder.name, weights)
        parts = scoring.boosts(record, as_of, weights)
        final = scoring.final_score(rel, parts, weights)
        if req.min_score is not None and final < req.min_score:
            continue
        scored.append((final, record, cand, rel, parts))
    scored.sort(key=lambda item: item[0], reverse=True)
    hits = [
        SearchHit(
            memory=MemoryView.of(record), score=round(final, 6), label=scoring.label(final),
            explanation=scoring.explanation(cand, rel, parts, final) if req.explain else None,
        )
        for final, record, cand, rel, parts in scored[: req.top_k]
    ]
    return SearchResponse(results=hits, took_ms=round((time.perf_counter() - started) * 1000, 3))


def get_memory(rt: Runtime, owner: Owner, memory_id: str) -> MemoryRecord:
    if not _is_uuid(memory_id):
        raise NotFound(f"no memory {memory_id}", field="memory_id")
    found = rt.store.get(owner, [memory_id])
    if not found:
        raise NotFound(f"no memory {memory_id}", field="memory_id")
    return MemoryRecord.from_payload(found[0].id, found[0].payload)


def list_memories(
    rt: Runtime,
    owner: Owner,
    *,
    type: MemoryType | None,
    tag: str | None,
    scope: Scope | None,
    project: str | None,
    sort: str,
    limit: int,
    cursor: str | None,
) -> MemoryPage:
    conds: list[Condition] = []
    if type is not None:
        conds.append(Match("type", type.value))
    if tag is not None:
        conds.append(Match("tags", tag))
    if scope is not None:
        conds.append(Match("scope", scope.value))
    if project is not None:
        conds.append(Match("project", project))
    after = decode_cursor(cursor, sort) if cursor else None
    points, position = rt.store.page(owner, conds, limit, sort, after)
    return MemoryPage(
        items=[MemoryView.of(MemoryRecord.from_payload(p.id, p.payload)) for p in points],
        next_cursor=encode_cursor(position, sort) if position else None,
    )


def encode_cursor(position: tuple[float, list[str]], sort: str) -> str:
    raw = json.dumps({"s": sort, "v": position[0], "ids": position[1]}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str) -> tuple[float, list[str]]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        value, ids = float(data["v"]), [str(i) for i in data["ids"]]
        if data["s"] != sort or not all(_is_uuid(i) for i in ids):
            raise ValueError("cursor from another listing")
    except (ValueError, KeyError, TypeError, binascii.Error, json.JSONDecodeError) as exc:
        raise InvalidInput("cursor is not one this listing returned", field="cursor") from exc
    return value, ids


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
