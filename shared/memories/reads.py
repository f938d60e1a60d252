"""The read path: search, list, get. Runs in the gateway; never writes."""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memoryd.embeddings import Embedder
from memoryd.memories.conflicts import order_conflicts
from memoryd.memories.retention import live_conditions
from memoryd.platform.errors import InvalidInput, NotFound
from memoryd.platform.settings import Settings
from memoryd.records.models import MemoryKind, MemoryRecord, MemoryType, Owner, Scope, utcnow
from memoryd.records.schemas import (
    MemoryPage,
    MemoryView,
    SearchHit,
    SearchMode,
    SearchRequest,
    SearchResponse,
)
from memoryd.retrieval import scoring
from memoryd.retrieval.bridge import chinese_reading
from memoryd.retrieval.keywords import (
    PASSAGES_FIELD,
    USER_COUNT_CAP,
    OwnCounts,
    best_passage_score,
    query_keyword_vector,
)
from memoryd.retrieval.query_text import Query
from memoryd.retrieval.rerank import HttpReranker
from memoryd.retrieval.speaker_cues import about_own_words
from memoryd.retrieval.time_cues import TimeCues, read_time_cues
from memoryd.store import DENSE, PARTS, SPARSE, RankedLists, Store, VectorQuery
from memoryd.store.conditions import (
    AllOf,
    AnyOf,
    Between,
    Condition,
    IdIn,
    Match,
    NoneOf,
    OneOf,
)
from memoryd.store.scoring_table import CJK, union_ids


@dataclass(frozen=True)
class ReadPath:
    """What a read uses, resolved once per request: the store, the index view's query model
    and the name of its document model (hits report it), the search weights and settings,
    and the reranker (built on first use: an unconfigured one refuses the request)."""

    store: Store
    query_embedder: Embedder
    embedder_name: str
    weights: scoring.Weights
    settings: Settings
    reranker: Callable[[], HttpReranker]


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


def live_search_conditions(rp: ReadPath, owner: Owner, req: SearchRequest) -> list[Condition]:
    """The search filter plus retention: nothing expired is ever a hit."""
    return [*search_conditions(req), *live_conditions(rp.settings, owner.tenant_id)]


# The read path of a search, top to bottom (docs/architecture.md, "Read path"):
#   1. read the query once (`Query.read`);
#   2. what each list searches by: the query vector (`query_vector`), an English query's
#      words put into Chinese (`bridged_vector`), the keyword vector (`keyword_query`,
#      with the user's own term counts);
#   3. the store, once for all lists (`candidates`), and the keyword list's head read
#      on to score each long memory by its best passage (`with_best_passages`);
#   4. rank (`scoring.rank`);
#   5. the page: the best (`best_candidates`), reranked (`reranked`), each top hit's next
#      turn (`with_next_turns`), then the page's records in one read (`page_hits`).
# /v1/search answers with the hits; /v1/context writes its block from the same hits
# (shared/memories/context.py).


@dataclass(frozen=True)
class Found:
    """A search's answer and the query vector it ranked with (None in keyword mode): the
    context block quotes a long memory by the passage nearest that vector."""

    response: SearchResponse
    vector: np.ndarray | None
    # A hit's score before the speaker weighed it (`scoring.by_speaker`), by id, for the
    # hits it weighed: what its text earned whoever said it.
    unweighted: dict[str, float] = field(default_factory=dict)


def search(rp: ReadPath, owner: Owner, req: SearchRequest) -> SearchResponse:
    return find_memories(rp, owner, req).response


def find_memories(rp: ReadPath, owner: Owner, req: SearchRequest) -> Found:
    # The whole search is one session of the query model: with concurrent searches, e5 runs
    # on narrow teams instead of spinning a wide one against the others' Python work.
    with rp.query_embedder.session():
        return _find(rp, owner, req)


