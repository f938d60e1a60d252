"""From ranked lists to one calibrated score per memory: fusion, then rescoring.

Relevance comes from the dense cosine and the keyword score, each mapped to [0, 1]
so that `min_score` means the same in every mode; hybrid search mixes them by each
list's evidence for the query (`evidence_share`). Recency, importance, access and the
query's time cues then raise relevance towards 1 (`final_scores`); a memory of no
relevance stays at 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memoryd.records.schemas import ScoreExplanation, SearchMode
from memoryd.retrieval.time_cues import TimeCues, newness, window_closeness
from memoryd.store import RankedLists
from memoryd.store.scoring_table import (
    ACCESS,
    ASSISTANT,
    CJK,
    IMPORTANCE,
    OCCURRED,
    SEQ,
    THREAD,
    ThreadCodes,
    scoring_row,
)

# Cosine → relevance, per embedder: (cosine of an unrelated text, cosine of a strong match).
# e5-small's cosines sit in a narrow high band; USE's spread over most of [0, 1].
DENSE_CALIBRATION = {"e5-small": (0.75, 0.95), "use": (0.15, 0.75)}
DEFAULT_DENSE_CALIBRATION = (0.3, 0.85)


@dataclass(frozen=True)
class Weights:
    """Mixing and boosting weights (all settings)."""

    dense: float = 0.3  # the fixed dense share of fusion "linear"
    # Keyword score that maps to relevance 0.5: where the best keyword hit of a user who has
    # the evidence and of one who has none part (docs/decisions/0029).
    keyword_half: float = 11.0
    recency: float = 0.1
    importance: float = 0.1
    access: float = 0.05
    time: float = 0.3  # a query's time cues (shared/retrieval/time_cues.py)
    half_life_days: float = 30.0
    rrf_k: int = 60
    fusion: str = "evidence"  # evidence | linear | rrf
    evidence_depth: int = 10  # fusion "evidence": how much of each list testifies
    evidence_power: float = 2.0
    share_bounds: tuple[float, float] = (0.2, 0.9)  # neither list is ever ignored
    neighbour: float = 0.2  # share of the best nearby turn's relevance a memory gains
    neighbour_span: int = 2  # how many turns away counts as nearby
    context_hits: int = 2  # the best hits that bring their next turn along
    # The query weight of bridged terms (keywords.BRIDGE_WEIGHT; 1: no bridge): a memory in
    # the other language than the query is matched through them (`bridge_scale`).
    bridge: float = 1.0
    # The share of its relevance an assistant's turn keeps when the query asks about the
    # user's own words (`speaker_cues.about_own_words`; 1: no difference).
    assistant: float = 1.0


@dataclass(frozen=True)
class ListScores:
    """Where a candidate stood in each ranked list (None: not in that list)."""

    dense: float | None = None
    dense_rank: int | None = None
    keyword: float | None = None
    keyword_rank: int | None = None
    bridged: float | None = None  # the bridged query vector's cosine (`bridged_cosines`)


@dataclass
class Candidates:
    """A search's candidates as columns (`ids[i]` is row i): each list's score and 1-based
    rank (NaN and 0 where a candidate is not in that list), and the scoring fields."""

    ids: list[str]
    dense: np.ndarray
    dense_rank: np.ndarray
    keyword: np.ndarray
    keyword_rank: np.ndarray
    lists: RankedLists
    # The cosine of each candidate with the query's bridged vector (NaN where it is no
    # candidate of that list); None when the search had no bridged list
    # (docs/decisions/0041-an-english-query-read-in-chinese.md).
    bridged: np.ndarray | None = None

    @classmethod
    def of(cls, lists: RankedLists, dense: int | None, keyword: int | None,
           bridged: int | None = None) -> Candidates:
        """`dense`, `keyword` and `bridged`: which of the store's lists is which (None: not
        searched)."""
        position = {point_id: i for i, point_id in enumerate(lists.ids)}
        columns = []
        for which in (dense, keyword, bridged):
            score, rank = np.full(len(position), np.nan), np.zeros(len(position), np.int64)
            if which is not None:
                point_ids, scores = lists.lists[which]
                at = np.fromiter(map(position.__getitem__, point_ids), np.int64, len(point_ids))
                score[at] = scores
                rank[at] = np.arange(1, len(at) + 1)
            columns += [score, rank]
        return cls(lists.ids, columns[0], columns[1], columns[2], columns[3], lists,
                   None if bridged is None else columns[4])

    def list_scores(self, i: int) -> ListScores:
        def opt_float(v: float) -> float | None:
            return None if math.isnan(v) else float(v)
        return ListScores(opt_float(self.dense[i]), int(self.dense_rank[i]) or None,
                          opt_float(self.keyword[i]), int(self.keyword_rank[i]) or None,
                          None if self.bridged is None else opt_float(self.bridged[i]))


# How the embedder's cosine moves with the two texts' languages, per embedder: (added when
# both are Chinese, added when one is Chinese and the other not), against two English
# texts about the same. e5-small: where the best hit of a user with the evidence and of a
# user without it part, on English (LoCoMo, our English MADial), Chinese (MADial zh) and
# crossed sets (docs/decisions/0023-evidence-fusion-and-calibration.md).
LANGUAGE_OFFSET = {"e5-small": (0.062, -0.018)}
# A Chinese memory of an English query read through the query's bridged vector
# (`bridged_cosines`): its cosine's offset, in place of the crossed one above. e5-small:
# where the best hit of a user with the evidence and of a user without it part on the
# English dialogues against Chinese memories and the mixed archive asked in English
# (docs/decisions/0041-an-english-query-read-in-chinese.md).
BRIDGED_OFFSET = {"e5-small": 0.010}
# The bridged cosine's share of such a memory's dense cosine: the two readings of the query
# count the same.
BRIDGED_SHARE = 0.5


def chinese(share: np.ndarray | float) -> np.ndarray:
    """How Chinese a text reads to the embedder, from its share of Chinese: a text with a
    Chinese clause in it reads as Chinese (share 0.3 and up counts fully), an English one
    with a Chinese word still English (0.1 and below)."""
    return np.asarray(np.clip((np.asarray(share, dtype=np.float64) - 0.1) / 0.2, 0.0, 1.0))


def language_offset(query_cjk: float, memory_cjk: np.ndarray, embedder: str,
                    bridged: np.ndarray | None = None) -> np.ndarray:
    """Each candidate's cosine offset from the query's and the memory's share of Chinese
    (`chinese`: a mixed text counts in between); 0 for a memory whose share is unknown.
    `bridged`: where a candidate's cosine was read through the bridged vector too
    (`bridged_cosines`), whose English-query, Chinese-memory part takes `BRIDGED_OFFSET`."""
    both, across = LANGUAGE_OFFSET.get(embedder, (0.0, 0.0))
    q, m = chinese(query_cjk), chinese(memory_cjk)
    to_chinese = np.full(np.shape(m), across) if bridged is None else np.where(
        bridged, BRIDGED_OFFSET.get(embedder, across), across)
    offset = both * q * m + across * q * (1 - m) + to_chinese * (1 - q) * m
    return np.asarray(np.nan_to_num(offset, nan=0.0))


def bridged_cosines(c: Candidates, query_cjk: float) -> tuple[np.ndarray, np.ndarray | None]:
    """The dense column as scoring reads it, and where it was read through the bridged
    vector (None: nowhere).

    An English query's words, put into Chinese by the keyword bridge and embedded, are a
    second reading of the query (`memories.reads.bridged_vector`): e5-small matches a
    Chinese memory better through it than through the English text alone, and worse
    through the English glosses of a Chinese query, so only that direction has one
    (docs/decisions/0041-an-english-query-read-in-chinese.md). A Chinese memory's cosine
    is then the mean of the two readings' (`BRIDGED_SHARE`), in proportion to how English
    the query and how Chinese the memory read; every other memory keeps its own. A Chinese
    memory only the bridged list found takes the dense list's lowest cosine as its own:
    it ranked below every memory that list holds."""
    if c.bridged is None:
        return c.dense, None
    share = BRIDGED_SHARE * (1 - chinese(query_cjk)) * chinese(c.lists.fields[:, CJK])
    read = ~np.isnan(c.bridged) & (np.nan_to_num(share, nan=0.0) > 0)
    if not read.any():
        return c.dense, None
    listed = c.dense[~np.isnan(c.dense)]
    own = np.where(np.isnan(c.dense) & read, listed.min() if len(listed) else np.nan, c.dense)
    weight = np.where(read, share, 0.0)
    mixed = np.where(read, (1 - weight) * own + weight * np.nan_to_num(c.bridged), c.dense)
    return np.asarray(mixed), read


def bridge_scale(query_cjk: float, memory_cjk: np.ndarray, bridge: float) -> np.ndarray:
    """Each candidate's keyword-score factor from the query's and the memory's languages.

    A memory in the other language than the query matches it through the bridged terms
    (shared/retrieval/bridge.py), which the query weighs `bridge`: its score is read at the
    scale of exact matches (× 1 / `bridge`), so that a right cross-lingual hit is labelled
    as a same-language one is; 1 within one language, in between for a mixed text, 1 for a
    memory whose share is unknown. The lists' evidence still reads the scores as found, so
    hybrid search leans less on a keyword list that found only translations.
    """
    q, m = chinese(query_cjk), chinese(memory_cjk)
    across = q * (1 - m) + (1 - q) * m
    return np.asarray(np.nan_to_num(1.0 / (1.0 - (1.0 - bridge) * across), nan=1.0))


def dense_relevance(cosine: np.ndarray, embedder: str) -> np.ndarray:
    low, high = DENSE_CALIBRATION.get(embedder, DEFAULT_DENSE_CALIBRATION)
    return np.asarray(np.clip((cosine - low) / (high - low), 0.0, 1.0))


def keyword_relevance(score: np.ndarray, half: float) -> np.ndarray:
    # Saturating: keyword scores are unbounded sums of IDF-weighted matches.
    positive = np.maximum(score, 0.0)
    return np.asarray(positive / (positive + half))


def evidence_share(d: np.ndarray, k: np.ndarray, w: Weights) -> float:
    """The dense share of hybrid relevance for one query, from the lists' own evidence.

    Each list testifies with the mean relevance of its best `evidence_depth` candidates:
    a list that finds strong matches for this query counts more, one that finds only weak
    ones less. Shares go as the testimonies' `evidence_power`, within `share_bounds`. So
    no rule keys on the query's language or shape: a question full of names leans on its
    keyword matches, a conversational excerpt whose words match loosely leans on meaning,
    and a question whose words cannot match at all (asked in another language than the
    memories) leaves the dense list nearly alone, unpunished for the missing keywords.
    """
    def testimony(x: np.ndarray) -> float:
        top = np.sort(x)[::-1][: w.evidence_depth]
        return float(top.mean()) ** w.evidence_power if len(top) else 0.0

    dense, keyword = testimony(d), testimony(k)
    low, high = w.share_bounds
    if dense + keyword <= 0:
        return (low + high) / 2
    return min(max(dense / (dense + keyword), low), high)


def relevance(
    c: Candidates, mode: SearchMode, embedder: str, w: Weights, query_cjk: float = 0.0,
) -> np.ndarray:
    """Each candidate's relevance in [0, 1] for `mode`. The dense side is corrected for the
    languages of the query (`query_cjk`, its share of Chinese) and of each memory, so a
    memory in either language competes on meaning, and so is the keyword side for the
    bridge's weight (`bridge_scale`); the lists' evidence is read on the scores as they
    are, which is what each list found."""
    cjk = c.lists.fields[:, CJK]
    cosines, bridged = bridged_cosines(c, query_cjk)
    if mode is SearchMode.DENSE:
        return _dense_side(cosines, embedder, query_cjk, cjk, bridged)
    scale = None if w.bridge == 1.0 else bridge_scale(query_cjk, cjk, w.bridge)
    k = _keyword_side(c.keyword if scale is None else c.keyword * scale, w)
    if mode is SearchMode.KEYWORD:
        return np.asarray(k)
    if w.fusion == "rrf":
        # Rank fusion orders the list; scaled so that first in both lists is 1.
        rrf = sum(np.where(rank > 0, 1.0 / (w.rrf_k + rank), 0.0)
                  for rank in (c.dense_rank, c.keyword_rank))
        return np.asarray(rrf / (2.0 / (w.rrf_k + 1)))
    d = _dense_side(cosines, embedder, query_cjk, cjk, bridged)
    if w.fusion == "linear":
        share = w.dense
    else:
        # The lists testify with what they found: cosines and keyword scores uncorrected.
        seen = np.nan_to_num(dense_relevance(cosines, embedder), nan=0.0)
        found = k if scale is None else _keyword_side(c.keyword, w)
        share = evidence_share(seen, found, w)
    return np.asarray(share * d + (1 - share) * k)


def _keyword_side(score: np.ndarray, w: Weights) -> np.ndarray:
    return np.asarray(np.nan_to_num(keyword_relevance(score, w.keyword_half), nan=0.0))


def _dense_side(
    cosines: np.ndarray, embedder: str, query_cjk: float, memory_cjk: np.ndarray,
    bridged: np.ndarray | None = None,
) -> np.ndarray:
    """Dense relevance with each cosine corrected for the two texts' languages."""
    offset = language_offset(query_cjk, memory_cjk, embedder, bridged)
    return np.asarray(np.nan_to_num(dense_relevance(cosines - offset, embedder), nan=0.0))


