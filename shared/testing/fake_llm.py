"""A fake chat model over real HTTP on 127.0.0.1: OpenAI `POST /v1/chat/completions` (and
`GET /v1/models`) and Ollama `POST /api/chat`, scripted per test with a queue of behaviours.

    with FakeLLM() as llm:
        llm.script(json_reply({"operations": []}), http_error(429, retry_after=1))
        ... point MEMORYD_LLM_BASE_URL at llm.openai_url (or llm.url for Ollama) ...
        llm.requests  # what the model was sent

Each request takes the next behaviour of its model's queue (`script(..., model=)`), else of
the shared queue, else `default` (or `responder(request)` when set, e.g. for a chat loop or
a benchmark with a fixed `latency_s`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memoryd.extraction.llm_prompt import read_transcript


@dataclass(frozen=True)
class Behaviour:
    status: int = 200
    content: str = ""  # the assistant's reply text (status 200)
    error: str = ""  # the provider's error message (status >= 400)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    # A request with `"stream": true` gets `content` as server-sent events: these deltas
    # (default: `content` word by word), this long apart.
    chunks: tuple[str, ...] = ()
    chunk_delay_s: float = 0.0


def json_reply(value: Any, delay_s: float = 0.0) -> Behaviour:
    return Behaviour(content=json.dumps(value, ensure_ascii=False), delay_s=delay_s)


def text_reply(text: str, delay_s: float = 0.0) -> Behaviour:
    return Behaviour(content=text, delay_s=delay_s)


def http_error(status: int, message: str = "error", retry_after: float | None = None) -> Behaviour:
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return Behaviour(status=status, error=message, headers=headers)


def slow(delay_s: float, then: Behaviour) -> Behaviour:
    return Behaviour(then.status, then.content, then.error, then.headers, delay_s,
                     then.chunks, then.chunk_delay_s)


def streamed(chunks: list[str], chunk_delay_s: float = 0.0) -> Behaviour:
    """An answer made of these deltas; sent as one message when the request does not stream."""
    return Behaviour(content="".join(chunks), chunks=tuple(chunks), chunk_delay_s=chunk_delay_s)


@dataclass
class Received:
    path: str
    protocol: str  # openai | ollama
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, str]]:
        return list(self.body.get("messages", []))

    @property
    def text(self) -> str:
        """Every message's content, joined: what the model read."""
        return "\n".join(str(m.get("content", "")) for m in self.messages)


def users_said(request: Received) -> list[str]:
    """What the user said, in order, in an extraction request (its JSON transcript); empty
    for any other request (a judge call, a chat)."""
    if not request.messages:
        return []
    try:
        turns = read_transcript(str(request.messages[-1].get("content", "")))
    except (ValueError, KeyError, TypeError):
        return []
    return [t["content"] for t in turns if t["role"] == "user"]


class FakeLLM:
    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.default: Behaviour = json_reply({"operations": []})
        self.responder: Callable[[Received], Behaviour] | None = None
        self.requests: list[Received] = []
        self.streams_cut = 0  # streams the client closed before their end
        # `GET /v1/models` lists these ids; each such request is kept in `model_requests`.
        self.models: list[str] = ["fake-model"]
        self.model_requests: list[Received] = []
        self._queues: dict[str | None, deque[Behaviour]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm",
                                        daemon=True)

    @property
    def url(self) -> str:
        """Base URL as Ollama is configured (`/api/chat` is appended)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """Base URL as an OpenAI-compatible provider is configured (ends in /v1)."""
        return f"{self.url}/v1"

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *behaviours: Behaviour, model: str | None = None) -> None:
        with self._lock:
            self._queues.setdefault(model, deque()).extend(behaviours)

    def reset(self) -> None:
        with self._lock:
            self._queues.clear()
            self.requests.clear()
            self.model_requests.clear()
            self.responder = None
            self.models = ["fake-model"]

    def pending(self, model: str | None = None) -> int:
        with self._lock:
            return len(self._queues.get(model, ()))

    def received(self, model: str | None = None) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if model is None or r.model == model]

    def _next(self, request: Received) -> Behaviour:
        with self._lock:
            self.requests.append(request)
            for key in (request.model, None):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        return self.default


def _handler_for(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY, as HTTP servers of chat models have: a streamed event goes out when
        # written, not after the peer's delayed ACK of the one before.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: tests read `requests` instead

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            """OpenAI's model list (`GET /v1/models`), from `fake.models`."""
            if self.path.rstrip("/") not in ("/v1/models", "/models"):
                self._send(404, {"error": f"no route {self.path}"}, {})
                return
            with fake._lock:
                fake.model_requests.append(
                    Received(self.path, "openai", {}, dict(self.headers.items())))
                ids = list(fake.models)
            self._send(200, {"object": "list", "data": [
                {"id": model, "object": "model", "created": 1700000000, "owned_by": "fake"}
                for model in ids]}, {"x-ratelimit-remaining-requests": "99"})

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.rstrip("/") in ("/v1/chat/completions", "/chat/completions"):
                protocol = "openai"
            elif self.path.rstrip("/") == "/api/chat":
                protocol = "ollama"
            else:
                self._send(404, {"error": f"no route {self.path}"}, {})
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(400, _error(protocol, "request body is not JSON"), {})
                return
            request = Received(self.path, protocol, body, dict(self.headers.items()))
            behaviour = fake._next(request)
            delay = behaviour.delay_s + fake.latency_s
            if delay:
                time.sleep(delay)
            if behaviour.status >= 400:
                self._send(behaviour.status, _error(protocol, behaviour.error), behaviour.headers)
                return
            model = str(body.get("model", "fake"))
            if protocol == "openai" and body.get("stream") is True:
                self._stream(model, behaviour)
                return
            self._send(200, _reply(protocol, model, behaviour.content), behaviour.headers)

        def _stream(self, model: str, behaviour: Behaviour) -> None:
            """Chat-completions server-sent events, one chunk per delta, then [DONE], in
            HTTP/1.1 chunked encoding (the connection stays open for the next request)."""
            deltas = list(behaviour.chunks) or _words(behaviour.content)
            events = [_chunk(model, {"role": "assistant", "content": ""}, None)]
            events += [_chunk(model, {"content": d}, None) for d in deltas]
            events += [_chunk(model, {}, "stop"), "[DONE]"]
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                for name, value in behaviour.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for i, event in enumerate(events):
                    if i and behaviour.chunk_delay_s:
                        time.sleep(behaviour.chunk_delay_s)
                    data = f"data: {event}\n\n".encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with fake._lock:
                    fake.streams_cut += 1
                self.close_connection = True

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

    return Handler


def _words(content: str) -> list[str]:
    words = content.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]] if content else []


def _chunk(model: str, delta: dict[str, Any], finish: str | None) -> str:
    return json.dumps({
        "id": "chatcmpl-fake-stream", "object": "chat.completion.chunk",
        "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }, ensure_ascii=False)


def _error(protocol: str, message: str) -> dict[str, Any]:
    if protocol == "ollama":
        return {"error": message}
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _reply(protocol: str, model: str, content: str) -> dict[str, Any]:
    now = int(time.time())
    if protocol == "ollama":
        return {
            "model": model, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
            "message": {"role": "assistant", "content": content}, "done": True,
            "done_reason": "stop", "prompt_eval_count": 0, "eval_count": 0,
        }
    return {
        "id": f"chatcmpl-fake-{now}", "object": "chat.completion", "created": now, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
