"""OpenAI-compatible chat completions: OpenAI, DeepSeek, Qwen/DashScope, vLLM, Ollama's /v1."""

from __future__ import annotations

from typing import Any

from memoryd.llm.base import ChatClient, ChatMessage
from memoryd.platform.errors import LLMUnavailable


class OpenAIChat(ChatClient):
    provider = "openai"

    def chat(self, messages: list[ChatMessage]) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": 0,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        data = self._post(f"{self.base_url}/chat/completions", body)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMUnavailable("openai reply without choices[0].message.content") from exc
        return str(content or "")