# Where a search's relevance becomes "about what was asked": per mode, the relevance at
# which the best hit of a user who has the memory and the best hit of a user who has none
# part (`memoryd eval --calibration`). With the cosines corrected for language
# (`language_offset`) the same midpoint holds for English, Chinese and crossed sets.
# Fitted with e5-small: docs/decisions/0023-evidence-fusion-and-calibration.md; keyword
# and hybrid again with the reference IDF and `keyword_half` 11, on LoCoMo and both MADial
# sets pooled (docs/decisions/0029-keyword-statistics-no-one-else-moves.md). Keyword is
# 0.5 by construction: `keyword_half` is the keyword list's own parting score.
CALIBRATION_MIDPOINT = {SearchMode.DENSE: 0.48, SearchMode.KEYWORD: 0.5, SearchMode.HYBRID: 0.47}
CALIBRATION_SLOPE = 0.1  # relevance from the midpoint that moves the score by e (logit 1)


def calibrated(rels: np.ndarray, mode: SearchMode) -> np.ndarray:
    """Relevance as a score whose 0.5 means "relevant" in every mode and both languages: a
    logistic map around the mode's midpoint. Monotone, so the order of one search's
    candidates is the order of their relevance."""
    mid = CALIBRATION_MIDPOINT[mode]
    return np.asarray(1.0 / (1.0 + np.exp(-(rels - mid) / CALIBRATION_SLOPE)))


