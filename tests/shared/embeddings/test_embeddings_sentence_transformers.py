"""SentenceTransformersEmbedder's contract with the library, using a stand-in package.

sentence-transformers is an optional extra and is not installed in CI; a minimal module with
the same API, put on sys.path, exercises the loading and encode paths for real.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memoryd.embeddings.local import SentenceTransformersEmbedder
from memoryd.platform.errors import ConfigurationError

STAND_IN = textwrap.dedent(
    """
    import numpy as np

    LOADS = []

    class SentenceTransformer:
        def __init__(self, path, device=None):
            if path.endswith("broken"):
                raise OSError("no config.json in " + path)
            LOADS.append((path, device))

        def get_sentence_embedding_dimension(self):
            return 3

        def _encode(self, texts, shift, batch_size, convert_to_numpy, show_progress_bar):
            assert convert_to_numpy and not show_progress_bar and batch_size == 2
            single = isinstance(texts, str)
            rows = [[len(t) + shift, 1.0, 0.0] for t in ([texts] if single else texts)]
            out = np.array(rows, dtype=np.float32)
            return out[0] if single else out

        def encode_query(self, texts, **kw):
            return self._encode(texts, 10.0, **kw)

        def encode_document(self, texts, **kw):
            return self._encode(texts, 0.0, **kw)
    """
)


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "site"
    package.mkdir()
    (package / "sentence_transformers.py").write_text(STAND_IN)
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.delitem(sys.modules, "sentence_transformers", raising=False)
    model_dir = tmp_path / "all-MiniLM-L6-v2"
    model_dir.mkdir()
    return model_dir


def test_loads_lazily_on_cpu_and_uses_query_and_document_forms(stand_in: Path) -> None:
    embedder = SentenceTransformersEmbedder(str(stand_in), batch_size=2)
    assert embedder.name == f"sentence-transformers:{stand_in}"
    import sentence_transformers

    assert sentence_transformers.LOADS == []
    assert embedder.dim == 3
    assert sentence_transformers.LOADS == [(str(stand_in), "cpu")]

    docs = embedder.embed_documents(["ab", "abcd", "x"])
    assert docs.shape == (3, 3) and docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-6)
    expected_first = np.array([2.0, 1.0, 0.0]) / np.sqrt(5.0)
    np.testing.assert_allclose(docs[0], expected_first, atol=1e-6)

    query = embedder.embed_query("ab")
    np.testing.assert_allclose(query, np.array([12.0, 1.0, 0.0]) / np.sqrt(145.0), atol=1e-6)
    assert len(sentence_transformers.LOADS) == 1  # loaded once


def test_unloadable_model_names_the_path(stand_in: Path) -> None:
    broken = stand_in.parent / "broken"
    broken.mkdir()
    embedder = SentenceTransformersEmbedder(str(broken), batch_size=2)
    with pytest.raises(ConfigurationError, match="broken"):
        embedder.embed_query("x")
