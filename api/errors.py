"""Every error leaves the gateway as `{"error": {"code", "message", "field"?}}`.

The mapping from exceptions to HTTP lives here and nowhere else.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException

from memoryd.api.json_body import DECLARED_TYPE
from memoryd.platform.errors import AppError, QueueUnavailable, RateLimited, field_path
from memoryd.platform.logs import get_logger

log = get_logger("memoryd.api")

_HTTP_CODES = {
    400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
    415: "unsupported_media_type", 403: "forbidden", 409: "conflict", 429: "rate_limited",
}


_SOURCES = ("body", "query", "path", "header", "cookie")


def _body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return {"error": error}


def _field_of(loc: tuple[Any, ...], message: str) -> str | None:
    # The first element says where (body, query, path, header); the rest is the field.
    path = field_path(loc[1:] if loc and loc[0] in _SOURCES else loc)
    if not path and ": " in message:
        # Model-level checks start their message with the field they are about.
        candidate = message.split("Value error, ", 1)[-1].split(": ", 1)[0]
        if candidate.isidentifier():
            return candidate
    return path or None


def validation_error(exc: RequestValidationError, declared_type: str | None = None) -> JSONResponse:
    """422 naming the field, or 400 `malformed_json`; `declared_type` is the Content-Type the
    client sent when it was not JSON (the body was read as JSON anyway)."""
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    loc = tuple(first.get("loc", ()))
    message = str(first.get("msg", "invalid request"))
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        sent = f"as {declared_type}" if declared_type else "without a Content-Type"
        hint = (f" (it was sent {sent}: send a JSON object, with Content-Type: "
                f"application/json)" if declared_type is not None else "")
        return JSONResponse(
            _body("malformed_json", f"the body is not valid JSON{hint}: {message}"),
            status_code=400)
    field = _field_of(loc, message)
    code = "unknown_field" if kind == "extra_forbidden" else "invalid_input"
    text = f"{field}: {message}" if field and not message.startswith(f"{field}:") else message
    return JSONResponse(_body(code, text.replace("Value error, ", ""), field), status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(AppError)
    async def _app_error(request: Request, exc: AppError) -> JSONResponse:
        headers = exc.headers if isinstance(exc, RateLimited) else None
        return JSONResponse({"error": exc.to_dict()}, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(exc, getattr(request.state, DECLARED_TYPE, None))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return JSONResponse(_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(RedisError)
    async def _redis(request: Request, exc: RedisError) -> JSONResponse:
        err = QueueUnavailable(f"Redis is unreachable: {exc}")
        return JSONResponse({"error": err.to_dict()}, status_code=err.status)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled_error")
        return JSONResponse(_body("internal_error", "an unexpected error occurred"),
                            status_code=500)
