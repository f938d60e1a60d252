"""A long memory's keyword score by its single best passage (`best_passage_score`): the
store's score sums each term's best weight over all passages, an upper bound of it."""

from __future__ import annotations

import pytest

from memoryd.embeddings.parts import split_parts
from memoryd.retrieval.keywords import (
    best_passage_score,
    keyword_vector,
    passage_weights,
    query_keyword_vector,
)

FILLER = ("The weather was mild and the afternoon went by slowly while we talked about "
          "nothing in particular for a long while. ")


def long_text(*sentences: str) -> str:
    """Each sentence in a passage of its own, among filler."""
    return "".join(FILLER * 3 + s + " " for s in sentences) + FILLER * 3


def stored_score(query: dict[int, float], text: str) -> float:
    vector = keyword_vector(text)
    assert vector is not None
    weights = dict(zip(*vector, strict=True))
    return sum(w * weights.get(i, 0.0) for i, w in query.items())


def query(text: str) -> dict[int, float]:
    vector = query_keyword_vector(text)
    assert vector is not None
    return dict(zip(*vector, strict=True))


def test_a_short_text_keeps_its_stored_score() -> None:
    short = "Melanie painted a sunset at the lake."
    assert len(split_parts(short)) == 1
    assert best_passage_score(query("sunset lake"), short, scope="t") is None
    assert passage_weights("Melanie painted a sunset at the lake.", scope="t") is None


def test_a_long_text_scores_its_best_passage_not_its_scattered_matches() -> None:
    text = long_text("Melanie painted a sunset.", "The lake was frozen in January.")
    q = query("Melanie painted the lake")
    passages = passage_weights(text, scope="t")
    assert passages is not None and len(passages) > 2
    sums = [sum(w * p.get(i, 0.0) for i, w in q.items()) for p in passages]
    best = best_passage_score(q, text, scope="t")
    assert best == max(sums) > 0
    # The store's score takes "lake" from one passage and "painted" from another.
    assert stored_score(q, text) > best
    # Both in one passage: that passage holds every match, and is the score.
    together = long_text("Melanie painted the frozen lake in January.")
    assert best_passage_score(q, together, scope="t") == pytest.approx(stored_score(q, together))