def smooth_by_neighbours(c: Candidates, rels: np.ndarray, w: Weights) -> np.ndarray:
    """A turn next to a relevant turn of the same thread is likelier relevant itself."""
    if w.neighbour <= 0 or len(rels) < 2:
        return rels
    thread, seq = c.lists.fields[:, THREAD], c.lists.fields[:, SEQ]
    near = ((thread[:, None] == thread[None, :]) & (thread[:, None] >= 0)
            & (np.abs(seq[:, None] - seq[None, :]) <= w.neighbour_span))
    np.fill_diagonal(near, False)
    best = np.where(near, rels[None, :], -np.inf).max(axis=1)
    return np.where(np.isfinite(best), np.minimum(rels + w.neighbour * best, 1.0), rels)


BOOSTS = ("recency", "importance", "access", "time")


def boost_rows(
    fields: np.ndarray, as_of: datetime, w: Weights, cues: TimeCues | None = None,
) -> np.ndarray:
    """Recency, importance, access and time-cue boosts (columns in `BOOSTS` order) of
    scoring rows (`shared/store/scoring_table.py`); a row with no time counts as new.

    The time column is 0 unless the query carries time cues: then it is how close the
    memory's time is to a window the query names ("last week", 上个月), and, when the
    query asks for the current state of something ("now", 现在), how new the memory is
    among these rows. A soft boost: a memory far outside the window is never dropped. A
    query that names a window asks about that time, not about the latest: recency then
    counts for nothing, so it cannot outweigh the window."""
    occurred = fields[:, OCCURRED]
    age_days = np.maximum((as_of.timestamp() - occurred) / 86400.0, 0.0)
    recency = np.exp(-math.log(2) * age_days / w.half_life_days)
    cue = np.zeros(len(fields))
    if cues is not None and cues.windows:
        cue = window_closeness(occurred, cues.windows)
        recency = np.zeros(len(fields))
    if cues is not None and cues.latest:
        cue = np.maximum(cue, newness(occurred))
    return np.stack([
        recency,
        (fields[:, IMPORTANCE] - 1) / 9.0,
        1.0 - np.exp(-fields[:, ACCESS] / 5.0),
        cue,
    ], axis=1)


