"""Each request reads one index generation from start to end (shared/index/generations.py).

Pinned here, in the request's context, so that a re-embedding switching collections in
the middle of a search can never pair a query embedded by one model with the other
model's collection.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from memoryd.index.generations import IndexRouter
from memoryd.runtime import Runtime


class PinIndexMiddleware:
    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        index = self.runtime.index_if_open
        if scope["type"] != "http" or index is None:
            # Not open yet: the first request opens it in a worker thread, unpinned.
            await self.app(scope, receive, send)
            return
        if index.check_due():
            # The check reads Redis: off the event loop.
            await anyio.to_thread.run_sync(_check, index)
        with index.pinned():
            await self.app(scope, receive, send)


def _check(index: IndexRouter) -> None:
    index.view()
