"""Ollama and OpenAI embedders against a real local HTTP server."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fake_embedding_server import (
    DIM,
    FakeEmbeddingServer,
    Reply,
    fake_vector,
    json_reply,
    success,
)

from memoryd.embeddings.remote import HttpEmbedder, OllamaEmbedder, OpenAIEmbedder
from memoryd.platform.errors import ConfigurationError, EmbedderError, EmbedderUnavailable
from memoryd.platform.settings import Settings

TEXTS = ["I live in Berlin", "我养了一只叫豆豆的猫", "mixed 中文 and English", "four", "five"]


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    fake = FakeEmbeddingServer().start()
    yield fake
    fake.stop()


def make_settings(server: FakeEmbeddingServer | None = None, **overrides: Any) -> Settings:
    base = server.base_url if server else "http://127.0.0.1:9"
    values: dict[str, Any] = {
        "ollama_base_url": base,
        "openai_base_url": f"{base}/v1",
        "openai_api_key": None,
        "embed_timeout_s": 5.0,
        "embed_batch_size": 32,
    }
    values.update(overrides)
    return Settings(**values)


def ollama(settings: Settings) -> HttpEmbedder:
    return OllamaEmbedder("nomic-embed-text", settings)


def openai(settings: Settings) -> HttpEmbedder:
    return OpenAIEmbedder("text-embedding-3-small", settings)


BOTH = pytest.mark.parametrize("build", [ollama, openai], ids=["ollama", "openai"])


def expected(texts: list[str]) -> np.ndarray:
    raw = np.array([fake_vector(t) for t in texts], dtype=np.float64)
    return np.asarray(raw / np.linalg.norm(raw, axis=1, keepdims=True), dtype=np.float32)


def test_ollama_success_sends_the_ollama_protocol(server: FakeEmbeddingServer) -> None:
    embedder = ollama(make_settings(server))
    vectors = embedder.embed_documents(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), DIM)
    np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)
    [request] = server.requests
    assert request.path == "/api/embed"
    assert request.body == {"model": "nomic-embed-text", "input": TEXTS}
    assert "Authorization" not in request.headers
    assert embedder.name == "ollama:nomic-embed-text"
    assert embedder.dim == DIM and len(server.requests) == 1  # learned, not probed
    embedder.close()


def test_openai_success_orders_by_index_and_sends_the_key(server: FakeEmbeddingServer) -> None:
    embedder = openai(make_settings(server, openai_api_key="sk-test-123"))
    vectors = embedder.embed_documents(TEXTS)
    np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)
    [request] = server.requests
    assert request.path == "/v1/embeddings"
    assert request.body == {"model": "text-embedding-3-small", "input": TEXTS}
    assert request.headers["Authorization"] == "Bearer sk-test-123"
    assert embedder.name == "openai:text-embedding-3-small"


def test_openai_without_key_sends_no_authorization(server: FakeEmbeddingServer) -> None:
    openai(make_settings(server)).embed_documents(["x"])
    assert "Authorization" not in server.requests[0].headers


@BOTH
def test_query_is_raw_text_and_normalised(server: FakeEmbeddingServer, build: Any) -> None:
    vector = build(make_settings(server)).embed_query("what is my cat called")
    assert vector.shape == (DIM,)
    np.testing.assert_allclose(vector, expected(["what is my cat called"])[0], atol=1e-6)
    # No e5-style "query: " prefix for remote models.
    assert server.requests[0].body["input"] == ["what is my cat called"]


@BOTH
def test_batches_by_batch_size(server: FakeEmbeddingServer, build: Any) -> None:
    embedder = build(make_settings(server, embed_batch_size=2))
    vectors = embedder.embed_documents(TEXTS)
    assert [r.body["input"] for r in server.requests] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    np.testing.assert_allclose(vectors, expected(TEXTS), atol=1e-6)


@BOTH
def test_dim_is_probed_once_lazily(server: FakeEmbeddingServer, build: Any) -> None:
    embedder = build(make_settings(server))
    assert server.requests == []
    assert embedder.dim == DIM and embedder.dim == DIM
    assert [r.body["input"] for r in server.requests] == [["dimension probe"]]
    assert embedder.embed_documents([]).shape == (0, DIM)
    assert len(server.requests) == 1


@BOTH
def test_429_is_transient(server: FakeEmbeddingServer, build: Any) -> None:
    server.reply_with(lambda p, b: json_reply({"error": {"message": "slow down"}}, 429))
    embedder = build(make_settings(server))
    with pytest.raises(EmbedderUnavailable) as info:
        embedder.embed_documents(["x"])
    assert "429" in info.value.message and embedder.url in info.value.message


@BOTH
def test_500_is_transient(server: FakeEmbeddingServer, build: Any) -> None:
    server.reply_with(lambda p, b: Reply(500, b"internal error", "text/plain"))
    with pytest.raises(EmbedderUnavailable, match="500"):
        build(make_settings(server)).embed_query("x")


@BOTH
def test_400_is_permanent_with_provider_message(server: FakeEmbeddingServer, build: Any) -> None:
    server.reply_with(lambda p, b: json_reply({"error": {"message": "bad model"}}, 400))
    with pytest.raises(EmbedderError, match="bad model") as info:
        build(make_settings(server)).embed_documents(["x"])
    assert not isinstance(info.value, EmbedderUnavailable)
    assert "400" in info.value.message


def test_ollama_string_error_is_reported(server: FakeEmbeddingServer) -> None:
    message = 'model "nomic-embed-text" not found, try pulling it first'
    server.reply_with(lambda p, b: json_reply({"error": message}, 404))
    with pytest.raises(EmbedderError, match="try pulling it first"):
        ollama(make_settings(server)).embed_documents(["x"])


@BOTH
def test_timeout_is_transient(server: FakeEmbeddingServer, build: Any) -> None:
    server.reply_with(lambda p, b: Reply(hang=True))
    embedder = build(make_settings(server, embed_timeout_s=0.5))
    with pytest.raises(EmbedderUnavailable, match="0.5s"):
        embedder.embed_documents(["x"])


@BOTH
def test_connection_refused_is_transient(build: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The port is closed now: nothing listens there.
    settings = make_settings(
        ollama_base_url=f"http://127.0.0.1:{port}",
        openai_base_url=f"http://127.0.0.1:{port}/v1",
    )
    with pytest.raises(EmbedderUnavailable, match=f"127.0.0.1:{port}"):
        build(settings).embed_documents(["x"])


@BOTH
def test_malformed_json_is_permanent(server: FakeEmbeddingServer, build: Any) -> None:
    server.reply_with(lambda p, b: Reply(200, b'{"embeddings": [[0.1, 0.2'))
    with pytest.raises(EmbedderError, match="malformed JSON"):
        build(make_settings(server)).embed_documents(["x"])


@BOTH
def test_count_mismatch_is_permanent(server: FakeEmbeddingServer, build: Any) -> None:
    def one_short(path: str, body: Any) -> Reply:
        return success(path, {**body, "input": body["input"][:-1]})

    server.reply_with(one_short)
    with pytest.raises(EmbedderError, match="2 embeddings for 3 inputs"):
        build(make_settings(server)).embed_documents(["a", "b", "c"])


@pytest.mark.parametrize(
    ("payload", "count"),
    [
        ({"embeddings": "nope"}, 1),
        ({"embeddings": [["a", "b"]]}, 1),
        ({"embeddings": [[True, False]]}, 1),
        ({"embeddings": [[1.0, 2.0], [1.0]]}, 2),
        ({"embeddings": [[]]}, 1),
        ({"embeddings": [[1.0, float("nan")]]}, 1),
        ({"something": "else"}, 1),
        ([1, 2, 3], 1),
    ],
    ids=["not-list", "strings", "bools", "ragged", "empty", "nan", "missing", "not-object"],
)
def test_ollama_bad_bodies_are_permanent(
    server: FakeEmbeddingServer, payload: Any, count: int
) -> None:
    server.reply_with(lambda p, b: json_reply(payload))
    with pytest.raises(EmbedderError) as info:
        ollama(make_settings(server)).embed_documents(["x"] * count)
    assert not isinstance(info.value, EmbedderUnavailable)


@pytest.mark.parametrize(
    "data",
    [
        [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}],
        [{"index": 0, "embedding": [1.0]}, {"index": 5, "embedding": [2.0]}],
        [{"embedding": [1.0]}, {"index": 1, "embedding": [2.0]}],
        [{"index": 0, "embedding": [1.0]}, "junk"],
    ],
    ids=["repeated", "out-of-range", "missing-index", "not-object"],
)
def test_openai_bad_indices_are_permanent(server: FakeEmbeddingServer, data: Any) -> None:
    server.reply_with(lambda p, b: json_reply({"object": "list", "data": data}))
    with pytest.raises(EmbedderError, match="index"):
        openai(make_settings(server)).embed_documents(["a", "b"])


def test_dimension_change_between_responses_is_permanent(server: FakeEmbeddingServer) -> None:
    embedder = ollama(make_settings(server))
    embedder.embed_documents(["a"])
    server.reply_with(lambda p, b: success(p, b, dim=DIM * 2))
    with pytest.raises(EmbedderError, match=f"{DIM * 2}-dim"):
        embedder.embed_documents(["b"])


def test_zero_vector_stays_zero(server: FakeEmbeddingServer) -> None:
    server.reply_with(lambda p, b: json_reply({"embeddings": [[0.0, 0.0, 0.0]]}))
    vector = ollama(make_settings(server)).embed_query("x")
    assert vector.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("url", ["localhost:11434", "ftp://example.com", "http://"])
def test_unusable_base_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError, match="ollama_base_url"):
        ollama(make_settings(ollama_base_url=url))


def test_empty_model_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        OpenAIEmbedder(" ", make_settings())