def _find(rp: ReadPath, owner: Owner, req: SearchRequest) -> Found:
    started = time.perf_counter()
    if req.rerank:
        _ = rp.reranker()  # refuse an unconfigured rerank before doing any work
    # 1. The query, read once.
    query = Query.read(req.query)
    # 2. What each list searches by.
    vector = query_vector(rp, owner, req.mode, query)
    bridged = bridged_vector(rp, owner, req.mode, query)
    keywords = (keyword_query(rp, owner, query)
                if req.mode is not SearchMode.DENSE else None)
    # 3. The store, once for all lists, under the caller's filters (built once, used by
    #    every read that follows).
    conditions = live_search_conditions(rp, owner, req)
    # Full payloads read so far (the keyword list's head, rerank texts, next turns): each
    # point is read once.
    payloads: dict[str, dict[str, Any]] = {}
    pool = candidates(rp, owner, conditions, vector, keywords,
                      list_depth(rp.settings.search_depth, req.top_k),
                      max(req.top_k, rp.weights.evidence_depth), payloads, bridged)
    # 4. Rank.
    as_of = req.as_of or utcnow()
    cues = read_time_cues(query.asks, as_of) if req.mode is SearchMode.HYBRID else None
    ranked = scoring.rank(pool, req.mode, rp.embedder_name, rp.weights, query.chinese,
                          as_of, cues, about_own_words(query.asks))
    # 5. The page. Records only for what can reach it: the reranker's head, else the page
    #    itself (the next turns added below come from the store, not from the candidates).
    head = max(rp.settings.rerank_depth, req.top_k) if req.rerank else req.top_k
    scored = best_candidates(pool, ranked.final, ranked.rels, ranked.parts, head,
                             None if req.rerank else req.min_score)
    if req.rerank:
        scored = reranked(rp, owner, req, scored, payloads)
        if req.min_score is not None:
            scored = [s for s in scored if s.final >= req.min_score]
    if req.mode is SearchMode.HYBRID and rp.weights.context_hits:
        scored = with_next_turns(rp, owner, conditions, scored, as_of, payloads, cues,
                                 own_scores(pool, ranked))
        if req.min_score is not None:
            # A next turn is shown only when its own text earns `min_score`.
            scored = [s for s in scored if s.final >= req.min_score]
    hits = page_hits(rp, owner, scored[: req.top_k], payloads, req.explain)
    return Found(SearchResponse(results=hits,
                                took_ms=round((time.perf_counter() - started) * 1000, 3)),
                 vector, {} if req.rerank else unweighted_scores(
                     pool, ranked, [h.memory.id for h in hits]))


def unweighted_scores(c: scoring.Candidates, ranked: scoring.Ranked, ids: Sequence[str]
                      ) -> dict[str, float]:
    """The final score each of `ids` had before the speaker weighed it, for those it
    weighed (`Found.unweighted`)."""
    if ranked.unweighted is None:
        return {}
    row = {point_id: i for i, point_id in enumerate(c.ids)}
    return {i: float(ranked.unweighted[row[i]]) for i in ids
            if i in row and ranked.unweighted[row[i]] != ranked.final[row[i]]}


def query_vector(
    rp: ReadPath, owner: Owner, mode: SearchMode, query: Query,
) -> np.ndarray | None:
    """The dense lists' query vector; None in keyword mode. An excerpt's current turn counts
    twice (docs/retrieval.md), so every mode reads the same query and shares a calibration."""
    if mode is SearchMode.KEYWORD:
        return None
    # Cached per tenant: a shared hit would show in took_ms (shared/embeddings/cache.py).
    vector = rp.query_embedder.embed_query_for(owner.tenant_id, query.full)
    if query.current is not None:
        vector = vector + rp.query_embedder.embed_query_for(owner.tenant_id, query.current)
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return vector


# A memory the bridged list reads: one with some Chinese in it (`scoring.chinese` reads a
# share of 0.1 and below as English).
CHINESE_MEMORY = Between("cjk_share", gt=0.1)


def bridged_vector(
    rp: ReadPath, owner: Owner, mode: SearchMode, query: Query,
) -> np.ndarray | None:
    """An English query's second reading for the dense side: what was said, its words put
    into Chinese by the keyword bridge (`bridge.chinese_reading`), embedded as the query is
    (an excerpt's current turn twice). Its list scores the user's Chinese memories
    (`scoring.bridged_cosines`). None in keyword mode, with the bridge off, for an
    embedder whose offset for it was never measured (`scoring.BRIDGED_OFFSET`), for a
    query that reads as Chinese, when no word bridges, and for a user who holds no
    Chinese memory: an English-only user's search neither embeds it nor reads its list
    (docs/decisions/0041-an-english-query-read-in-chinese.md)."""
    if (mode is SearchMode.KEYWORD or not rp.settings.search_bridge
            or rp.embedder_name not in scoring.BRIDGED_OFFSET
            or scoring.chinese(query.chinese) >= 1.0):
        return None
    reading = chinese_reading(query.said)
    if not reading or rp.store.count(owner, [CHINESE_MEMORY]) == 0:
        return None
    vector = rp.query_embedder.embed_query_for(owner.tenant_id, reading)
    current = None if query.current is None else chinese_reading([query.current])
    if current:
        vector = vector + rp.query_embedder.embed_query_for(owner.tenant_id, current)
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
    return vector


