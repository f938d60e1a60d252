"""GET /metrics: Prometheus text format. Open unless MEMORYD_METRICS_TOKEN is set."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response

from shared.errors import Unauthorized
from shared.metrics import CONTENT_TYPE, StackCollector
from shared.settings import Settings

router = APIRouter(tags=["operations"])


def check_metrics_token(settings: Settings, authorization: str | None) -> None:
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else ""
    if not token:
        return
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip(), token):
        raise Unauthorized("/metrics needs Authorization: Bearer <MEMORYD_METRICS_TOKEN>")


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE: {}}}, 401: {}})
def metrics(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    collector: StackCollector = request.app.state.metrics
    check_metrics_token(collector.rt.settings, authorization)
    return Response(collector.render(), media_type=CONTENT_TYPE)
