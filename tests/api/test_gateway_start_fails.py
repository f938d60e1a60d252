"""A gateway whose start fails stops: uvicorn runs the app's shutdown at once, and that
shutdown must end. It hung in the job-end listener (`AsyncJobWaiter.close`), whose
cancellation redis-py's read took for its own timeout, so `memoryd up` on a port another
program held never exited, not even on SIGTERM."""

from __future__ import annotations

import socket
import threading
from typing import Any

import uvicorn

from memoryd.api.app import create_app
from memoryd.tenancy.auth import KeyRing


def test_a_gateway_that_cannot_bind_runs_its_shutdown_to_the_end(stack: Any) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    app = create_app(stack.runtime, KeyRing({}))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                                           access_log=False))
    ended: list[BaseException] = []

    def run() -> None:
        try:
            server.run()
        except BaseException as exc:  # uvicorn ends a failed start with SystemExit
            ended.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    try:
        thread.start()
        thread.join(30)
        assert not thread.is_alive(), "the app's shutdown did not end"
    finally:
        held.close()
    assert [type(e) for e in ended] == [SystemExit]
    assert not server.started
