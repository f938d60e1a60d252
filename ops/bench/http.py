"""The search bench's HTTP client: one keep-alive connection, requests written whole, answers
read by their Content-Length, and nothing else.

The bench runs on the same 2 cores as the stack it measures, so whatever its client costs
is taken from the stack. httpx cost the bench 0.7 core-ms per search (0.14 cores at
200 searches/s with 8 clients); a chat server calling memoryd runs elsewhere. JSON answers
are read once the timed loop is over (`run_searches`), for the same reason.
"""

from __future__ import annotations

import socket
from types import TracebackType

from ops.stack import Stack

_HEAD_END = b"\r\n\r\n"


class HttpError(Exception):
    pass


class RawClient:
    """POSTs JSON bodies to one server over one connection, reconnecting when it closes."""

    def __init__(self, host: str, port: int, api_key: str, timeout_s: float = 60.0) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._auth = f"Authorization: Bearer {api_key}\r\n".encode("latin-1")
        self._sock: socket.socket | None = None
        self._buffer = b""

    def __enter__(self) -> RawClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def connect(self) -> None:
        """Open the connection now (the timed loops start on an open one)."""
        if self._sock is None:
            sock = socket.create_connection((self.host, self.port), self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock, self._buffer = sock, b""

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """(status, body) of one POST; an HttpError when the answer is not one we can read."""
        self.connect()
        assert self._sock is not None
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n")
        try:
            self._sock.sendall(head.encode("latin-1") + self._auth + b"\r\n" + body)
            status, length, keep_alive = self._read_head()
            answer = self._read_exactly(length)
        except (OSError, HttpError):
            self.close()  # whatever is left on the connection cannot be read as an answer
            raise
        if not keep_alive:
            self.close()
        return status, answer

    def _read_head(self) -> tuple[int, int, bool]:
        while (end := self._buffer.find(_HEAD_END)) < 0:
            self._fill()
        head, self._buffer = self._buffer[:end], self._buffer[end + len(_HEAD_END):]
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise HttpError(f"not an HTTP status line: {lines[0]!r}")
        length: int | None = None
        keep_alive = True
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and "close" in value.lower():
                keep_alive = False
        if length is None:
            raise HttpError("an answer without Content-Length (the bench reads no other kind)")
        return int(parts[1]), length, keep_alive

    def _read_exactly(self, length: int) -> bytes:
        while len(self._buffer) < length:
            self._fill()
        data, self._buffer = self._buffer[:length], self._buffer[length:]
        return data

    def _fill(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(65536)
        if not chunk:
            raise HttpError("the server closed the connection in the middle of an answer")
        self._buffer += chunk


def raw_client(stack: Stack, timeout_s: float = 60.0) -> RawClient:
    """The timed searches' client for `stack`, authorised with its API key."""
    return RawClient("127.0.0.1", stack.port, stack.api_key, timeout_s)
