"""Both provider protocols over real HTTP against the fake server, and their error contract."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_llm import FakeLLM, http_error, json_reply, slow, text_reply

from memoryd.extraction.ask import ask_json
from memoryd.llm import ChatMessage, make_chat_client, make_judge_client
from memoryd.llm.base import ChatClient
from memoryd.platform.errors import LLMRateLimited, LLMRejected, LLMReplyInvalid, LLMUnavailable
from memoryd.platform.retry_after import retry_after
from memoryd.platform.settings import Settings

HELLO = [ChatMessage("system", "be brief"), ChatMessage("user", "你好, hello")]


@pytest.fixture()
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def client(fake: FakeLLM, provider: str, **overrides: object) -> ChatClient:
    url = fake.openai_url if provider == "openai" else fake.url
    settings = Settings(llm_provider=provider, llm_model="m", llm_base_url=url,
                        llm_timeout_s=0.5, **overrides)  # type: ignore[arg-type]
    made = make_chat_client(settings)
    assert made is not None
    return made


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_each_protocol_sends_json_mode_and_returns_the_reply(
    fake: FakeLLM, provider: str
) -> None:
    fake.script(json_reply({"operations": [], "note": "中文"}))
    reply = client(fake, provider, llm_api_key="k-1").chat(HELLO)
    assert reply == '{"operations": [], "note": "中文"}'
    [sent] = fake.requests
    assert sent.protocol == provider
    assert sent.messages == [{"role": "system", "content": "be brief"},
                             {"role": "user", "content": "你好, hello"}]
    assert sent.headers["Authorization"] == "Bearer k-1"
    if provider == "openai":
        assert sent.path == "/v1/chat/completions"
        assert sent.body["response_format"] == {"type": "json_object"}
    else:
        assert sent.path == "/api/chat"
        assert sent.body["format"] == "json" and sent.body["stream"] is False


def test_json_mode_can_be_switched_off(fake: FakeLLM) -> None:
    client(fake, "openai", llm_json_mode=False).chat(HELLO)
    client(fake, "ollama", llm_json_mode=False).chat(HELLO)
    assert "response_format" not in fake.requests[0].body
    assert "format" not in fake.requests[1].body


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_errors_map_to_transient_or_permanent(fake: FakeLLM, provider: str) -> None:
    chat = client(fake, provider)
    fake.script(http_error(429, "too many", retry_after=7))
    with pytest.raises(LLMRateLimited) as limited:
        chat.chat(HELLO)
    assert limited.value.retry_after_s == 7 and "too many" in limited.value.message
    fake.script(http_error(502, "bad gateway"))
    with pytest.raises(LLMUnavailable, match="502"):
        chat.chat(HELLO)
    fake.script(http_error(401, "Incorrect API key provided"))
    with pytest.raises(LLMRejected, match="Incorrect API key provided"):
        chat.chat(HELLO)
    fake.script(slow(1.5, json_reply({})))
    with pytest.raises(LLMUnavailable, match="timed out"):
        chat.chat(HELLO)


def test_unreachable_provider_is_transient() -> None:
    from memoryd.platform.redis_runtime import free_port

    settings = Settings(llm_provider="openai", llm_model="m",
                        llm_base_url=f"http://127.0.0.1:{free_port()}/v1")
    chat = make_chat_client(settings)
    assert chat is not None
    with pytest.raises(LLMUnavailable, match="unreachable"):
        chat.chat(HELLO)


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert retry_after("3") == 3.0
    assert retry_after(None) is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert retry_after("soon") is None


def test_judge_falls_back_to_the_extractor_or_uses_its_own_model(fake: FakeLLM) -> None:
    base = {"llm_provider": "openai", "llm_model": "big", "llm_base_url": fake.openai_url}
    same = make_judge_client(Settings(**base))  # type: ignore[arg-type]
    own = make_judge_client(Settings(**base, llm_judge_model="small",  # type: ignore[arg-type]
                                     llm_judge_provider="ollama", llm_judge_base_url=fake.url))
    assert same is not None and same.model == "big"
    assert own is not None and own.model == "small" and own.provider == "ollama"
    assert make_chat_client(Settings()) is None


def test_ask_json_re_asks_then_fails_with_the_redacted_reply(fake: FakeLLM) -> None:
    chat = client(fake, "openai")
    fake.script(text_reply("no json, call 13800138000"), json_reply({"decision": "conflict"}))
    assert ask_json(chat, HELLO, 1, lambda d: d["decision"], "judge") == "conflict"
    assert "could not be used" in fake.requests[1].messages[-1]["content"]
    fake.script(text_reply("still not json 13800138000"), text_reply("nope 13800138000"))
    with pytest.raises(LLMReplyInvalid) as failed:
        ask_json(chat, HELLO, 1, lambda d: d, "judge")
    assert failed.value.reply == "nope [PHONE]"
    assert failed.value.to_dict()["code"] == "llm_reply_invalid"
