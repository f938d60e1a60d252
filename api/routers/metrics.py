"""GET /metrics: Prometheus text format.

With MEMORYD_METRICS_TOKEN set, it needs `Authorization: Bearer <token>`. Without one it
is open in embedded mode (bound to 127.0.0.1 by default) and closed in server mode
(`memoryd serve`, which listens for a network) unless MEMORYD_METRICS_OPEN is true.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response

from memoryd.platform.errors import Unauthorized
from memoryd.platform.metrics import CONTENT_TYPE, StackCollector
from memoryd.platform.settings import Settings

router = APIRouter(tags=["operations"])


def check_metrics_token(settings: Settings, authorization: str | None,
                        server_mode: bool = False) -> None:
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""
    if not token:
        if server_mode and not settings.metrics_open:
            raise Unauthorized("/metrics in server mode needs MEMORYD_METRICS_TOKEN (then "
                               "Authorization: Bearer <it>), or MEMORYD_METRICS_OPEN=true")
        return
    scheme, _, given = (authorization or "").partition(" ")
    # The header arrives as latin-1 text (raw bytes); compared as bytes, so a token or a
    # header with non-ASCII characters is a mismatch, never an error.
    if scheme.lower() != "bearer" or not secrets.compare_digest(
            given.strip().encode("latin-1", errors="replace"), token.encode("utf-8")):
        raise Unauthorized("/metrics needs Authorization: Bearer <MEMORYD_METRICS_TOKEN>")


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE: {}}}, 401: {}})
def metrics(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    collector: StackCollector = request.app.state.metrics
    check_metrics_token(request.app.state.runtime.settings, authorization,
                        getattr(request.app.state, "server_mode", False))
    return Response(collector.render(), media_type=CONTENT_TYPE)
