"""A real HTTP server speaking the Cohere/Jina rerank protocol (`POST /rerank`).

Scripted per test: documents containing `favour` score high, the others low, as
probabilities or, with `logits`, as raw logits the way llama.cpp answers. `fail_status`
makes it answer an error instead. Every request body is recorded.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeRerankServer:
    favour: str = ""
    logits: bool = False
    fail_status: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def reset(self) -> None:
        self.favour, self.logits, self.fail_status = "", False, None
        self.requests.clear()

    def score(self, document: str) -> float:
        hit = bool(self.favour) and self.favour in document
        if self.logits:
            return 3.0 if hit else -3.0
        return 0.95 if hit else 0.05

    def start(self) -> FakeRerankServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append({"path": self.path, "body": body})
                if self.path != "/v1/rerank":
                    return self._send(404, {"error": f"no route {self.path}"})
                if fake.fail_status is not None:
                    return self._send(fake.fail_status, {"error": "model overloaded"})
                results = [{"index": i, "relevance_score": fake.score(doc)}
                           for i, doc in enumerate(body["documents"])]
                results.sort(key=lambda r: r["relevance_score"], reverse=True)
                self._send(200, {"id": "rerank-1", "model": body.get("model"),
                                 "results": results[: body.get("top_n", len(results))],
                                 "usage": {"total_tokens": 10}})

            def _send(self, status: int, payload: Any) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
