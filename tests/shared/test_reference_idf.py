"""Keyword IDF from the fixed reference (shared/retrieval/reference_idf.py): common words
weigh less than rare ones in English and Chinese, unknown words weigh as the rarest, the
scale is BM25's over the reference corpus, and a query's weights come from its words."""

from __future__ import annotations

import math

from memoryd.retrieval.keywords import (
    EARLIER_TURN_WEIGHT,
    query_keyword_vector,
    surface_tokens,
    token_id,
    tokenize,
)
from memoryd.retrieval.reference_idf import (
    MIN_FREQUENCY,
    RARE_DOCS,
    RARE_IDF,
    REFERENCE_DOCS,
    idf_of_frequency,
    reference_idf,
    reference_table,
)


def test_common_words_weigh_less_than_rare_ones() -> None:
    assert reference_idf("like") < reference_idf("cat") < reference_idf("otters")
    assert reference_idf("time") < reference_idf("watercolours")
    assert reference_idf("喜欢") < reference_idf("咖啡") < reference_idf("樱花")
    assert reference_idf("时间") < reference_idf("钢琴")


def test_unknown_words_weigh_as_the_rarest_listed() -> None:
    for word in ("qxzzyv", "pepperington", "旺财旺财", "20231107"):
        assert reference_idf(word) == RARE_IDF
    assert min(reference_table().values()) >= RARE_DOCS
    assert RARE_IDF == idf_of_frequency(MIN_FREQUENCY)


def test_scale_is_bm25_idf_over_the_reference_corpus() -> None:
    # A word in no reference document: Qdrant's BM25 IDF with n = 0.
    assert math.isclose(idf_of_frequency(0.0), math.log1p((REFERENCE_DOCS + 0.5) / 0.5))
    # A word in every document weighs almost nothing, never less than 0.
    assert 0.0 <= idf_of_frequency(1.0) < 0.01
    # Monotone in frequency.
    weights = [idf_of_frequency(10 ** -e) for e in range(1, 9)]
    assert weights == sorted(weights)
    # Everyday words sit well inside the range.
    assert 2.0 < reference_idf("like") < 5.0 < reference_idf("cat") < RARE_IDF


def test_a_query_carries_each_terms_reference_idf() -> None:
    ids, weights = query_keyword_vector("Melanie painted the sunset 她喜欢咖啡") or ([], [])
    by_token = dict(zip(ids, weights, strict=True))
    assert by_token[token_id("paint")] == reference_idf("painted")
    assert by_token[token_id("咖啡")] == reference_idf("咖啡")
    assert by_token[token_id("melani")] == reference_idf("melanie")
    assert len(by_token) == len(set(tokenize("Melanie painted the sunset 她喜欢咖啡")))


def test_a_stem_takes_the_rarest_surface_word_and_earlier_turns_count_half() -> None:
    ids, weights = query_keyword_vector("painting painted") or ([], [])
    assert ids == [token_id("paint")]
    assert weights == [max(reference_idf("painting"), reference_idf("painted"))]
    excerpt = "We talked about the lake\nWhat did Pepper eat?"
    ids, weights = query_keyword_vector(excerpt, current="What did Pepper eat?") or ([], [])
    by_token = dict(zip(ids, weights, strict=True))
    assert by_token[token_id("lake")] == EARLIER_TURN_WEIGHT * reference_idf("lake")
    assert by_token[token_id("pepper")] == reference_idf("pepper")


def test_surface_tokens_are_tokenize_with_their_words() -> None:
    text = "Caroline’s PAINTINGS of 西湖 and 2023's trips, I'm told"
    assert [t for _, t in surface_tokens(text)] == tokenize(text)
    assert ("paintings", "paint") in surface_tokens(text)
    assert ("西湖", "西湖") in surface_tokens(text)


def test_the_users_own_memories_move_the_reference_and_nothing_else() -> None:
    from memoryd.retrieval.keywords import USER_COUNT_CAP
    from memoryd.retrieval.reference_idf import reference_docs, user_idf

    name = reference_docs("caroline")
    # No memories of the user's own: the reference alone.
    assert user_idf(name, 0, 0) == reference_idf("caroline")
    # A name in 300 of the user's 600 memories (LoCoMo's "Caroline: …" turns) weighs far
    # less than a word in one of them, and less than an everyday word.
    assert user_idf(name, 600, 300) < reference_idf("like") < user_idf(name, 600, 1)
    # A user of 20 memories keeps the language's view of common and rare words.
    assert user_idf(reference_docs("like"), 20, 1) < user_idf(reference_docs("otters"), 20, 1)
    # The query vector takes the user's counts, capped, through the callable it is given.
    asked: list[list[int]] = []

    def own(ids: list[int]) -> tuple[int, list[int]]:
        asked.append(ids)
        return 600, [10_000 if i == token_id("carolin") else 0 for i in ids]

    ids, weights = query_keyword_vector("What did Caroline paint?", None, own) or ([], [])
    assert asked == [ids]
    by_token = dict(zip(ids, weights, strict=True))
    assert by_token[token_id("carolin")] == user_idf(name, 600, USER_COUNT_CAP)
    assert by_token[token_id("paint")] == user_idf(reference_docs("paint"), 600, 0)
