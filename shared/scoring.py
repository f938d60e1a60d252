"""From ranked lists to one calibrated score per memory: fusion, then rescoring.

Relevance comes from the dense cosine and the keyword score, each mapped to [0, 1]
so that `min_score` means the same in every mode. Recency, importance and access
then boost a relevant memory; they never lift an irrelevant one (the boost multiplies).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.schemas import ScoreExplanation, SearchMode
from shared.store import StoredPoint

# Cosine → relevance, per embedder: (cosine of an unrelated text, cosine of a strong match).
# e5-small's cosines sit in a narrow high band; USE's spread over most of [0, 1].
DENSE_CALIBRATION = {"e5-small": (0.75, 0.95), "use": (0.15, 0.75)}
DEFAULT_DENSE_CALIBRATION = (0.3, 0.85)


@dataclass(frozen=True)
class Weights:
    """Mixing and boosting weights (all settings)."""

    dense: float = 0.3  # Latin-script queries
    dense_cjk: float = 0.8  # Chinese queries: jieba keywords add less than stemmed English ones
    keyword_half: float = 8.0  # keyword score that maps to relevance 0.5
    recency: float = 0.1
    importance: float = 0.1
    access: float = 0.05
    half_life_days: float = 30.0
    rrf_k: int = 60
    fusion: str = "linear"  # linear | rrf
    neighbour: float = 0.2  # share of the best nearby turn's relevance a memory gains
    neighbour_span: int = 2  # how many turns away counts as nearby
    context_hits: int = 2  # the best hits that bring their next turn along


@dataclass
class Candidate:
    point: StoredPoint
    dense: float | None = None
    dense_rank: int | None = None
    keyword: float | None = None
    keyword_rank: int | None = None
    parts: dict[str, float] = field(default_factory=dict)


def dense_relevance(cosine: float, embedder: str) -> float:
    low, high = DENSE_CALIBRATION.get(embedder, DEFAULT_DENSE_CALIBRATION)
    return min(max((cosine - low) / (high - low), 0.0), 1.0)


def keyword_relevance(score: float, half: float) -> float:
    # Saturating: keyword scores are unbounded sums of IDF-weighted matches.
    return score / (score + half) if score > 0 else 0.0


def merge(dense: list[StoredPoint], keyword: list[StoredPoint]) -> list[Candidate]:
    by_id: dict[str, Candidate] = {}
    for rank, point in enumerate(dense, start=1):
        by_id[point.id] = Candidate(point, dense=point.score, dense_rank=rank)
    for rank, point in enumerate(keyword, start=1):
        found = by_id.setdefault(point.id, Candidate(point))
        found.keyword, found.keyword_rank = point.score, rank
    return list(by_id.values())


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def dense_weight(query: str, w: Weights) -> float:
    """The dense share of hybrid relevance, by the query's dominant script (measured on
    LoCoMo, English, and MADial, Chinese: see docs/retrieval.md)."""
    cjk, latin = len(_CJK.findall(query)), len(_LATIN.findall(query))
    # One ideograph carries about as much as a short word of Latin letters.
    return w.dense_cjk if cjk * 3 > latin else w.dense


def relevance(
    c: Candidate, mode: SearchMode, embedder: str, w: Weights, dense_share: float
) -> float:
    d = dense_relevance(c.dense, embedder) if c.dense is not None else 0.0
    k = keyword_relevance(c.keyword, w.keyword_half) if c.keyword is not None else 0.0
    if mode is SearchMode.DENSE:
        return d
    if mode is SearchMode.KEYWORD:
        return k
    if w.fusion == "rrf":
        # Rank fusion orders the list; scaled so that first in both lists is 1.
        rrf = sum(1.0 / (w.rrf_k + r) for r in (c.dense_rank, c.keyword_rank) if r is not None)
        return rrf / (2.0 / (w.rrf_k + 1))
    return dense_share * d + (1 - dense_share) * k


def smooth_by_neighbours(
    candidates: list[Candidate], rels: dict[str, float], w: Weights
) -> dict[str, float]:
    """A turn next to a relevant turn of the same thread is likelier relevant itself."""
    if w.neighbour <= 0:
        return rels
    by_thread: dict[str, list[tuple[int, str]]] = {}
    for c in candidates:
        thread, seq = c.point.payload.get("thread_id"), c.point.payload.get("thread_seq")
        if thread and isinstance(seq, int):
            by_thread.setdefault(thread, []).append((seq, c.point.id))
    smoothed = dict(rels)
    for turns in by_thread.values():
        for seq, pid in turns:
            near = [rels[other] for s, other in turns
                    if other != pid and abs(s - seq) <= w.neighbour_span]
            if near:
                smoothed[pid] = min(rels[pid] + w.neighbour * max(near), 1.0)
    return smoothed


def boosts(payload: dict[str, Any], as_of: datetime, w: Weights) -> dict[str, float]:
    """From the raw payload: candidates run into the hundreds, records are built for the page."""
    occurred = datetime.fromisoformat(str(payload["occurred_at"]).replace("Z", "+00:00"))
    age_days = max((as_of - occurred).total_seconds() / 86400.0, 0.0)
    return {
        "recency": math.exp(-math.log(2) * age_days / w.half_life_days),
        "importance": (int(payload.get("importance", 5)) - 1) / 9.0,
        "access": 1.0 - math.exp(-int(payload.get("access_count") or 0) / 5.0),
    }


def final_score(rel: float, parts: dict[str, float], w: Weights) -> float:
    boost = w.recency * parts["recency"] + w.importance * parts["importance"] + (
        w.access * parts["access"]
    )
    return rel * (1.0 + boost) / (1.0 + w.recency + w.importance + w.access)


def label(score: float) -> str:
    if score >= 0.7:
        return "high"
    if score >= 0.5:
        return "relevant"
    return "reference"


def explanation(
    c: Candidate, rel: float, parts: dict[str, float], final: float,
    rerank: float | None = None,
) -> ScoreExplanation:
    return ScoreExplanation(
        dense=c.dense, dense_rank=c.dense_rank, keyword=c.keyword, keyword_rank=c.keyword_rank,
        rerank=None if rerank is None else round(rerank, 6),
        relevance=round(rel, 6), recency=round(parts["recency"], 6),
        importance=round(parts["importance"], 6), access=round(parts["access"], 6),
        final=round(final, 6),
    )
