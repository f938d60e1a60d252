"""examples/chat_loop.py against a local server speaking the OpenAI chat protocol (the one
service here we cannot reach) and the real memoryd stack."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from conftest import KEY_A

from examples.chat_loop import ChatConfig, Conversation, main, run_turn
from shared.client import MemorydClient


class _ChatServer(ThreadingHTTPServer):
    requests: list[dict[str, Any]]


class _Handler(BaseHTTPRequestHandler):
    server: _ChatServer

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests.append({"path": self.path, "body": body,
                                     "auth": self.headers.get("authorization")})
        last = body["messages"][-1]["content"]
        reply = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                 "model": body["model"], "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": f"You said: {last}"}}],
                 "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def chat_server() -> Iterator[_ChatServer]:
    server = _ChatServer(("127.0.0.1", 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_context_before_the_call_and_the_interaction_after(
    chat_server: _ChatServer, base_url: str, user: str
) -> None:
    llm_url = f"http://127.0.0.1:{chat_server.server_address[1]}/v1"
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
    assert second["path"] == "/v1/chat/completions" and second["auth"] == "Bearer sk-test"
    system = second["body"]["messages"][0]
    assert system["role"] == "system" and "Mia" in system["content"]
    stored = [m.content for m in memory.list(user).items]
    assert "我女儿叫 Mia" in stored


def test_main_once_prints_the_answer(chat_server: _ChatServer, base_url: str, user: str) -> None:
    out = io.StringIO()
    code = main(["--base-url", f"http://127.0.0.1:{chat_server.server_address[1]}/v1",
                 "--model", "m", "--memoryd-url", base_url, "--memoryd-key", KEY_A,
                 "--user", user, "--once", "hello there"], stdout=out)
    assert code == 0 and out.getvalue() == "You said: hello there\n"
    lines = io.StringIO("first line\n\nsecond line\n")
    out = io.StringIO()
    assert main(["--base-url", f"http://127.0.0.1:{chat_server.server_address[1]}/v1",
                 "--memoryd-url", base_url, "--memoryd-key", KEY_A, "--user", user],
                stdin=lines, stdout=out) == 0
    assert out.getvalue().splitlines() == ["You said: first line", "You said: second line"]
