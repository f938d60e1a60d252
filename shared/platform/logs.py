"""structlog, configured once per process; stdlib loggers (uvicorn, celery) routed through it."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
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
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> Any:
    return structlog.stdlib.get_logger(name)
