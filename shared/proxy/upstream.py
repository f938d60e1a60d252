"""The upstream chat-completions API: one pooled httpx client per gateway process.

Any OpenAI-compatible base URL (OpenAI, DeepSeek, DashScope, vLLM, llama.cpp, Ollama's
/v1): the proxy POSTs to `<base>/chat/completions` and reads the answer as a stream, so a
streamed answer passes on chunk by chunk and a plain one is read whole; `GET <base>/models`
is the model list UIs and frameworks ask for first.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from memoryd.platform.settings import Settings
from memoryd.proxy.errors import ProxyNotConfigured, UpstreamTimeout, UpstreamUnreachable

# Response headers worth passing back to the caller: the body's type and the provider's
# rate-limit advice (Retry-After on a 429 is what the openai client backs off by).
_PASSED = ("content-type", "retry-after", "retry-after-ms")
_PASSED_PREFIXES = ("x-ratelimit-",)


def passed_headers(headers: httpx.Headers) -> dict[str, str]:
    return {name: value for name, value in headers.items()
            if name.lower() in _PASSED or name.lower().startswith(_PASSED_PREFIXES)}


class Upstream:
    """Created by the gateway's composition root, closed when the gateway stops."""

    def __init__(self, settings: Settings) -> None:
        base = settings.proxy_upstream_url
        self.url = f"{base.rstrip('/')}/chat/completions" if base else None
        self.models_url = f"{base.rstrip('/')}/models" if base else None
        # Identity encoding: the stream's bytes go to the caller as they are read.
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if settings.proxy_upstream_api_key is not None:
            headers["Authorization"] = (
                f"Bearer {settings.proxy_upstream_api_key.get_secret_value()}")
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(settings.proxy_timeout_s,
                                  connect=settings.proxy_connect_timeout_s),
            # Chat answers can take minutes: no pool limit turns concurrent chats into a queue.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )

    def require_configured(self) -> str:
        if self.url is None:
            raise ProxyNotConfigured(
                "the chat-completions proxy has no upstream: set MEMORYD_PROXY_UPSTREAM_URL "
                "to an OpenAI-compatible base URL (e.g. https://api.openai.com/v1)")
        return self.url

    async def open(self, body: dict[str, Any]) -> httpx.Response:
        """Send the request; the answer's status and headers are read, its body is not
        (read it with `aiter_raw`/`aread`, then `aclose`)."""
        url = self.require_configured()
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        request = self._client.build_request("POST", url, content=data)
        try:
            return await self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(f"the upstream did not answer in time: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(f"the upstream is unreachable: {exc!r}") from exc

    async def models(self) -> httpx.Response:
        """`GET <base>/models`, read whole: the upstream's model list (or its error), for
        `GET /v1/models` to pass on as it is."""
        self.require_configured()
        assert self.models_url is not None  # configured: set with `url`
        try:
            response = await self._client.get(self.models_url)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(f"the upstream did not answer in time: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(f"the upstream is unreachable: {exc!r}") from exc
        return response

    async def aclose(self) -> None:
        await self._client.aclose()
