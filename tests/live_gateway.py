"""A second gateway over real HTTP with its own settings (limits, rate), for the tests that
need other settings than the session stack's. It shares the session's Redis; it opens no
store unless a request reaches one (the checks under test answer before that)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from memoryd.api.app import create_app
from memoryd.index.generations import IndexRouter
from memoryd.jobs.celery_app import create_app as create_celery_app
from memoryd.platform.settings import Settings
from memoryd.runtime import Runtime
from memoryd.tenancy.auth import KeyRing, parse_api_keys, parse_operator_keys


@contextmanager
def gateway(settings: Settings, index: IndexRouter | None = None,
            server_mode: bool = False) -> Iterator[str]:
    """`index`: the session stack's, when requests may reach the store (an Edge shard opens
    once per process). `server_mode`: as `memoryd serve` builds it."""
    assert settings.api_keys is not None
    runtime = Runtime(settings)
    runtime._index = index
    operators = (parse_operator_keys(settings.operator_keys.get_secret_value())
                 if settings.operator_keys is not None else frozenset())
    keyring = KeyRing(parse_api_keys(settings.api_keys.get_secret_value()), operators)
    # A Celery app of its own: `Runtime.celery` would reconfigure the process-wide app, and
    # a gateway on another Redis database would then move the stack's sends there too.
    runtime.__dict__["celery"] = create_celery_app(settings)
    app = create_app(runtime, keyring, server_mode=server_mode)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port,
                                           log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, name="test-gateway", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test gateway did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{settings.port}"
    finally:
        server.should_exit = True
        thread.join(10)
        runtime._index = None  # the stack's: it closes it
        runtime.close()
        runtime.celery.close()


def settings_with(stack: Any, **overrides: Any) -> Settings:
    from memoryd.platform.redis_runtime import free_port

    return stack.settings.model_copy(update={"port": free_port(), **overrides})
