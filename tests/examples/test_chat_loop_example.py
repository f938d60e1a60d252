"""examples/chat_loop.py against the fake LLM server (the OpenAI chat protocol over real HTTP:
the one service here we cannot reach) and the real memoryd stack."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import httpx
import pytest
from conftest import KEY_A

from examples.chat_loop import ChatConfig, Conversation, main, run_turn
from memoryd.client import MemorydClient
from memoryd.testing.fake_llm import FakeLLM, text_reply


@pytest.fixture()
def chat_server() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        # An echo, so the assertions can tell which turn the model answered.
        fake.responder = lambda request: text_reply(f"You said: {request.messages[-1]['content']}")
        yield fake


def test_context_before_the_call_and_the_interaction_after(
    chat_server: FakeLLM, base_url: str, user: str
) -> None:
    llm_url = chat_server.openai_url
    config = ChatConfig(base_url=llm_url, model="test-model", api_key="sk-test", user_id=user,
                        extract="raw")
    memory = MemorydClient(base_url, KEY_A)
    with httpx.Client(base_url=llm_url, headers={"authorization": "Bearer sk-test"}) as llm:
        conversation = Conversation()
        assert run_turn(llm, memory, config, conversation, "我女儿叫 Mia") == (
            "You said: 我女儿叫 Mia")
        deadline = time.monotonic() + 30
        while not memory.list(user).items:
            assert time.monotonic() < deadline, "the interaction was not stored"
            time.sleep(0.05)
        # A new session: the model no longer sees the first turn, only memoryd remembers it.
        run_turn(llm, memory, config, Conversation(), "我女儿叫什么名字?")
    second = chat_server.requests[-1]
    assert second.path == "/v1/chat/completions"
    assert second.headers.get("authorization", second.headers.get("Authorization")) == (
        "Bearer sk-test")
    system = second.messages[0]
    assert system["role"] == "system" and "Mia" in system["content"]
    stored = [m.content for m in memory.list(user).items]
    assert "我女儿叫 Mia" in stored


def test_main_once_prints_the_answer(chat_server: FakeLLM, base_url: str, user: str) -> None:
    out = io.StringIO()
    code = main(["--base-url", chat_server.openai_url,
                 "--model", "m", "--memoryd-url", base_url, "--memoryd-key", KEY_A,
                 "--user", user, "--once", "hello there"], stdout=out)
    assert code == 0 and out.getvalue() == "You said: hello there\n"
    lines = io.StringIO("first line\n\nsecond line\n")
    out = io.StringIO()
    assert main(["--base-url", chat_server.openai_url,
                 "--memoryd-url", base_url, "--memoryd-key", KEY_A, "--user", user],
                stdin=lines, stdout=out) == 0
    assert out.getvalue().splitlines() == ["You said: first line", "You said: second line"]
