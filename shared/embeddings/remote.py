"""Embedding servers reached over HTTP: Ollama (`/api/embed`) and OpenAI-compatible APIs."""

from __future__ import annotations

import threading
from abc import abstractmethod
from typing import Any

import httpx
import numpy as np

from memoryd.embeddings.base import BatchingEmbedder, FloatArray
from memoryd.platform.errors import ConfigurationError, EmbedderError, EmbedderUnavailable
from memoryd.platform.settings import Settings

PROBE_TEXT = "dimension probe"


class HttpEmbedder(BatchingEmbedder):
    """One HTTP client per instance; `dim` is learned from the first response."""

    def __init__(
        self,
        *,
        name: str,
        model: str,
        url: str,
        settings: Settings,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(settings.embed_batch_size)
        if not model.strip():
            raise ConfigurationError(f"embedder {name!r} names no model", field="embedder")
        self.name = name
        self.model = model
        self.url = url
        self._timeout_s = settings.embed_timeout_s
        self._client = httpx.Client(timeout=settings.embed_timeout_s, headers=headers)
        self._dim: int | None = None
        self._probe_lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._dim is None:
            with self._probe_lock:
                if self._dim is None:
                    self._encode_documents([PROBE_TEXT])
        if self._dim is None:  # pragma: no cover - _encode_documents sets it or raises
            raise EmbedderError(f"{self.name}: dimension probe returned nothing")
        return self._dim

    def close(self) -> None:
        self._client.close()

    def _encode_documents(self, texts: list[str]) -> FloatArray:
        body = self._post({"model": self.model, "input": texts})
        return self._matrix(self._rows(body, len(texts)), len(texts))

    def _encode_query(self, text: str) -> FloatArray:
        # Remote models get the raw text: prefixes like e5's "query: " are model-specific and
        # the server side owns that choice.
        return self._encode_documents([text]).reshape(-1)

    @abstractmethod
    def _rows(self, body: Any, count: int) -> list[Any]:
        """The embeddings from a decoded response body, in input order."""

    def _post(self, payload: dict[str, Any]) -> Any:
        try:
            response = self._client.post(self.url, json=payload)
        except httpx.TimeoutException as exc:
            raise EmbedderUnavailable(
                f"{self.name}: no answer from {self.url} within {self._timeout_s}s"
            ) from exc
        except httpx.UnsupportedProtocol as exc:
            raise ConfigurationError(f"{self.name}: unusable URL {self.url}: {exc}") from exc
        except httpx.DecodingError as exc:
            raise EmbedderError(f"{self.name}: undecodable response from {self.url}") from exc
        except httpx.RequestError as exc:
            raise EmbedderUnavailable(
                f"{self.name}: cannot reach {self.url}: {type(exc).__name__}: {exc}"
            ) from exc
        status = response.status_code
        # 408 is the server's own timeout: as transient as one measured on our side.
        if status in (408, 429) or status >= 500:
            raise EmbedderUnavailable(
                f"{self.name}: {self.url} answered HTTP {status}: {_provider_message(response)}"
            )
        if status >= 300:
            raise EmbedderError(
                f"{self.name}: {self.url} rejected the request (HTTP {status}): "
                f"{_provider_message(response)}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise EmbedderError(f"{self.name}: {self.url} returned malformed JSON") from exc

    def _matrix(self, rows: list[Any], count: int) -> FloatArray:
        try:
            array = np.array(rows)
        except (ValueError, TypeError) as exc:  # ragged or nested garbage
            raise self._malformed(f"embeddings are not a numeric matrix ({exc})") from exc
        # kind "f"/"i" rules out strings, bools and objects that numpy would happily cast.
        if array.ndim != 2 or array.shape[0] != count or array.dtype.kind not in "fi":
            raise self._malformed(f"expected {count} numeric vectors, got shape {array.shape}")
        width = int(array.shape[1])
        if width == 0:
            raise self._malformed("embeddings are empty")
        if self._dim is None:
            self._dim = width
        elif width != self._dim:
            raise EmbedderError(
                f"{self.name}: {self.url} returned {width}-dim vectors, earlier {self._dim}"
            )
        return array.astype(np.float32)

    def _malformed(self, detail: str) -> EmbedderError:
        return EmbedderError(f"{self.name}: malformed response from {self.url}: {detail}")


class OllamaEmbedder(HttpEmbedder):
    """Spec `ollama:<model>`; `POST /api/embed` -> `{"embeddings": [[...], ...]}`."""

    def __init__(self, model: str, settings: Settings) -> None:
        super().__init__(
            name=f"ollama:{model}",
            model=model,
            url=_endpoint(settings.ollama_base_url, "/api/embed", "ollama_base_url"),
            settings=settings,
        )

    def _rows(self, body: Any, count: int) -> list[Any]:
        rows = body.get("embeddings") if isinstance(body, dict) else None
        if not isinstance(rows, list):
            raise self._malformed("no 'embeddings' list")
        if len(rows) != count:
            raise self._malformed(f"{len(rows)} embeddings for {count} inputs")
        return rows


class OpenAIEmbedder(HttpEmbedder):
    """Spec `openai:<model>`; `POST /embeddings` -> `{"data": [{"index", "embedding"}]}`."""

    def __init__(self, model: str, settings: Settings) -> None:
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
        # No key is legitimate: many OpenAI-compatible servers on a LAN do not check one.
        headers = {"Authorization": f"Bearer {key}"} if key else None
        super().__init__(
            name=f"openai:{model}",
            model=model,
            url=_endpoint(settings.openai_base_url, "/embeddings", "openai_base_url"),
            settings=settings,
            headers=headers,
        )

    def _rows(self, body: Any, count: int) -> list[Any]:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._malformed("no 'data' list")
        if len(data) != count:
            raise self._malformed(f"{len(data)} embeddings for {count} inputs")
        # The API documents no ordering guarantee for `data`; `index` is authoritative.
        by_index: dict[int, Any] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            if (
                not isinstance(index, int)
                or isinstance(index, bool)
                or not 0 <= index < count
                or index in by_index
            ):
                raise self._malformed(f"bad or repeated index {index!r}")
            by_index[index] = item.get("embedding")
        return [by_index[i] for i in range(count)]


def _endpoint(base_url: str, path: str, setting: str) -> str:
    try:
        url = httpx.URL(base_url.rstrip("/") + path)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(
            f"{setting} is not a valid URL: {base_url!r}", field=setting
        ) from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(
            f"{setting} must be an http(s) URL, got {base_url!r}", field=setting
        )
    return str(url)


def _provider_message(response: httpx.Response) -> str:
    """The provider's own explanation: OpenAI nests it in error.message, Ollama uses error."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
    text = response.text.strip()
    return text[:300] if text else response.reason_phrase
