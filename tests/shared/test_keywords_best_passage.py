"""A long memory's keyword score by its single best passage (`best_passage_score`): the
store's score sums each term's best weight over all passages, an upper bound of it."""

from __future__ import annotations

import pytest

from memoryd.embeddings.parts import split_parts
from memoryd.retrieval.keywords import (
    PASSAGES_FIELD,
    best_passage_score,
    keyword_fields,
    keyword_vector,
    passage_weights,
    query_keyword_vector,
    stored_passage_weights,
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


@pytest.mark.parametrize("text", [
    long_text("Melanie painted a sunset.", "The lake was frozen in January."),
    "我们下午一直在聊天气和路上的交通，晚饭做什么也商量了很久，别的没什么事。" * 6
    + "我最近在学吉他，每天练半个小时。" + "周末我们去了海边，风很大，沙滩上人不多。" * 6,
])
def test_a_long_texts_stored_passages_give_the_weights_its_text_gives(text: str) -> None:
    sparse, fields = keyword_fields(text)
    assert sparse == keyword_vector(text)
    stored = stored_passage_weights(fields[PASSAGES_FIELD], text)
    assert stored is not None and len(stored) == len(split_parts(text)) > 1
    assert stored == passage_weights(text, scope="t")  # equal, not close
    q = query("Melanie painted the lake 吉他 练习")
    assert best_passage_score(q, text, scope="t", stored=fields[PASSAGES_FIELD]) \
        == best_passage_score(q, text, scope="t")


def test_a_short_text_stores_no_passages_and_a_malformed_field_is_not_read() -> None:
    short = "Melanie painted a sunset at the lake."
    assert keyword_fields(short) == (keyword_vector(short), {})
    text = long_text("Melanie painted a sunset.", "The lake was frozen in January.")
    field = keyword_fields(text)[1][PASSAGES_FIELD]
    for broken in (None, [], {"of": field["of"]}, {"of": field["of"], "passages": [{"ids": [1]}]},
                   {"of": field["of"], "passages": [{"ids": [1, 2], "counts": [1], "tokens": 3}]},
                   {**field, "of": "another text"}):
        assert stored_passage_weights(broken, text) is None
