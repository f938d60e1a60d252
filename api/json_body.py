"""Request bodies are read as JSON whatever their Content-Type says.

`curl -d '{…}'` declares `application/x-www-form-urlencoded`, and FastAPI then validates the
raw bytes instead of the object ("Input should be a valid dictionary or object"). Every
route of this API that takes a body takes JSON (`/v1/import` reads its raw body itself), so
the declared type is replaced by `application/json` before routing. This opens nothing to
other sites: a request needs the `Authorization` header, which a browser adds to a
cross-site request only after a CORS preflight that this API does not grant.

The declared type stays in the request state, so a body that is not JSON is answered with
a message that names it (`400 malformed_json`, see `api/errors.py`).
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

# The request-state key holding the Content-Type a client declared when it was not JSON
# ("" when it declared none: FastAPI reads a body without one as bytes, too).
DECLARED_TYPE = "declared_content_type"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_JSON = re.compile(rb"^\s*application/([\w.+-]*\+)?json\s*(;|$)", re.IGNORECASE)


class JsonBodyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _WITH_BODY:
            declared = [v for k, v in scope["headers"] if k == b"content-type"]
            if not declared or not _JSON.match(declared[0]):
                headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
                scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
                state = scope.setdefault("state", {})
                state[DECLARED_TYPE] = declared[0].decode("latin-1")[:100] if declared else ""
        await self.app(scope, receive, send)
