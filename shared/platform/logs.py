"""structlog, configured once per process; stdlib loggers (uvicorn, celery) routed through it."""

from __future__ import annotations

import logging
import re
import sys
import traceback
from collections.abc import MutableMapping
from types import TracebackType
from typing import Any

import structlog

_configured = False

# `scheme://[user]:password@host`: the password part of any URL's userinfo, up to the last
# `@` before the host (a password may itself hold `@` or `:`).
_URL_PASSWORD = re.compile(
    r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/@:]*):(?P<password>[^\s/]*)@(?=[^\s@/]*(?:[/\s]|$))"
)


def mask_url_passwords(text: str) -> str:
    """Every URL password in `text` shown as `***` (`redis://:***@host`,
    `redis://user:***@host`): the one helper for logs, error messages and banners."""
    if "://" not in text:
        return text
    return _URL_PASSWORD.sub(r"\g<head>:***@", text)


def _mask_value(value: Any) -> Any:
    if isinstance(value, str):
        return mask_url_passwords(value)
    if isinstance(value, dict):
        return {k: _mask_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_mask_value(v) for v in value)
    return value


def mask_passwords(_logger: Any, _name: str, event: MutableMapping[str, Any]
                   ) -> MutableMapping[str, Any]:
    """structlog processor: URL passwords masked in every field, tracebacks included."""
    for key, value in event.items():
        event[key] = _mask_value(value)
    return event


# Exceptions whose message is shown in logs: they are about the connection or the process,
# never about a request's text (an OSError names a path or an address), and memoryd's own
# errors, whose messages are written to name fields, never to quote memory text. Every other
# exception's message and arguments are withheld: a UnicodeEncodeError, a ValueError or a
# KeyError raised over a request quotes the text it choked on (issue 31: a lone surrogate
# logged a memory's content in the exception).
_SHOWN_MODULES = ("redis.", "kombu.", "amqp.", "celery.exceptions", "billiard.exceptions")


def _message_shown(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return True
    for cls in type(exc).__mro__:
        module = cls.__module__ or ""
        if module == "memoryd.platform.errors" and cls.__name__ == "AppError":
            return True
        if module.startswith(_SHOWN_MODULES) and cls is type(exc):
            return True
    return False


def _exception_of(exc_info: Any) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        return exc_info[1] if isinstance(exc_info[1], BaseException) else None
    if exc_info is True:
        return sys.exc_info()[1]
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and those it was raised from or during, outermost last."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__
                                        else current.__context__)
    return chain[::-1]


def exception_summary(exc: BaseException) -> str:
    """`Type: message`, or `Type (message withheld…)` when the message may quote request
    text: for logs, and for a job's `internal_error`, which the job record keeps."""
    return _headline(exc)


def _headline(exc: BaseException) -> str:
    name = type(exc).__qualname__
    module = type(exc).__module__
    name = name if module in ("builtins", "__main__") else f"{module}.{name}"
    if _message_shown(exc):
        return f"{name}: {mask_url_passwords(str(exc))}"
    return f"{name} (message withheld: it may quote request text)"


def safe_traceback(exc: BaseException) -> str:
    """The traceback of `exc` and its chain, frames as usual, each exception shown by its
    type (and its message only when `_message_shown`)."""
    parts: list[str] = []
    for i, link in enumerate(_chain(exc)):
        if i:
            parts.append("\nThe above exception led to the following one:\n\n")
        tb: TracebackType | None = link.__traceback__
        if tb is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_list(traceback.extract_tb(tb)))
        parts.append(_headline(link) + "\n")
    return "".join(parts).rstrip("\n")


def _scrub(value: Any, texts: list[str]) -> Any:
    if isinstance(value, str):
        for text in texts:
            if text in value:
                value = value.replace(text, "<withheld>")
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, texts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_scrub(v, texts) for v in value)
    return value


def withhold_exception_text(_logger: Any, _name: str, event: MutableMapping[str, Any]
                            ) -> MutableMapping[str, Any]:
    """structlog processor: an event's exception logged without its message or arguments.

    `exc_info` becomes `exception`, rendered by `safe_traceback`; where the event's own text
    quotes the exception (Celery's "Task … raised unexpected: UnicodeEncodeError('utf-8',
    '<the memory>', …)"), that quotation is replaced by `<withheld>`. Runs before structlog's
    own `format_exc_info`, which then has nothing left to render.
    """
    exc_info = event.pop("exc_info", None)
    exc = _exception_of(exc_info)
    if exc is None:
        return event
    withheld = [e for e in _chain(exc) if not _message_shown(e)]
    texts: list[str] = []
    for e in withheld:
        for text in (repr(e), str(e), *(a for a in e.args if isinstance(a, str))):
            if len(text) >= 4 and text not in texts:
                texts.append(text)
    texts.sort(key=len, reverse=True)  # the repr before the message it holds
    for key, value in list(event.items()):
        if key != "_record":
            event[key] = _scrub(value, texts)
    event["exception"] = safe_traceback(exc)
    return event


def configure_logging(level: str = "INFO", json: bool | None = None) -> None:
    global _configured
    if _configured:
        return
    _configured = True
    as_json = (not sys.stderr.isatty()) if json is None else json
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            withhold_exception_text,
            structlog.processors.format_exc_info,
            mask_passwords,
            renderer,
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # A library's warning is a log record too: it goes out in the same format, not as a
    # bare line of its own.
    logging.captureWarnings(True)
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> Any:
    return structlog.stdlib.get_logger(name)
