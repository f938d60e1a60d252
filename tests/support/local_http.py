"""An HTTP server on 127.0.0.1 that a drill can take away and bring back on the same port:
stop() closes the port (connection refused), open() serves again where it was."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ReopenableServer:
    def __init__(self) -> None:
        self.port = 0  # chosen by the first open(), then kept
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def open(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