def keyword_query(
    rp: ReadPath, owner: Owner, query: Query,
) -> tuple[list[int], list[float]] | None:
    """The keyword list's query vector (`keywords.query_keyword_vector`), weighted by the
    user's own term counts; None when the query has no keyword."""
    return query_keyword_vector(query.full, query.current, own_counts(rp, owner),
                                bridge=rp.settings.search_bridge, said=query.said)


def with_best_passages(
    rp: ReadPath, owner: Owner, lists: RankedLists, query: dict[int, float], settle: int,
    payloads: dict[str, dict[str, Any]], long_ids: set[str] | None = None,
) -> RankedLists:
    """The keyword list (last) with each long memory of its head scored by its single best
    passage (`keywords.best_passage_score`), reordered. The store's score of a long memory
    is an upper bound of that one, so the list is read from the top in batches of `settle`,
    then twice as many each time, until `settle` of the scores read are known to be at
    least every stored score below them: the head is then exact, and what lies below it
    scores no higher than the head's last. A head of short memories settles in one read of
    `settle` payloads, which the page then reuses (`payloads`). With `long_ids` (every
    memory of the user that can be long, from the passages list), only those are read: a
    user with none reads nothing here. A long memory written without its passages' vectors
    (`MEMORYD_LONG_MEMORY_PARTS` off then, or before decision 0024) is then not among them,
    and keeps the store's score until `memoryd reindex`."""
    ids, scores = lists.lists[-1]
    exact = scores.astype(np.float64)
    read, size = 0, settle
    while read < len(ids):
        batch = ids[read:read + size]
        wanted = batch if long_ids is None else [i for i in batch if i in long_ids]
        found = {p.id: p.payload for p in rp.store.get(owner, wanted)} if wanted else {}
        payloads.update(found)
        for offset, point_id in enumerate(batch):
            payload = found.get(point_id, {})
            content = payload.get("content")
            best = (best_passage_score(query, str(content), scope=owner.tenant_id,
                                       stored=payload.get(PASSAGES_FIELD)) if content
                    else None)
            if best is not None:
                exact[read + offset] = min(best, exact[read + offset])
        read, size = read + len(batch), 2 * size
        if read >= len(ids) or np.sort(exact[:read])[::-1][settle - 1] >= scores[read]:
            break
    if np.array_equal(exact, scores):
        return lists
    order = np.lexsort((np.arange(len(ids)), -exact))
    ranked = ([ids[i] for i in order.tolist()], exact[order])
    return RankedLists([*lists.lists[:-1], ranked], lists.ids, lists.fields, lists.threads)


def own_counts(rp: ReadPath, owner: Owner) -> OwnCounts:
    """The user's own keyword statistics (`keywords.OwnCounts`): how many memories the
    user has, and for each term how many hold it, up to `USER_COUNT_CAP`, in one store
    call. Only the user's points are read, every one of them (no search filter), so the
    figures are the same for every search of the user:
    docs/decisions/0029-keyword-statistics-no-one-else-moves.md."""
    def counts(ids: list[int]) -> tuple[int, list[int]]:
        return rp.store.count(owner), rp.store.keyword_holders(owner, ids, USER_COUNT_CAP)
    return counts


