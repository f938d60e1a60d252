"""The `Retry-After` header, read the same way wherever memoryd is told to wait: by an LLM
provider, or by a memoryd gateway the Python client talks to."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


def retry_after(value: str | None) -> float | None:
    """Seconds to wait: delta-seconds or an HTTP date (a past date is 0); None if absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)