def boost_columns(
    c: Candidates, as_of: datetime, w: Weights, cues: TimeCues | None = None,
) -> np.ndarray:
    return boost_rows(c.lists.fields, as_of, w, cues)


@dataclass(frozen=True)
class Ranked:
    """One search's candidates ranked (row i is `Candidates.ids[i]`): calibrated relevance,
    the boosts (columns in `BOOSTS` order) and the final score."""

    rels: np.ndarray
    parts: np.ndarray
    final: np.ndarray
    # The final scores before `by_speaker`, when it weighed any candidate (else None): what
    # each memory's text earned whoever said it, which the context block's gate reads.
    unweighted: np.ndarray | None = None


def by_speaker(c: Candidates, rels: np.ndarray, w: Weights) -> np.ndarray:
    """Relevance when the query asks about the user's own words: an assistant's turn keeps
    `w.assistant` of its own, every other memory all of it. An assistant's reply echoes the
    user's topic and a long one meets a question in many places, but it is not evidence of
    what the user did or said (shared/retrieval/speaker_cues.py)."""
    if w.assistant == 1.0:
        return rels
    return np.asarray(np.where(c.lists.fields[:, ASSISTANT] > 0, rels * w.assistant, rels))


def rank(
    c: Candidates, mode: SearchMode, embedder: str, w: Weights, query_cjk: float,
    as_of: datetime, cues: TimeCues | None, own_words: bool = False,
) -> Ranked:
    """The whole of scoring, in order: relevance (`relevance`; hybrid: fused, then raised
    by the thread's neighbours, an assistant's reply raising the turn it answers as any
    neighbour does), weighed by its speaker when the query asks about the user's own words
    (`by_speaker`), calibrated to a score (`calibrated`), then lifted by the boosts
    (`final_scores`). `cues`: the query's time cues (search reads them in hybrid mode)."""
    rels = relevance(c, mode, embedder, w, query_cjk)
    if mode is SearchMode.HYBRID:
        rels = smooth_by_neighbours(c, rels, w)
    parts = boost_columns(c, as_of, w, cues)
    weighed = by_speaker(c, rels, w) if own_words else rels
    scores = calibrated(weighed, mode)
    unweighted = None
    if weighed is not rels and not np.array_equal(weighed, rels):
        unweighted = final_scores(calibrated(rels, mode), parts, w)
    return Ranked(scores, parts, final_scores(scores, parts, w), unweighted)