def list_depth(depth: int, top_k: int) -> int:
    """Each ranked list's depth: `depth` at top_k 10 and below, in proportion above, so a
    page is never deeper than its lists (the setting is at least 10)."""
    return max(depth, top_k * depth // 10)


def candidates(
    rp: ReadPath, owner: Owner, conditions: Sequence[Condition], vector: np.ndarray | None,
    keywords: tuple[list[int], list[float]] | None, depth: int, settle: int,
    payloads: dict[str, dict[str, Any]] | None = None, bridged: np.ndarray | None = None,
) -> scoring.Candidates:
    """A search's candidates, from one store call: the dense list (a long memory at its best
    passage's score or its whole's, whichever is higher) when there is a vector, the
    bridged list of the user's Chinese memories when there is a `bridged` vector
    (`bridged_vector`), the keyword list when there are keywords, each `depth` deep.
    Fusion, neighbours and rescoring reorder, so each list goes deeper than the page:
    docs/decisions/0011-search-depth-100.md.
    The keyword list's head (`settle` long) is then exact for long memories too
    (`with_best_passages`), whose payload reads go into `payloads`."""
    queries: list[VectorQuery] = []
    if vector is not None:
        queries.append(VectorQuery(DENSE, vector.tolist()))
        if rp.store.supports_parts:
            # Long memories' passages (shared/embeddings/parts.py).
            queries.append(VectorQuery(PARTS, vector.tolist()))
    if bridged is not None and vector is not None:
        queries.append(VectorQuery(DENSE, bridged.tolist()))
    if keywords is not None:
        queries.append(VectorQuery(SPARSE, keywords))
    lists = rp.store.search_candidates(owner, conditions, queries, depth)
    full = [len(point_ids) >= depth for point_ids, _ in lists.lists]
    lists = without_cut_ties(lists, depth)
    long_ids: set[str] | None = None  # which memories can be long; None: any of them
    if len(queries) > 1 and queries[1].using == PARTS:
        part_ids = lists.lists[1][0]
        if rp.settings.long_memory_parts and not full[1]:
            # Only long memories and facts with a topic reading have parts; a list of them
            # shorter than its depth holds every long memory of the user under the filter.
            long_ids = set(part_ids)
        lists = with_parts_merged(lists, depth)
    read_bridged = bridged is not None and vector is not None
    if read_bridged:
        lists = with_chinese_only(lists, 1)
    if keywords is not None:
        lists = with_best_passages(rp, owner, lists, dict(zip(*keywords, strict=True)), settle,
                                   {} if payloads is None else payloads, long_ids)
    return scoring.Candidates.of(
        lists, 0 if vector is not None else None,
        len(lists.lists) - 1 if keywords is not None else None, 1 if read_bridged else None)


def with_chinese_only(lists: RankedLists, which: int) -> RankedLists:
    """`lists` with list `which` (the bridged list) holding only Chinese memories: scoring
    reads it for nothing else, and an English memory only it found would be a candidate
    with no cosine of its own."""
    point_ids, scores = lists.lists[which]
    row = {point_id: i for i, point_id in enumerate(lists.ids)}
    share = scoring.chinese(np.array([lists.fields[row[i], CJK] for i in point_ids]))
    keep = np.nan_to_num(share, nan=0.0) > 0
    if keep.all():
        return lists
    kept = ([i for i, k in zip(point_ids, keep.tolist(), strict=True) if k], scores[keep])
    return with_lists(lists, [*lists.lists[:which], kept, *lists.lists[which + 1:]])


def without_cut_ties(lists: RankedLists, depth: int) -> RankedLists:
    """Each list the store cut at `depth` without the memories tied at its last score.

    Among equal scores the store returns points in its own internal order, which the whole
    shard's history sets, other users' writes included; a list cut in the middle of a tie
    would hold whichever of the tied memories came first, and what a list holds moves
    hybrid scores (neighbours, next turns). Every memory scored above the last score is in
    the list whatever that order, so the list keeps those. A list that is one tie from top
    to bottom is kept whole (nothing in it ranks above another). Candidates only the
    dropped ties held leave with them, and ties left inside a list go in id order
    (docs/decisions/0035-lists-cut-between-scores.md)."""
    trimmed: list[tuple[list[str], np.ndarray]] = []
    for point_ids, scores in lists.lists:
        if len(point_ids) >= depth and scores[0] != scores[-1]:
            keep = int(np.count_nonzero(scores != scores[-1]))  # sorted: ties at the end
            point_ids, scores = point_ids[:keep], scores[:keep]
        if len(scores) > 1 and np.any(scores[1:] == scores[:-1]):
            # Ties within the list in id order, so each memory's rank is the store's too.
            order = np.lexsort((np.asarray(point_ids), -scores))
            point_ids, scores = [point_ids[i] for i in order.tolist()], scores[order]
        trimmed.append((point_ids, scores))
    return with_lists(lists, trimmed)


def with_lists(lists: RankedLists, ranked: list[tuple[list[str], np.ndarray]]) -> RankedLists:
    """`lists` with its ranked lists replaced by `ranked`: a candidate none of them holds
    any more leaves, every other keeps its scoring row."""
    kept = union_ids(ranked)
    if len(kept) == len(lists.ids):
        return RankedLists(ranked, lists.ids, lists.fields, lists.threads)
    row = {point_id: i for i, point_id in enumerate(lists.ids)}
    rows = np.fromiter((row[point_id] for point_id in kept), np.int64, len(kept))
    return RankedLists(ranked, kept, lists.fields[rows], lists.threads)


def with_parts_merged(lists: RankedLists, depth: int) -> RankedLists:
    """The dense list (first) and the parts list (second) as one dense list: each memory
    at its higher score, best first, `depth` long. Candidates only the dropped tail held
    leave with it."""
    (dense_ids, dense), (part_ids, parts) = lists.lists[0], lists.lists[1]
    best: dict[str, float] = dict(zip(dense_ids, dense.tolist(), strict=True))
    for point_id, score in zip(part_ids, parts.tolist(), strict=True):
        if score > best.get(point_id, -np.inf):
            best[point_id] = score
    ranked = sorted(best.items(), key=lambda item: item[1], reverse=True)[:depth]
    merged = ([point_id for point_id, _ in ranked],
              np.fromiter((score for _, score in ranked), np.float64, len(ranked)))
    return with_lists(lists, [merged, *lists.lists[2:]])


@dataclass
class Scored:
    id: str
    final: float
    lists: scoring.ListScores
    rel: float
    parts: dict[str, float]
    place: tuple[str, int] | None  # (thread id, position in it)
    context_of: str | None = None
    rerank: float | None = None


def best_candidates(
    c: scoring.Candidates, final: np.ndarray, rels: np.ndarray, parts: np.ndarray,
    count: int, min_score: float | None,
) -> list[Scored]:
    """The `count` best candidates by final score, as records. Equal scores go by memory id,
    so the same memories in any insertion order give the same ranking."""
    order = np.lexsort((np.asarray(c.ids), -final))
    if min_score is not None:
        order = order[final[order] >= min_score]
    return [
        Scored(c.ids[i], float(final[i]), c.list_scores(i), float(rels[i]),
               dict(zip(scoring.BOOSTS, map(float, parts[i]), strict=True)),
               c.lists.thread_of(i))
        for i in order[:count].tolist()
    ]


def reranked(
    rp: ReadPath,
    owner: Owner,
    req: SearchRequest,
    scored: list[Scored],
    payloads: dict[str, dict[str, Any]],
) -> list[Scored]:
    """The best candidates reordered by the reranker, whose score replaces their relevance
    (the recency, importance and access boosts still apply). Candidates below the reranked
    head are dropped: their fused scores are not comparable with the reranked ones. The
    head's payloads go into `payloads`."""
    head = scored[: max(rp.settings.rerank_depth, req.top_k)]
    found = rp.store.get(owner, [s.id for s in head])
    payloads.update((p.id, p.payload) for p in found)
    texts = {p.id: str(p.payload.get("content", "")) for p in found}
    head = [s for s in head if s.id in texts]
    scores = rp.reranker().scores(req.query, [texts[s.id] for s in head])
    for item, score in zip(head, scores, strict=True):
        item.rel = item.rerank = score
        item.final = scoring.final_score(score, item.parts, rp.weights)
    head.sort(key=lambda item: item.final, reverse=True)
    return head


OwnScore = Callable[[str], tuple[float, float]]


def own_scores(c: scoring.Candidates, ranked: scoring.Ranked) -> OwnScore:
    """A point's final score and relevance as a candidate, (0, 0) when it was none: looked
    up only for the few next turns that are found."""
    def of(point_id: str) -> tuple[float, float]:
        try:
            i = c.ids.index(point_id)
        except ValueError:
            return 0.0, 0.0
        return float(ranked.final[i]), float(ranked.rels[i])
    return of


def with_next_turns(
    rp: ReadPath,
    owner: Owner,
    conditions: Sequence[Condition],
    scored: list[Scored],
    as_of: datetime,
    payloads: dict[str, dict[str, Any]],
    cues: TimeCues | None = None,
    own: OwnScore | None = None,
) -> list[Scored]:
    """The turn after each of the best hits, placed right after it: the answer to a
    question often follows the turn that matches it (measured: docs/retrieval.md). The
    next turns' payloads go into `payloads`, so the page does not read them again.

    A next turn is context of its hit (`context_of`), not a hit: it keeps the score its own
    text earned (`own`: a candidate's final score and relevance), or 0 when it was no
    candidate at all, so its label never borrows the hit's."""
    top = [s for s in scored[: rp.weights.context_hits] if s.place is not None]
    if not top:
        return scored
    wanted = OneOf(tuple(
        AllOf((Match("thread_id", thread), Match("thread_seq", seq + 1)))
        for thread, seq in (s.place for s in top if s.place is not None)
    ))
    found = rp.store.find(owner, [*conditions, wanted], limit=len(top))
    payloads.update((p.id, p.payload) for p in found)
    after = {(p.payload.get("thread_id"), p.payload.get("thread_seq")): p for p in found}
    top_ids = {s.id for s in top}
    out: list[Scored] = []
    seen: set[str] = set()
    for s in scored:
        if s.id in seen:
            continue
        out.append(s)
        seen.add(s.id)
        if s.id not in top_ids or s.place is None:
            continue
        nxt = after.get((s.place[0], s.place[1] + 1))
        if nxt is not None and nxt.id not in seen:
            parts = scoring.boosts(nxt.payload, as_of, rp.weights, cues)
            final, rel = own(nxt.id) if own is not None else (0.0, 0.0)
            out.append(Scored(nxt.id, final, scoring.ListScores(), rel, parts,
                              (s.place[0], s.place[1] + 1), context_of=s.id))
            seen.add(nxt.id)
    return out


def page_hits(
    rp: ReadPath, owner: Owner, page: list[Scored], payloads: dict[str, dict[str, Any]],
    explain: bool,
) -> list[SearchHit]:
    """The page as search hits: candidates carry only what scoring reads, so the records
    not read yet come in one store call; a memory gone since is left out."""
    missing = [s.id for s in page if s.id not in payloads]
    full = {**payloads, **{p.id: p.payload for p in rp.store.get(owner, missing)}}
    hits = [
        SearchHit(
            memory=MemoryView.of(MemoryRecord.from_payload(s.id, full[s.id])),
            score=round(s.final, 6), label=scoring.label(s.final),
            context_of=s.context_of,
            explanation=scoring.explanation(s.lists, s.rel, s.parts, s.final, s.rerank)
            if explain
            else None,
        )
        for s in page
        if s.id in full
    ]
    return order_conflicts(hits)


def get_memory(rp: ReadPath, owner: Owner, memory_id: str) -> MemoryRecord:
    if not _is_uuid(memory_id):
        raise NotFound(f"no memory {memory_id}", field="memory_id")
    found = rp.store.find(owner, [IdIn((memory_id,)), *live_conditions(rp.settings,
                                                                       owner.tenant_id)], 1)
    if not found:
        raise NotFound(f"no memory {memory_id}", field="memory_id")
    return MemoryRecord.from_payload(found[0].id, found[0].payload)


def list_memories(
    rp: ReadPath,
    owner: Owner,
    *,
    type: MemoryType | None,
    tag: str | None,
    scope: Scope | None,
    project: str | None,
    sort: str,
    limit: int,
    cursor: str | None,
    key: str | None = None,
    kind: MemoryKind | None = None,
    episode: str | None = None,
) -> MemoryPage:
    """`kind`: only memories of that kind (points stored before kinds existed have none
    stored, and only show unfiltered); `episode`: the facts drawn from that episode."""
    # Earlier versions of a memory show in its history, not in the list.
    conds: list[Condition] = [*live_conditions(rp.settings, owner.tenant_id),
                              NoneOf((Match("state", "superseded"),))]
    if type is not None:
        conds.append(Match("type", type.value))
    if tag is not None:
        conds.append(Match("tags", tag))
    if scope is not None:
        conds.append(Match("scope", scope.value))
    if project is not None:
        conds.append(Match("project", project))
    if key is not None:
        conds.append(Match("key", key))
    if kind is not None:
        conds.append(Match("kind", kind.value))
    if episode is not None:
        if not _is_uuid(episode):  # a memory id, as the API returns them
            raise InvalidInput("episode must be a memory id", field="episode")
        conds.append(Match("episodes", episode))
    after = decode_cursor(cursor, sort) if cursor else None
    points, position = rp.store.page(owner, conds, limit, sort, after)
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

