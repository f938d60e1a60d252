"""The search bench's own HTTP client against a real HTTP/1.1 server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ops.bench.http import HttpError, RawClient


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn serves it

    def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.seen.append((self.client_address[1], self.path,  # type: ignore[attr-defined]
                                 self.headers["Authorization"], body))
        answer = json.dumps({"echo": body.decode(), "path": self.path}).encode()
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(answer), answer))
            return
        self.send_response(201 if self.path == "/created" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        if self.path == "/close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_posts_share_one_connection_and_carry_the_key(server: ThreadingHTTPServer) -> None:
    port = server.server_address[1]
    with RawClient("127.0.0.1", port, "k-123") as client:
        first = client.post("/v1/search", b'{"q": "\xe5\x92\x96\xe5\x95\xa1 coffee"}')
        second = client.post("/created", b"{}")
    assert first[0] == 200
    assert json.loads(first[1]) == {"echo": '{"q": "咖啡 coffee"}', "path": "/v1/search"}
    assert second == (201, json.dumps({"echo": "{}", "path": "/created"}).encode())
    seen = server.seen  # type: ignore[attr-defined]
    assert [s[2] for s in seen] == ["Bearer k-123", "Bearer k-123"]
    assert seen[0][0] == seen[1][0]  # the same client port: one kept-alive connection


def test_a_closed_connection_is_opened_again(server: ThreadingHTTPServer) -> None:
    with RawClient("127.0.0.1", server.server_address[1], "k") as client:
        assert client.post("/close", b"1")[0] == 200
        assert client.post("/again", b"2")[0] == 200
    seen = server.seen  # type: ignore[attr-defined]
    assert [s[1] for s in seen] == ["/close", "/again"]
    assert seen[0][0] != seen[1][0]


def test_an_answer_without_a_length_is_refused(server: ThreadingHTTPServer) -> None:
    with RawClient("127.0.0.1", server.server_address[1], "k") as client:
        with pytest.raises(HttpError, match="Content-Length"):
            client.post("/chunked", b"{}")
        # The unread rest is dropped with its connection: the next answer is read whole.
        assert json.loads(client.post("/next", b"3")[1]) == {"echo": "3", "path": "/next"}
