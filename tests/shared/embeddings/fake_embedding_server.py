"""A real HTTP server speaking the Ollama `/api/embed` and OpenAI `/v1/embeddings` protocols.

Each test scripts the replies with `FakeEmbeddingServer.reply_with(...)`; every request is
recorded so tests can check what the client actually sent.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

DIM = 8
HANG_LIMIT_S = 10.0


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    """Deterministic, deliberately unnormalised vector for `text`."""
    rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
    return [float(x) for x in rng.normal(0.0, 3.0, dim)]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    hang: bool = False


Script = Callable[[str, Any], Reply]


def success(path: str, body: Any, dim: int = DIM) -> Reply:
    """What Ollama or OpenAI answer for a well-formed request."""
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    vectors = [fake_vector(t, dim) for t in texts]
    if path == "/api/embed":
        payload: dict[str, Any] = {
            "model": body["model"],
            "embeddings": vectors,
            "total_duration": 14143917,
            "load_duration": 1019500,
            "prompt_eval_count": 8,
        }
    else:
        # Reversed on purpose: clients must order by `index`, not by position.
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        payload = {
            "object": "list",
            "data": data[::-1],
            "model": body["model"],
            "usage": {"prompt_tokens": 8, "total_tokens": 8},
        }
    return json_reply(payload)


def json_reply(payload: Any, status: int = 200) -> Reply:
    return Reply(status=status, body=json.dumps(payload).encode())


@dataclass
class FakeEmbeddingServer:
    script: Script = success
    requests: list[Recorded] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reply_with(self, script: Script) -> None:
        self.script = script

    def start(self) -> FakeEmbeddingServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                fake.requests.append(Recorded(self.path, dict(self.headers.items()), body))
                if self.path not in ("/api/embed", "/v1/embeddings"):
                    reply = json_reply({"error": "404 page not found"}, 404)
                else:
                    reply = fake.script(self.path, body)
                if reply.hang:
                    # Bounded so a broken test cannot wedge the suite; teardown releases it.
                    fake.release.wait(HANG_LIMIT_S)
                    return
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep pytest output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown() (and so each test's teardown) fast.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
