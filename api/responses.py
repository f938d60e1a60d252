"""The error responses every route declares, so the OpenAPI description is true."""

from __future__ import annotations

from typing import Any

from memoryd.records.schemas import ErrorBody

_DESCRIPTIONS = {
    400: "malformed JSON",
    401: "missing, unknown or revoked API key",
    403: "the API key lacks a scope this endpoint needs, or is a tenant's key on a store-wide "
         "route (code forbidden)",
    404: "no such resource for this tenant and user",
    409: "the resource is not in a state that allows this",
    413: "the body or a field is over its limit (code payload_too_large)",
    422: "invalid input; `field` names it",
    429: "rate limit reached (code rate_limited; see Retry-After)",
    503: "Redis or the store is unreachable",
}

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text} for code, text in _DESCRIPTIONS.items()
}
