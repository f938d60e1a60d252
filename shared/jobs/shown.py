"""What Celery shows of a task: its arguments and its return value, without content.

Celery puts a text form of a task's arguments (`argsrepr`, `kwargsrepr`) into the message,
and from there into task events (so Flower's task pages) and its own error logs; the
`task-succeeded` event carries a text form of the return value. By default those are the
arguments and the value themselves: a write's messages before redaction (redaction runs in
the worker), and the memories it stored. So the tasks memoryd sends, and their retries,
carry forms with ids, modes, times, counts and sizes instead, and a job's task returns such
a form too, while the job's full result goes to the job store for `GET /v1/jobs/{id}`:
enough to find a job in Flower, nothing of what the user said. Sending a form also spares
the gateway Celery's `saferepr` of the messages (about 0.08 ms of its CPU per enqueue, a
one-off timing loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Text fields shown as they are: identifiers, modes, outcomes and times, never content.
SHOWN = frozenset({
    "tenant_id", "user_id", "request_id", "thread_id", "memory_id", "job_id", "scope",
    "project", "extract", "type", "source", "received_at", "occurred_at", "before", "after",
    "expires_at", "outcome", "duplicate_of", "supersedes", "status", "delivery_id",
})
MAX_SHOWN_CHARS = 80


def _size(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"<{len(value)} keys>"
    if isinstance(value, list | tuple):
        return f"<{len(value)} items>"
    return f"<{len(str(value))} chars>"


def _field(key: str, value: Any) -> Any:
    """A scalar, an identifying text, or the size of anything else."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and key in SHOWN:
        return value[:MAX_SHOWN_CHARS]
    return _size(value)


def shown(values: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping's fields as Celery may show them (a job's result, a command). A command's
    `request` (the request it carries) is shown field by field among its own."""
    request = values.get("request")
    merged = ({**request, **{k: v for k, v in values.items() if k != "request"}}
              if isinstance(request, Mapping) else values)
    return {str(key): _field(str(key), value) for key, value in merged.items()}


def arguments_shown(kwargs: Mapping[str, Any]) -> str:
    """A task's keyword arguments for `kwargsrepr`: each command shown field by field."""
    return repr({str(key): shown(value) if isinstance(value, Mapping) else _field(str(key), value)
                 for key, value in kwargs.items()})
