"""Ollama's native chat API (`POST /api/chat`, `stream: false`, `format: "json"`)."""

from __future__ import annotations

from typing import Any

from memoryd.llm.base import ChatClient, ChatMessage
from memoryd.platform.errors import LLMUnavailable


class OllamaChat(ChatClient):
    provider = "ollama"

    def chat(self, messages: list[ChatMessage]) -> str:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": False,
            "options": {"temperature": 0},
        }
        if self.json_mode:
            body["format"] = "json"
        data = self._post(f"{self.base_url}/api/chat", body)
        message = data.get("message")
        if not isinstance(message, dict) or "content" not in message:
            raise LLMUnavailable("ollama reply without message.content")
        return str(message["content"] or "")
