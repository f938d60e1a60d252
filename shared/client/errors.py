"""What the client raises: one class per kind of failure, each with the API's code,
message and field, so a caller can branch on `code` without parsing text."""

from __future__ import annotations

from typing import Any


class MemorydError(Exception):
    """Base of everything the client raises."""

    def __init__(self, message: str, *, code: str = "client_error", field: str | None = None,
                 status: int | None = None, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field
        self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        where = f" (field {self.field})" if self.field else ""
        return f"{self.code}: {self.message}{where}"


class InvalidArgument(MemorydError):
    """Refused by the client before any request: an argument that cannot be what it names
    (an id that is not an id). Code `invalid_input`, as the gateway's own refusals."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, code="invalid_input", field=field)


class ApiError(MemorydError):
    """The gateway answered with an error body `{"error": {code, message, field}}`."""


class BadRequest(ApiError):
    """400, 413, 422: the input was refused; nothing was stored."""


class Unauthorized(ApiError):
    """401: missing or unknown API key."""


class NotFound(ApiError):
    """404: no such memory, job or route (for this tenant and user)."""


class Unavailable(ApiError):
    """503 or 429, still so after the retries: Redis, the store or the embedder is down."""


class ServerError(ApiError):
    """Any other 5xx."""


class ConnectionFailed(MemorydError):
    """Nothing answered at the base URL: the stack is down or the URL is wrong."""


class JobTimeout(MemorydError):
    """`wait()` gave up before the job ended; `job` is the last state seen."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message, code="job_timeout")
        self.job = job


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 404: NotFound, 413: BadRequest, 422: BadRequest,
    429: Unavailable, 503: Unavailable,
}


def api_error(status: int, body: Any, request_id: str | None = None) -> ApiError:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {"code": f"http_{status}", "message": f"HTTP {status}"}
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(str(error.get("message", f"HTTP {status}")), code=str(error.get("code", "")),
               field=error.get("field"), status=status, request_id=request_id)
