"""Build the extractor's and the judge's clients from `Settings`."""

from __future__ import annotations

from memoryd.llm.base import ChatClient
from memoryd.llm.ollama_chat import OllamaChat
from memoryd.llm.openai_chat import OpenAIChat
from memoryd.platform.settings import Settings

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


def _client(provider: str, base_url: str | None, model: str, api_key: str | None,
            settings: Settings) -> ChatClient:
    cls: type[ChatClient] = OllamaChat if provider == "ollama" else OpenAIChat
    url = base_url or (settings.ollama_base_url if provider == "ollama" else OPENAI_DEFAULT_URL)
    return cls(url, model, api_key, settings.llm_timeout_s, settings.llm_connect_timeout_s,
               settings.llm_json_mode)


def make_chat_client(settings: Settings) -> ChatClient | None:
    if not settings.llm_configured:
        return None
    assert settings.llm_provider is not None and settings.llm_model is not None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return _client(settings.llm_provider, settings.llm_base_url, settings.llm_model, key,
                   settings)


def make_judge_client(settings: Settings) -> ChatClient | None:
    """A separate judge model when one is set; else the extractor's model."""
    if not settings.llm_judge_model:
        return make_chat_client(settings)
    provider = settings.llm_judge_provider or settings.llm_provider or "openai"
    base_url = settings.llm_judge_base_url or settings.llm_base_url
    secret = settings.llm_judge_api_key or settings.llm_api_key
    key = secret.get_secret_value() if secret else None
    return _client(provider, base_url, settings.llm_judge_model, key, settings)
