"""The bundled local models, run for real."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memoryd.embeddings.base import BatchingEmbedder
from memoryd.embeddings.local import E5Embedder, UseEmbedder

# (query, matching passage, unrelated passage)
RETRIEVAL_CASES = {
    "english": (
        "What is my dog's name?",
        "My dog is called Biscuit.",
        "The quarterly report is due on Friday.",
    ),
    "chinese": ("我的宠物叫什么名字", "我养了一只叫豆豆的猫", "明天上海会下大雨，记得带伞"),
    "mixed": (
        "我用什么编程语言写 backend?",
        "我的 backend 是用 Python 和 FastAPI 写的",
        "周末我们去 Costco 买了很多水果",
    ),
    "mixed-cross": (
        "where does the user live",
        "用户住在 Berlin, 靠近 Alexanderplatz",
        "I prefer tea over coffee",
    ),
}

TEXTS = [
    "I moved to Lisbon last spring.",
    "我养了一只叫豆豆的猫",
    "Meeting notes: 下周一 10am sync with the design team",
    "",
    "emoji ok 🐱🚀",
]


@pytest.fixture(scope="module", params=["e5", "use"])
def embedder(request: pytest.FixtureRequest) -> BatchingEmbedder:
    # Small batches so the batching path is exercised by every multi-text call.
    return E5Embedder(batch_size=2) if request.param == "e5" else UseEmbedder(batch_size=2)


def test_names_and_dims() -> None:
    assert (E5Embedder().name, E5Embedder().dim) == ("e5-small", 384)
    assert (UseEmbedder().name, UseEmbedder().dim) == ("use", 512)


def test_documents_are_normalised_float32(embedder: BatchingEmbedder) -> None:
    vectors = embedder.embed_documents(TEXTS)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_query_is_normalised_float32(embedder: BatchingEmbedder) -> None:
    vector = embedder.embed_query("what did I do last spring?")
    assert vector.dtype == np.float32 and vector.shape == (embedder.dim,)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("case", sorted(RETRIEVAL_CASES))
def test_query_prefers_matching_passage(embedder: BatchingEmbedder, case: str) -> None:
    query, match, unrelated = RETRIEVAL_CASES[case]
    scores = embedder.embed_documents([match, unrelated]) @ embedder.embed_query(query)
    assert scores[0] > scores[1], scores


def test_empty_batch(embedder: BatchingEmbedder) -> None:
    empty = embedder.embed_documents([])
    assert empty.shape == (0, embedder.dim) and empty.dtype == np.float32


def test_batching_matches_one_by_one(embedder: BatchingEmbedder) -> None:
    together = embedder.embed_documents(TEXTS)
    alone = np.stack([embedder.embed_documents([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_bare_string_is_rejected(embedder: BatchingEmbedder) -> None:
    with pytest.raises(TypeError, match="single string"):
        embedder.embed_documents("not a list")


def test_e5_is_asymmetric() -> None:
    e5 = E5Embedder()
    text = "I live in Berlin"
    # e5 prefixes "query: " vs "passage: ", so the two forms must differ.
    assert not np.allclose(e5.embed_query(text), e5.embed_documents([text])[0], atol=1e-3)


def test_use_is_symmetric() -> None:
    use = UseEmbedder()
    text = "I live in Berlin"
    np.testing.assert_allclose(use.embed_query(text), use.embed_documents([text])[0], atol=1e-5)


@pytest.mark.parametrize("cls", [E5Embedder, UseEmbedder])
def test_concurrent_first_use(cls: type[BatchingEmbedder]) -> None:
    embedder = cls(batch_size=4)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = embedder.embed_query("shared lazy model")
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for vector in results.values():
        np.testing.assert_allclose(vector, results[0], atol=1e-5)
