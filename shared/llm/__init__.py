"""Chat-model clients (OpenAI-compatible, Ollama native) with one error contract."""

from memoryd.llm.base import ChatClient, ChatMessage
from memoryd.llm.factory import make_chat_client, make_judge_client

__all__ = ["ChatClient", "ChatMessage", "make_chat_client", "make_judge_client"]