def final_scores(rels: np.ndarray, parts: np.ndarray, w: Weights) -> np.ndarray:
    """Boosts lift relevance by a factor that saturates at 1: final = r (1 + b) / (1 + r b),
    b = the weighted sum of the parts. A weakly relevant memory gains the factor 1 + b,
    as with a plain product, so a boost never outweighs a clear difference in relevance;
    near 1 the gain shrinks, so scores stay in [0, 1] and keep their order. No boost
    leaves the calibrated relevance as it is, so `min_score` and the labels keep their
    meaning at any age."""
    boost = parts @ np.array([w.recency, w.importance, w.access, w.time])
    r = np.clip(rels, 0.0, 1.0)
    return np.asarray(r * (1.0 + boost) / (1.0 + r * boost))


def boosts(
    payload: dict[str, Any], as_of: datetime, w: Weights, cues: TimeCues | None = None,
) -> dict[str, float]:
    """One point's boosts from its raw payload (a next turn, which is no candidate): the
    same formula as the candidates' columns (newness, relative to itself alone, is 1)."""
    row = np.array([scoring_row(payload, ThreadCodes())])
    return dict(zip(BOOSTS, map(float, boost_rows(row, as_of, w, cues)[0]), strict=True))


def final_score(rel: float, parts: dict[str, float], w: Weights) -> float:
    return float(final_scores(np.array([rel]), np.array([[parts[b] for b in BOOSTS]]), w)[0])


def label(score: float) -> str:
    if score >= 0.7:
        return "high"
    if score >= 0.5:
        return "relevant"
    return "reference"


def explanation(
    c: ListScores, rel: float, parts: dict[str, float], final: float,
    rerank: float | None = None,
) -> ScoreExplanation:
    return ScoreExplanation(
        dense=c.dense, dense_rank=c.dense_rank, keyword=c.keyword, keyword_rank=c.keyword_rank,
        bridged=c.bridged, rerank=None if rerank is None else round(rerank, 6),
        relevance=round(rel, 6), recency=round(parts["recency"], 6),
        importance=round(parts["importance"], 6), access=round(parts["access"], 6),
        time=round(parts["time"], 6),
        final=round(final, 6),
    )
