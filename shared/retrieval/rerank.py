"""Optional second-stage rerank of search candidates by a cross-encoder served over HTTP.

No reranking model ships with memoryd, so the step is off unless `MEMORYD_RERANK_URL`
points at a server that speaks the Cohere/Jina rerank protocol, `POST {url}/rerank`
`{model, query, documents, top_n}` → `{"results": [{"index", "relevance_score"}]}`:
vLLM, llama.cpp (`--reranking`), Infinity and Xinference serve it for local models such as
bge-reranker-v2-m3, which also reads Chinese.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from memoryd.platform.errors import ConfigurationError, RerankerNotConfigured, RerankerUnavailable
from memoryd.platform.settings import Settings


class _Result(BaseModel):
    index: int
    relevance_score: float


class _Reply(BaseModel):
    results: list[_Result]


def _unit(scores: list[float]) -> list[float]:
    # Servers differ: some return probabilities, llama.cpp returns raw logits. Logits are
    # squashed so that a rerank score means the same [0, 1] relevance as the other modes.
    if all(0.0 <= s <= 1.0 for s in scores):
        return scores
    return [1.0 / (1.0 + math.exp(-max(min(s, 50.0), -50.0))) for s in scores]


class HttpReranker:
    def __init__(self, settings: Settings) -> None:
        if not settings.rerank_url:
            raise RerankerNotConfigured(
                "rerank: no reranker is configured (set MEMORYD_RERANK_URL)", field="rerank"
            )
        self.url = settings.rerank_url.rstrip("/") + "/rerank"
        self.model = settings.rerank_model
        self.timeout_s = settings.rerank_timeout_s
        headers = {}
        if settings.rerank_api_key is not None:
            headers["Authorization"] = f"Bearer {settings.rerank_api_key.get_secret_value()}"
        self._client = httpx.Client(timeout=settings.rerank_timeout_s, headers=headers)

    def close(self) -> None:
        self._client.close()

    def scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance in [0, 1] per document, in input order."""
        if not documents:
            return []
        body = self._post({"model": self.model, "query": query, "documents": list(documents),
                           "top_n": len(documents)})
        try:
            reply = _Reply.model_validate(body)
        except ValidationError as exc:
            raise RerankerUnavailable(f"reranker: malformed reply from {self.url}") from exc
        raw: list[float | None] = [None] * len(documents)
        for result in reply.results:
            if 0 <= result.index < len(documents):
                raw[result.index] = result.relevance_score
        if any(s is None for s in raw):
            raise RerankerUnavailable(f"reranker: {self.url} did not score every document")
        return _unit([s for s in raw if s is not None])

    def _post(self, payload: dict[str, Any]) -> Any:
        try:
            response = self._client.post(self.url, json=payload)
        except httpx.TimeoutException as exc:
            raise RerankerUnavailable(
                f"reranker: no answer from {self.url} within {self.timeout_s}s"
            ) from exc
        except httpx.UnsupportedProtocol as exc:
            raise ConfigurationError(f"reranker: unusable URL {self.url}: {exc}",
                                     field="rerank_url") from exc
        except httpx.RequestError as exc:
            raise RerankerUnavailable(f"reranker: cannot reach {self.url}: {exc}") from exc
        if response.status_code >= 300:
            raise RerankerUnavailable(
                f"reranker: {self.url} answered HTTP {response.status_code}: "
                f"{response.text[:200]}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise RerankerUnavailable(f"reranker: {self.url} returned malformed JSON") from exc
