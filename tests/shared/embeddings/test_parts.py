"""Long memories in passages: how texts are split, and what one embedding call returns."""

from __future__ import annotations

import time

import numpy as np
import pytest

from memoryd.embeddings.local import E5Embedder
from memoryd.embeddings.parts import (
    LONG_TOKENS,
    PART_TOKENS,
    embed_memories,
    estimated_tokens,
    part_spans,
    split_parts,
)
from memoryd.retrieval.keywords import keyword_vector

TURN = ("Caroline: I went to a support group yesterday and it was so powerful.\n"
        "Melanie: That's great! What happened there?\n")


def test_a_short_text_stays_whole() -> None:
    text = "User's daughter is called Mia. 她今年五岁。"
    assert estimated_tokens(text) <= LONG_TOKENS
    assert split_parts(text) == [text]


@pytest.mark.parametrize("text", [
    TURN * 20,
    "我今天去了公园，看到很多人在跳舞。" * 60,
    ("I moved to Lisbon last spring and 我很喜欢那里的海鲜. " * 40),
    "word " * 2000,  # no sentence end at all: cut between words
    "字" * 1500,  # nor any word boundary: cut between characters
])
def test_a_long_text_splits_into_bounded_passages_in_order(text: str) -> None:
    parts = split_parts(text)
    assert len(parts) > 1
    assert all(estimated_tokens(p) <= PART_TOKENS * 1.3 for p in parts)
    # Every passage is a slice of the text, in order, and together they hold all of it.
    at = 0
    for part in parts:
        found = text.find(part, at)
        assert found >= at
        at = found + len(part)
    assert "".join(parts).replace(" ", "").replace("\n", "") == \
        text.replace(" ", "").replace("\n", "")


@pytest.mark.parametrize("text", [
    "", "   ", "short", TURN * 20, "  " + TURN * 20 + "\n\n", "。" * 400 + "字" * 300,
    " \n".join(["word " * 30] * 12), "a" * 5000,
])
def test_the_spans_are_where_the_passages_lie(text: str) -> None:
    spans = part_spans(text)
    assert [text[b:e] for b, e in spans] == split_parts(text)
    assert all(0 <= b < e <= len(text) for b, e in spans) or spans == ((0, len(text)),)
    assert all(e1 <= b2 for (_, e1), (b2, _) in zip(spans, spans[1:], strict=False))


def test_hostile_text_splits_in_bounded_time() -> None:
    started = time.perf_counter()
    for text in ("a" * 200_000, ". " * 100_000, "\n" * 100_000, "。" * 100_000):
        split_parts(text)
    assert time.perf_counter() - started < 5


def test_embed_memories_gives_a_long_text_its_parts_and_their_mean() -> None:
    e5 = E5Embedder()
    long = TURN * 6 + "Caroline: My grandmother gave me a silver necklace from Sweden.\n" \
        + TURN * 6
    short = "I keep bees on the roof"
    got = embed_memories(e5, [short, long])
    assert got[0].parts is None
    assert np.allclose(got[0].dense, e5.embed_documents([short])[0], atol=1e-5)
    assert got[1].parts is not None and got[1].parts.shape == (len(split_parts(long)), e5.dim)
    assert np.linalg.norm(got[1].dense) == pytest.approx(1.0, abs=1e-5)
    # The passage about the necklace is nearer a question about it than the whole is.
    query = e5.embed_query("Who gave Caroline a necklace?")
    assert float(np.max(got[1].parts @ query)) > float(got[1].dense @ query)
    whole = embed_memories(e5, [long], in_parts=False)[0]
    assert whole.parts is None


def test_a_reading_is_one_more_part_and_leaves_the_memorys_own_vector() -> None:
    e5 = E5Embedder()
    fact = "User works as a data analyst at a logistics company"
    reading = "Work, job (工作): " + fact
    long = TURN * 12
    [plain, read, long_read] = embed_memories(e5, [fact, fact, long],
                                              readings=[None, reading, reading])
    assert plain.parts is None
    # Deduplication and conflicts read `dense`: what the fact says, reading or not.
    assert np.array_equal(read.dense, plain.dense)
    assert read.parts is not None and read.parts.shape == (2, e5.dim)
    assert np.array_equal(read.parts[0], plain.dense)
    assert np.allclose(read.parts[1], e5.embed_documents([reading])[0], atol=1e-5)
    # The dense list's MaxSim over parts meets a question by its topic through it.
    query = e5.embed_query("我是做什么工作的?")
    assert float(np.max(read.parts @ query)) > float(plain.dense @ query) + 0.02
    # A long memory keeps its passages' mean as its vector; the reading comes last.
    passages = len(split_parts(long))
    assert long_read.parts is not None and long_read.parts.shape == (passages + 1, e5.dim)
    assert np.allclose(long_read.dense, embed_memories(e5, [long])[0].dense, atol=1e-6)
    # Without parts there is nowhere to keep a reading.
    assert embed_memories(e5, [fact], in_parts=False, readings=[reading])[0].parts is None


def test_keywords_of_a_long_memory_weigh_as_a_passage() -> None:
    passage = "Caroline: My grandmother gave me a silver necklace from Sweden."
    long = TURN * 10 + passage
    short_vector, long_vector = keyword_vector(passage), keyword_vector(long)
    assert short_vector is not None and long_vector is not None
    weight = dict(zip(*long_vector, strict=True))
    # "necklace" appears once in each: in the long text its weight is that of a word in a
    # passage, not diluted by every other word of the text.
    necklace = dict(zip(*short_vector, strict=True))
    shared = set(weight) & set(necklace)
    assert shared
    assert min(weight[t] / necklace[t] for t in shared) > 0.4


def test_a_word_repeated_in_every_passage_weighs_as_in_one() -> None:
    """A long memory is scored by its passages: a word in each of ten passages weighs what
    it weighs in one of them, not its count over the whole text at one passage's length
    (which let long turns outscore the short turn that answers, decision 0026)."""
    long = TURN * 20
    parts = split_parts(long)
    assert len(parts) > 1
    vector, one = keyword_vector(long), keyword_vector(parts[0])
    assert vector is not None and one is not None
    weight, in_one = dict(zip(*vector, strict=True)), dict(zip(*one, strict=True))
    assert set(in_one) <= set(weight)
    # Each term at its best passage's weight: never above what any passage gives it.
    best = {}
    for part in parts:
        found = keyword_vector(part)
        assert found is not None
        for i, w in zip(*found, strict=True):
            best[i] = max(best.get(i, 0.0), w)
    assert weight == best
    # A short text is its own single passage: its weights are plain BM25 of the text.
    assert keyword_vector(TURN) == keyword_vector(split_parts(TURN)[0])
