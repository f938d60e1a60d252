"""A list the store cut at its depth holds no memory because of the store's internal order
(shared/memories/reads.py `without_cut_ties`): the memories tied at the cut leave, ties
inside the list go in id order, and what the store returned in any order of ties gives
the same candidates."""

from __future__ import annotations

import itertools

import numpy as np

from memoryd.memories.reads import without_cut_ties
from memoryd.store.scoring_table import RankedLists, ScoringTable, ranked_lists, union_ids


def lists_of(*lists: list[tuple[str, float]]) -> RankedLists:
    table = ScoringTable()
    every = {i for hits in lists for i, _ in hits}
    table.add({i: {"occurred_at": "2024-04-01T12:00:00Z", "importance": 1 + n % 9}
               for n, i in enumerate(sorted(every))})
    ranked = [([i for i, _ in hits], np.array([s for _, s in hits], dtype=np.float64))
              for hits in lists]
    ids = union_ids(ranked)
    return ranked_lists(ranked, ids, table.rows_of(ids), table)


def test_a_full_list_loses_the_tie_at_its_cut_and_the_candidates_only_it_held() -> None:
    dense = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    keyword = [("k1", 9.0), ("b", 5.0), ("k2", 3.0), ("k3", 3.0)]
    out = without_cut_ties(lists_of(dense, keyword), depth=4)
    assert out.lists[0][0] == ["a", "b", "c"]  # not full: kept whole
    assert out.lists[1][0] == ["k1", "b"] and out.lists[1][1].tolist() == [9.0, 5.0]
    assert out.ids == ["a", "b", "c", "k1"]
    before = lists_of(dense, keyword)
    # Each kept candidate keeps its own scoring row.
    for i, point_id in enumerate(out.ids):
        np.testing.assert_array_equal(out.fields[i], before.fields[before.ids.index(point_id)])


def test_any_order_of_the_stores_ties_gives_the_same_candidates() -> None:
    head = [("top", 9.0), ("x", 4.0), ("y", 4.0)]
    tail = [("p", 2.0), ("q", 2.0), ("r", 2.0)]
    seen = set()
    for order in itertools.permutations(range(2)):
        for cut in itertools.permutations(tail, 2):  # whichever two of the tie came back
            hits = [head[0], *(head[1 + i] for i in order), *cut]
            out = without_cut_ties(lists_of(hits), depth=5)
            seen.add((tuple(out.lists[0][0]), tuple(out.lists[0][1].tolist()),
                      tuple(out.ids)))
    assert seen == {(("top", "x", "y"), (9.0, 4.0, 4.0), ("top", "x", "y"))}


def test_a_list_that_is_one_tie_is_kept_whole() -> None:
    hits = [("b", 1.0), ("a", 1.0), ("c", 1.0)]
    out = without_cut_ties(lists_of(hits), depth=3)
    assert out.lists[0][0] == ["a", "b", "c"]
