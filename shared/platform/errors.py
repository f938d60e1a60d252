"""The one error hierarchy. Each error carries a stable code and an HTTP status.

The gateway renders any `AppError` as `{"error": {"code", "message", "field"?}}`;
workers retry `TransientError` and fail the job on `PermanentError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from memoryd.platform.logs import mask_url_passwords


def field_path(parts: Iterable[Any]) -> str:
    """A pydantic error location as error bodies name fields: `messages[0].role`."""
    path = ""
    for part in map(str, parts):
        path += f"[{part}]" if part.isdigit() else (f".{part}" if path else part)
    return path


class AppError(Exception):
    code: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None):
        # Messages reach clients, logs and job records: never with a URL's password.
        message = mask_url_passwords(message)
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code  # type: ignore[misc]

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


class InvalidInput(AppError):
    code = "invalid_input"
    status = 422


class PayloadTooLarge(AppError):
    code = "payload_too_large"
    status = 413


class Unauthorized(AppError):
    code = "unauthorized"
    status = 401


class NotFound(AppError):
    code = "not_found"
    status = 404


class Conflict(AppError):
    code = "conflict"
    status = 409


class ExtractorUnavailable(AppError):
    code = "extractor_unavailable"
    status = 422


class RerankerNotConfigured(AppError):
    code = "reranker_not_configured"
    status = 422


class TransientError(AppError):
    """Worth retrying: a dependency is down or overloaded."""

    code = "service_unavailable"
    status = 503


class StoreUnavailable(TransientError):
    code = "store_unavailable"


class QueueUnavailable(TransientError):
    code = "queue_unavailable"


class EmbedderUnavailable(TransientError):
    code = "embedder_unavailable"


class RerankerUnavailable(TransientError):
    code = "reranker_unavailable"


class LockTimeout(TransientError):
    code = "lock_timeout"


class PermanentError(AppError):
    """Retrying cannot help: the job fails with this reason."""

    code = "permanent_failure"
    status = 500


class EmbedderError(PermanentError):
    code = "embedder_error"


class CommandInvalid(PermanentError):
    """A task's command does not validate in the worker (a gateway of another version sent
    it): the job fails naming the fields, never echoing their values."""

    code = "command_invalid"


class StoreRejected(PermanentError):
    """Qdrant refused a request (4xx): its answer is the reason."""

    code = "store_rejected"


class ConfigurationError(PermanentError):
    code = "configuration_error"


class EmbeddingModelMismatch(ConfigurationError):
    code = "embedding_model_mismatch"


class LLMUnavailable(TransientError):
    """The model timed out, could not be reached or answered 5xx."""

    code = "llm_unavailable"


class LLMRateLimited(TransientError):
    code = "llm_rate_limited"

    def __init__(self, message: str, *, retry_after_s: float | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.retry_after_s = retry_after_s

    def to_dict(self) -> dict[str, Any]:
        body = super().to_dict()
        if self.retry_after_s is not None:
            body["retry_after_s"] = self.retry_after_s
        return body


class LLMRejected(PermanentError):
    """The provider refused the request (4xx other than 429): its message is the reason."""

    code = "llm_rejected"


class LLMReplyInvalid(PermanentError):
    """The model's reply never parsed; the (redacted) reply is kept for the failed-jobs view."""

    code = "llm_reply_invalid"

    def __init__(self, message: str, *, reply: str = "", **kw: Any):
        super().__init__(message, **kw)
        self.reply = reply

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "reply": self.reply}


def _all_subclasses(cls: type[AppError]) -> list[type[AppError]]:
    found: list[type[AppError]] = []
    for sub in cls.__subclasses__():
        found.extend([sub, *_all_subclasses(sub)])
    return found


def error_from_body(body: dict[str, Any] | None) -> AppError:
    """Rebuild the error a job failed with, so a waiting caller gets its code and status."""
    body = body or {}
    code = str(body.get("code", "permanent_failure"))
    message = str(body.get("message", "the job failed"))
    for sub in _all_subclasses(AppError):
        if sub.code == code:
            return sub(message, field=body.get("field"))
    return PermanentError(message, field=body.get("field"), code=code)


class Forbidden(AppError):
    code = "forbidden"
    status = 403


class RateLimited(AppError):
    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class EmbedderNotAllowed(InvalidInput):
    """A re-embedding asked for an embedder the deployment does not list
    (`MEMORYD_REINDEX_EMBEDDERS`): refused before anything is built or fetched."""

    code = "embedder_not_allowed"


class Forgotten(PermanentError):
    """A forget that came after this job was accepted covers what it would write: the job
    writes nothing and fails with this reason (retrying cannot help)."""

    code = "forgotten"
    status = 409


class IdempotencyConflict(Conflict):
    """An idempotency key was used again for a different request (another body)."""

    code = "idempotency_conflict"


class JobTimeLimit(PermanentError):
    """A job ran past its soft or hard time limit (`job_soft_time_limit_s`,
    `job_time_limit_s`): it fails and is listed with the failed jobs, never run again on
    its own (a stuck job would only get stuck again)."""

    code = "time_limit"


class JobRunning(TransientError):
    """Another delivery of the same job holds its running lease: this one waits for it
    instead of running beside it."""

    code = "job_running"
