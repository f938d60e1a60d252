"""Recall, hit and latency figures over rankings of ids. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field


def recall_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of the relevant ids found among the first k results."""
    if not relevant:
        raise ValueError("recall is undefined without relevant ids")
    found = set(ranked[:k]) & set(relevant)
    return len(found) / len(set(relevant))


def hit_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 when at least one relevant id is among the first k results."""
    return 1.0 if set(ranked[:k]) & set(relevant) else 0.0


def ndcg_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Binary-relevance nDCG over the first k results (repeats of an id count once)."""
    if not relevant:
        raise ValueError("nDCG is undefined without relevant ids")
    wanted, seen = set(relevant), set()
    dcg = 0.0
    for rank, key in enumerate(ranked[:k]):
        if key in wanted and key not in seen:
            dcg += 1 / math.log2(rank + 2)
        seen.add(key)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(wanted), k)))
    return dcg / ideal


def ranked_groups(ranked: Sequence[str], group_of: Callable[[str], str]) -> list[str]:
    """Groups (a turn's session) ranked by their best member: in order of first appearance."""
    return list(dict.fromkeys(group_of(key) for key in ranked))


def recall_all_at(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 when every relevant id is among the first k results (LongMemEval's recall_all)."""
    if not relevant:
        raise ValueError("recall_all is undefined without relevant ids")
    return 1.0 if set(relevant) <= set(ranked[:k]) else 0.0


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class MetricSpec:
    """A named metric: `recall@5` or `hit@10`."""

    kind: str  # "recall", "hit", "ndcg", or "session_recall_all" (of the answer sessions)
    k: int

    @property
    def name(self) -> str:
        return f"{self.kind}@{self.k}"

    def score(self, ranked: Sequence[str], relevant: Collection[str],
              sessions: Collection[str] = (),
              session_of: Callable[[str], str] | None = None) -> float:
        if self.kind == "recall":
            return recall_at(ranked, relevant, self.k)
        if self.kind == "hit":
            return hit_at(ranked, relevant, self.k)
        if self.kind == "ndcg":
            return ndcg_at(ranked, relevant, self.k)
        if self.kind == "session_recall_all":
            if session_of is None:
                raise ValueError("session_recall_all needs the session of a key")
            return recall_all_at(ranked_groups(ranked, session_of), sessions, self.k)
        raise ValueError(f"unknown metric kind {self.kind!r}")


LOCOMO_METRICS = (MetricSpec("recall", 5), MetricSpec("recall", 10), MetricSpec("hit", 10))
MADIAL_METRICS = (MetricSpec("recall", 5), MetricSpec("recall", 10), MetricSpec("hit", 5))
# LongMemEval: turn nDCG@10 (the has_answer turns), session recall_all@5 (sessions ranked by
# their best turn), and turn recall@10 beside them.
LONGMEMEVAL_METRICS = (MetricSpec("ndcg", 10), MetricSpec("session_recall_all", 5),
                       MetricSpec("recall", 10))


@dataclass(frozen=True)
class ScoredQuestion:
    qid: str
    category: str
    scores: dict[str, float]
    latency_ms: float


def score_question(
    qid: str, category: str, ranked: Sequence[str], relevant: Collection[str],
    latency_ms: float, specs: Sequence[MetricSpec], sessions: Collection[str] = (),
    session_of: Callable[[str], str] | None = None,
) -> ScoredQuestion:
    return ScoredQuestion(
        qid, category,
        {s.name: s.score(ranked, relevant, sessions, session_of) for s in specs},
        round(latency_ms, 3),
    )


@dataclass
class GroupSummary:
    count: int
    metrics: dict[str, float] = field(default_factory=dict)


def summarize_group(rows: Sequence[ScoredQuestion], specs: Sequence[MetricSpec]) -> GroupSummary:
    return GroupSummary(
        count=len(rows),
        metrics={s.name: round(mean([r.scores[s.name] for r in rows]), 4) for s in specs},
    )


def summarize_by_category(
    rows: Sequence[ScoredQuestion], specs: Sequence[MetricSpec], order: Sequence[str]
) -> dict[str, GroupSummary]:
    """Per category in `order` (then any other category seen), empty ones left out."""
    seen = list(dict.fromkeys([*order, *(r.category for r in rows)]))
    groups = {c: [r for r in rows if r.category == c] for c in seen}
    return {c: summarize_group(g, specs) for c, g in groups.items() if g}


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    return {
        "mean_ms": round(mean(latencies_ms), 2),
        "p95_ms": round(percentile(latencies_ms, 95), 2),
    }
