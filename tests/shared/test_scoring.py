"""Fusion and rescoring (shared/retrieval/scoring.py): per payload, and column-wise over
candidates."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memoryd.memories.reads import best_candidates
from memoryd.platform.script_share import cjk_share
from memoryd.records.schemas import SearchMode
from memoryd.retrieval.scoring import (
    BOOSTS,
    BRIDGED_OFFSET,
    BRIDGED_SHARE,
    CALIBRATION_MIDPOINT,
    LANGUAGE_OFFSET,
    Candidates,
    ListScores,
    Weights,
    boost_columns,
    boosts,
    bridge_scale,
    bridged_cosines,
    calibrated,
    evidence_share,
    final_score,
    final_scores,
    language_offset,
    rank,
    relevance,
    smooth_by_neighbours,
)
from memoryd.retrieval.time_cues import read_time_cues
from memoryd.store.scoring_table import ScoringTable, ranked_lists, union_ids

AS_OF = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("stored", [
    "2024-04-01T12:00:00Z",  # how memoryd stores times
    "2024-04-01T14:00:00+02:00",  # the same instant with an offset
    "2024-04-01T12:00:00.000000+00:00",
])
def test_recency_halves_over_the_half_life_whatever_the_offset(stored: str) -> None:
    parts = boosts({"occurred_at": stored, "importance": 5}, AS_OF, Weights(half_life_days=30))
    assert parts["recency"] == pytest.approx(0.5)


def test_recency_is_relative_to_as_of() -> None:
    payload = {"occurred_at": "2024-04-01T12:00:00Z"}
    ages = [boosts(payload, AS_OF + timedelta(days=d), Weights(half_life_days=30))["recency"]
            for d in (-30, 0, 30)]
    assert ages == pytest.approx([1.0, 0.5, 0.25])  # a memory from the future counts as new


def test_importance_and_access_boosts() -> None:
    parts = boosts({"occurred_at": "2024-05-01T12:00:00Z", "importance": 10, "access_count": 5},
                   AS_OF, Weights())
    assert parts["importance"] == 1.0
    assert parts["access"] == pytest.approx(1 - math.exp(-1))
    bare = boosts({"occurred_at": "2024-05-01T12:00:00Z"}, AS_OF, Weights())
    assert bare == {"recency": 1.0, "importance": pytest.approx(4 / 9), "access": 0.0,
                    "time": 0.0}


def test_boosts_lift_relevance_within_one_and_leave_it_alone_without_them() -> None:
    w = Weights(recency=0.1, importance=0.1, access=0.05, time=0.2)
    rels = np.array([0.0, 0.3, 0.5, 0.9, 1.0])
    none = np.zeros((5, 4))
    assert final_scores(rels, none, w).tolist() == pytest.approx(rels.tolist())
    full = np.ones((5, 4))
    lifted = final_scores(rels, full, w)
    assert lifted[0] == 0.0 and lifted[-1] == 1.0  # nothing from nothing; 1 stays 1
    assert np.all(lifted[1:-1] > rels[1:-1])
    assert lifted.tolist() == pytest.approx((rels * 1.45 / (1 + rels * 0.45)).tolist())
    assert lifted[1] / rels[1] == pytest.approx(1.45 / (1 + 0.3 * 0.45))
    assert np.all(np.diff(lifted) > 0)  # the order of relevance holds under equal boosts


def test_calibrated_scores_cross_one_half_at_each_modes_midpoint() -> None:
    for mode, mid in CALIBRATION_MIDPOINT.items():
        assert calibrated(np.array([mid]), mode)[0] == pytest.approx(0.5)
        ranks = calibrated(np.array([0.1, 0.4, 0.8]), mode)
        assert np.all(np.diff(ranks) > 0) and np.all((ranks > 0) & (ranks < 1))


def test_the_chinese_share_of_a_text() -> None:
    assert cjk_share("What is my daughter called?") == 0.0
    assert cjk_share("孩子叫什么名字?") == 1.0
    assert cjk_share("我在 Berlin") == pytest.approx(6 / 12)
    assert cjk_share("12345 !!") == 0.0


def test_cosines_are_corrected_for_the_two_texts_languages() -> None:
    both, across = LANGUAGE_OFFSET["e5-small"]
    # Chinese, half Chinese, English, one Chinese word in English, unknown
    memory = np.array([1.0, 0.5, 0.0, 0.2, np.nan])
    assert language_offset(1.0, memory, "e5-small").tolist() == pytest.approx(
        [both, both, across, both / 2 + across / 2, 0.0])
    assert language_offset(0.0, memory, "e5-small").tolist() == pytest.approx(
        [across, across, 0.0, across / 2, 0.0])
    assert not language_offset(1.0, memory, "use").any()  # no offsets measured for it


def test_an_english_query_reads_a_chinese_memory_through_both_readings() -> None:
    c = candidates(
        [("en", 0.86), ("zh", 0.78), ("half", 0.80)],
        [("zh", 0.90), ("half", 0.84), ("zh-only", 0.88)],
        {"en": {**WHEN, "cjk_share": 0.0}, "zh": {**WHEN, "cjk_share": 1.0},
         "half": {**WHEN, "cjk_share": 0.2}, "zh-only": {**WHEN, "cjk_share": 1.0}},
        second="bridged")
    assert c.list_scores(1) == ListScores(0.78, 2, None, None, 0.90)
    cosines, read = bridged_cosines(c, 0.0)
    assert read is not None and read.tolist() == [False, True, True, True]
    half = BRIDGED_SHARE * 0.5  # a share of 0.2 reads as half Chinese
    # The English memory keeps its cosine; the Chinese ones take the mean of the two
    # readings; one only the bridged list found takes the dense list's lowest cosine.
    assert cosines.tolist() == pytest.approx([
        0.86, (0.78 + 0.90) / 2, (1 - half) * 0.80 + half * 0.84, (0.78 + 0.88) / 2])
    both, across = LANGUAGE_OFFSET["e5-small"]
    offset = language_offset(0.0, np.array([0.0, 1.0, 1.0]), "e5-small",
                             np.array([False, True, False]))
    assert offset.tolist() == pytest.approx([0.0, BRIDGED_OFFSET["e5-small"], across])
    # A Chinese query has no bridged reading: its cosines are the store's.
    assert bridged_cosines(c, 1.0)[1] is None
    assert bridged_cosines(c, 1.0)[0] is c.dense


def test_a_chinese_question_finds_an_english_memory_over_an_unrelated_chinese_one() -> None:
    # Cosines as e5-small gives them for "孩子叫什么名字?" against "User's daughter is
    # called Mia" (0.785) and "用户喜欢吃火锅" (0.821): same-language texts sit closer.
    c = candidates([("hotpot-zh", 0.821), ("mia-en", 0.785)], [],
                   {"hotpot-zh": {**WHEN, "cjk_share": 1.0}, "mia-en": {**WHEN, "cjk_share": 0.0}})
    dense = relevance(c, SearchMode.DENSE, "e5-small", Weights(), query_cjk=1.0)
    assert dense[1] > dense[0]
    assert relevance(c, SearchMode.DENSE, "e5-small", Weights())[0] > dense[0]


def test_keyword_scores_across_languages_are_read_at_the_scale_of_exact_matches() -> None:
    # Chinese, half Chinese, English, unknown: a Chinese query reaches the English memory
    # through bridged terms weighted 0.5, so its score counts double.
    memory = np.array([1.0, 0.2, 0.0, np.nan])
    assert bridge_scale(1.0, memory, 0.5).tolist() == pytest.approx([1.0, 4 / 3, 2.0, 1.0])
    assert bridge_scale(0.0, memory, 0.5).tolist() == pytest.approx([2.0, 4 / 3, 1.0, 1.0])
    assert bridge_scale(1.0, memory, 1.0).tolist() == [1.0] * 4  # no bridge, no scale
    payloads = {"zh": {**WHEN, "cjk_share": 1.0}, "en": {**WHEN, "cjk_share": 0.0}}
    c = candidates([("zh", 0.85), ("en", 0.85)], [("zh", 4.0), ("en", 2.0)], payloads)
    bridged = relevance(c, SearchMode.KEYWORD, "e5-small", Weights(bridge=0.5), query_cjk=1.0)
    assert bridged[0] == pytest.approx(bridged[1])  # 2.0 through translations = 4.0 exact
    plain = relevance(c, SearchMode.KEYWORD, "e5-small", Weights(), query_cjk=1.0)
    assert plain[0] == bridged[0] and plain[1] < bridged[1]  # same language: unchanged
    # Hybrid evidence reads the keyword list as found: only the mix is rescaled.
    both = relevance(c, SearchMode.HYBRID, "e5-small", Weights(bridge=0.5), query_cjk=1.0)
    assert both[0] == relevance(c, SearchMode.HYBRID, "e5-small", Weights(), query_cjk=1.0)[0]


def test_time_cues_boost_memories_in_the_window_and_the_newest() -> None:
    as_of = datetime(2024, 5, 20, 12, tzinfo=UTC)
    payloads: dict[str, dict[str, object]] = {
        "in-window": {"occurred_at": "2024-05-14T09:00:00Z"},  # last week (May 13-19)
        "before": {"occurred_at": "2024-03-01T09:00:00Z"},
        "unknown": {},
    }
    c = candidates([(i, 0.9) for i in payloads], [], payloads)
    w = Weights()
    cues = read_time_cues("what did I do last week?", as_of)
    columns = boost_columns(c, as_of, w, cues)
    time_col = columns[:, BOOSTS.index("time")]
    assert time_col[0] == 1.0 and 0.0 < time_col[1] < 0.5 and time_col[2] == 0.0
    assert np.all(columns[:, BOOSTS.index("recency")] == 0.0)  # the window replaces it
    latest = read_time_cues("where do I live now?", as_of)
    columns = boost_columns(c, as_of, w, latest)
    newest = columns[:, BOOSTS.index("time")]
    assert newest[0] == 1.0 and newest[1] == 0.0 and newest[2] == 0.0
    assert columns[0, BOOSTS.index("recency")] > 0.0  # "now" keeps recency
    assert np.all(boost_columns(c, as_of, w)[:, BOOSTS.index("time")] == 0.0)


def candidates(dense: list[tuple[str, float]], keyword: list[tuple[str, float]],
               payloads: dict[str, dict[str, object]], second: str = "keyword") -> Candidates:
    """Candidates of a dense list and a second one: the keyword list, or with `second`
    "bridged" the bridged list (decision 0041)."""
    table = ScoringTable()
    table.add(payloads)
    lists = [([i for i, _ in hits], np.array([s for _, s in hits], dtype=np.float64))
             for hits in (dense, keyword)]
    ids = union_ids(lists)
    found = ranked_lists(lists, ids, table.rows_of(ids), table)
    if second == "bridged":
        return Candidates.of(found, 0, None, 1)
    return Candidates.of(found, 0, 1)


WHEN: dict[str, object] = {"occurred_at": "2024-04-01T12:00:00Z"}


def test_linear_fusion_counts_a_missing_list_as_nothing() -> None:
    c = candidates([("both", 0.95), ("dense", 0.85)], [("kw", 8.0), ("both", 24.0)],
                   dict.fromkeys(("both", "dense", "kw"), WHEN))
    assert c.ids == ["both", "dense", "kw"]
    assert c.list_scores(2) == ListScores(None, None, 8.0, 1)
    assert c.list_scores(0) == ListScores(0.95, 1, 24.0, 2)
    w = Weights(keyword_half=8.0, fusion="linear", dense=0.3)
    rels = relevance(c, SearchMode.HYBRID, "e5-small", w)
    assert rels.tolist() == pytest.approx([0.3 * 1.0 + 0.7 * 0.75, 0.3 * 0.5, 0.7 * 0.5])
    assert relevance(c, SearchMode.DENSE, "e5-small", w).tolist() == pytest.approx(
        [1.0, 0.5, 0.0])
    assert relevance(c, SearchMode.KEYWORD, "e5-small", w).tolist() == pytest.approx(
        [0.75, 0.0, 0.5])


def test_evidence_fusion_leans_on_the_list_that_finds_strong_matches() -> None:
    w = Weights(evidence_depth=2, evidence_power=2.0, share_bounds=(0.2, 0.9))
    # Equal testimony: an even mix.
    assert evidence_share(np.array([0.5, 0.5, 0.0]), np.array([0.5, 0.5, 0.0]), w) == 0.5
    # Dense testifies 0.8 on its top two, keyword 0.4: shares as 0.64 : 0.16.
    share = evidence_share(np.array([0.9, 0.7, 0.1]), np.array([0.5, 0.3, 0.0]), w)
    assert share == pytest.approx(0.64 / (0.64 + 0.16))
    # A query whose words match nothing (another language) leaves dense nearly alone,
    # and a dense list with nothing leaves keyword, but neither drops out entirely.
    assert evidence_share(np.array([0.6, 0.5]), np.zeros(2), w) == 0.9
    assert evidence_share(np.zeros(2), np.array([0.6, 0.5]), w) == 0.2
    assert evidence_share(np.zeros(2), np.zeros(2), w) == pytest.approx(0.55)


def test_a_dense_only_hit_keeps_its_rank_when_no_keyword_can_match() -> None:
    c = candidates([("a", 0.93), ("b", 0.85)], [], {"a": WHEN, "b": WHEN})
    rels = relevance(c, SearchMode.HYBRID, "e5-small", Weights())
    assert rels.tolist() == pytest.approx([0.9 * 0.9, 0.9 * 0.5])


def test_rank_fusion_scores_first_in_both_lists_as_one() -> None:
    c = candidates([("a", 0.9), ("b", 0.8)], [("a", 3.0)], {"a": WHEN, "b": WHEN})
    w = Weights(fusion="rrf", rrf_k=60)
    assert relevance(c, SearchMode.HYBRID, "e5-small", w).tolist() == pytest.approx(
        [1.0, (1 / 62) / (2 / 61)])


def test_neighbours_in_the_same_thread_lift_each_other() -> None:
    def turn(thread: str | None, seq: int | None) -> dict[str, object]:
        return {**WHEN, "thread_id": thread, "thread_seq": seq}
    payloads = {"t0": turn("t", 0), "t1": turn("t", 1), "t5": turn("t", 5),
                "u1": turn("u", 1), "none": turn(None, None)}
    c = candidates([(i, 0.9) for i in payloads], [], payloads)
    rels = np.array([0.5, 0.2, 0.9, 0.8, 0.7])
    smoothed = smooth_by_neighbours(c, rels, Weights(neighbour=0.2, neighbour_span=2))
    # t0 and t1 lift each other; t5 is too far, u1 alone in its thread, "none" in none.
    assert smoothed.tolist() == pytest.approx([0.5 + 0.2 * 0.2, 0.2 + 0.2 * 0.5, 0.9, 0.8, 0.7])
    capped = smooth_by_neighbours(c, np.array([1.0, 0.95, 0, 0, 0]), Weights(neighbour=0.2))
    assert capped[:2].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("mode", list(SearchMode))
def test_rank_is_relevance_neighbours_calibration_and_boosts_in_order(mode: SearchMode) -> None:
    def turn(seq: int, occurred: str) -> dict[str, object]:
        return {"occurred_at": occurred, "thread_id": "t", "thread_seq": seq, "importance": 7}
    payloads = {"a": turn(1, "2024-04-28T12:00:00Z"), "b": turn(2, "2024-04-20T12:00:00Z"),
                "c": {**WHEN, "cjk_share": 1.0}}
    c = candidates([("a", 0.91), ("b", 0.84), ("c", 0.8)], [("c", 14.0), ("a", 5.0)],
                   payloads)
    w, cues = Weights(bridge=0.5), read_time_cues("what did I do last week?", AS_OF)
    ranked = rank(c, mode, "e5-small", w, 0.4, AS_OF, cues)
    rels = relevance(c, mode, "e5-small", w, 0.4)
    if mode is SearchMode.HYBRID:
        rels = smooth_by_neighbours(c, rels, w)
    rels = calibrated(rels, mode)
    parts = boost_columns(c, AS_OF, w, cues)
    # Bit for bit: the search's scores are these.
    assert ranked.rels.tolist() == rels.tolist()
    assert ranked.parts.tolist() == parts.tolist()
    assert ranked.final.tolist() == final_scores(rels, parts, w).tolist()


def test_column_boosts_and_final_scores_match_the_per_payload_ones() -> None:
    payloads: dict[str, dict[str, object]] = {
        "old": {"occurred_at": "2024-01-01T00:00:00+05:00", "importance": 9, "access_count": 2},
        "new": {"occurred_at": "2024-05-01T11:00:00Z"},
        "future": {"occurred_at": "2024-06-01T00:00:00Z", "importance": 1, "access_count": 40},
    }
    c = candidates([(i, 0.9) for i in payloads], [], payloads)
    w = Weights(half_life_days=10)
    parts = boost_columns(c, AS_OF, w)
    rels = np.array([0.9, 0.4, 0.6])
    finals = final_scores(rels, parts, w)
    for i, point_id in enumerate(c.ids):
        expected = boosts(payloads[point_id], AS_OF, w)
        assert dict(zip(BOOSTS, parts[i].tolist(), strict=True)) == pytest.approx(expected)
        assert finals[i] == pytest.approx(final_score(float(rels[i]), expected, w))


def test_equal_scores_rank_by_memory_id_whatever_the_list_order() -> None:
    """Keyword lists order equal scores as the store happened to insert them; the ranking
    breaks those ties by memory id, so a search gives the same answer on every run."""
    ids = ["c-memory", "a-memory", "b-memory"]
    rankings = []
    for order in (ids, ids[::-1], [ids[1], ids[2], ids[0]]):
        c = candidates([], [(i, 8.0) for i in order], dict.fromkeys(ids, WHEN))
        final = np.full(len(c.ids), 0.4)
        parts = np.zeros((len(c.ids), len(BOOSTS)))
        rankings.append([s.id for s in best_candidates(c, final, final, parts, 3, None)])
    assert rankings == [["a-memory", "b-memory", "c-memory"]] * 3
    # A higher score still comes first, whatever its id.
    c = candidates([], [(i, 8.0) for i in ids], dict.fromkeys(ids, WHEN))
    final = np.array([0.9, 0.4, 0.4])
    top = best_candidates(c, final, final, np.zeros((3, len(BOOSTS))), 2, None)
    assert [s.id for s in top] == ["c-memory", "a-memory"]


@pytest.mark.parametrize("mode", list(SearchMode))
def test_a_question_about_oneself_keeps_a_share_of_an_assistant_turns_relevance(
    mode: SearchMode,
) -> None:
    """`rank(..., own_words=True)`: an assistant's turn keeps `Weights.assistant` of its
    relevance before calibration, in every mode; a user's turn, or a memory of both sides,
    keeps all of it; without the cue nothing changes."""
    said = {"user": [{"role": "user"}], "reply": [{"role": "assistant"}],
            "both": [{"role": "assistant"}, {"role": "user"}]}
    c = candidates([("reply", 0.93), ("user", 0.9), ("both", 0.88)],
                   [("reply", 20.0), ("user", 14.0), ("both", 9.0)],
                   {k: {**WHEN, "sources": v} for k, v in said.items()})
    w = Weights(assistant=0.7)
    base = relevance(c, mode, "e5-small", w)
    plain = rank(c, mode, "e5-small", w, 0.0, AS_OF, None)
    own = rank(c, mode, "e5-small", w, 0.0, AS_OF, None, own_words=True)
    if mode is SearchMode.HYBRID:
        base = smooth_by_neighbours(c, base, w)  # no threads here: unchanged
    assert plain.rels.tolist() == pytest.approx(calibrated(base, mode).tolist())
    share = np.array([0.7 if i == "reply" else 1.0 for i in c.ids])
    assert own.rels.tolist() == pytest.approx(calibrated(base * share, mode).tolist())
    assert c.ids[int(np.argmax(plain.final))] == "reply"
    assert c.ids[int(np.argmax(own.final))] == "user"
    # What each text earned before its speaker was weighed, for the block's gate.
    assert plain.unweighted is None and own.unweighted is not None
    assert own.unweighted.tolist() == pytest.approx(plain.final.tolist())
    # A weight of 1 weighs both sides alike.
    same = rank(c, mode, "e5-small", Weights(assistant=1.0), 0.0, AS_OF, None, own_words=True)
    assert same.rels.tolist() == pytest.approx(plain.rels.tolist())
