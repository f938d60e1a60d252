"""What every chat client does: send messages, return the reply text, map failures.

Failures follow the task policy: 429 and 5xx, timeouts and connection errors are transient
(the job retries, after `Retry-After` when the provider gives one); any other 4xx is
permanent and carries the provider's own message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import httpx

from memoryd.platform.errors import LLMRateLimited, LLMRejected, LLMUnavailable
from memoryd.platform.retry_after import retry_after


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system | user | assistant
    content: str


class ChatClient(ABC):
    provider: str

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float,
                 connect_timeout_s: float, json_mode: bool) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.json_mode = json_mode
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
        )

    @abstractmethod
    def chat(self, messages: list[ChatMessage]) -> str:
        """The assistant's reply text."""

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._http.post(url, json=body)
        except httpx.TimeoutException as exc:
            raise LLMUnavailable(
                f"{self.provider} model {self.model!r} timed out: {type(exc).__name__}"
            ) from exc
        except httpx.TransportError as exc:
            raise LLMUnavailable(f"{self.provider} at {self.base_url} unreachable: {exc}") from exc
        if response.status_code == 429:
            raise LLMRateLimited(
                f"{self.provider} rate limit: {provider_message(response)}",
                retry_after_s=retry_after(response.headers.get("retry-after")),
            )
        if response.status_code >= 500:
            raise LLMUnavailable(
                f"{self.provider} answered {response.status_code}: {provider_message(response)}"
            )
        if response.status_code >= 400:
            raise LLMRejected(
                f"{self.provider} refused the request ({response.status_code}): "
                f"{provider_message(response)}"
            )
        try:
            data = response.json()
        except ValueError as exc:
            raise LLMUnavailable(f"{self.provider} answered a body that is not JSON") from exc
        if not isinstance(data, dict):
            raise LLMUnavailable(f"{self.provider} answered an unexpected body")
        return data

    def close(self) -> None:
        self._http.close()


def provider_message(response: httpx.Response) -> str:
    """The provider's own words: `{"error": {"message"}}` (OpenAI) or `{"error": "…"}` (Ollama)."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    return response.text[:300]
