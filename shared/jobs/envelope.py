"""The queue hop's one decoder: what a task's keyword arguments carry, as typed values.

A task's message comes from Redis, so its keyword arguments are whatever JSON was put there:
today's gateway, one of another version, or a hand-made message. Every place that needs
something from them (routing a retry to its queue, a hook's log ids, a job's webhook
events, a failed re-embedding step's job, the command itself) reads it through here
instead of picking the dict apart on its own:

- `envelope(kwargs)` never raises: the hooks that use it run after a task failed, and must
  record that failure whatever the message held. A value of the wrong type reads as absent.
- `parse_command(model, command)` validates a command for the task body, and fails with
  `CommandInvalid` naming fields and reasons, never the values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from memoryd.platform.errors import CommandInvalid, field_path
from memoryd.records.commands import Command

C = TypeVar("C", bound=Command)


class Envelope(BaseModel):
    """A task message's keyword arguments, decoded.

    `command`: the `command` argument as sent (an object), None when absent or not an
    object. `step`: a re-embedding step's argument, likewise. The ids are the command's own
    fields, or those of the request it carries (a command's own field wins), each None
    unless it is a text."""

    model_config = ConfigDict(frozen=True)

    command: dict[str, Any] | None = None
    step: dict[str, Any] | None = None
    request_id: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    # The job a re-embedding step (or its first command) works for: one job over many tasks
    # (shared/index/reindex.py). Other tasks' job id is their task id, not in the arguments.
    job_id: str | None = None
    # Routed to the bulk queue (`memoryd.jobs.names.queue_for`): the client marked it as
    # backfill (on the command or its request), or it overflowed its owner's share at enqueue.
    backfill: bool = False
    overflow: bool = False

    def fields(self) -> dict[str, Any]:
        """The command's fields with those of the request it carries beneath them."""
        return _fields(self.command or {})


def _object(value: Any) -> dict[str, Any] | None:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else None


def _fields(command: Mapping[str, Any]) -> dict[str, Any]:
    request = command.get("request")
    if isinstance(request, Mapping):
        return {**{str(k): v for k, v in request.items()}, **command}
    return dict(command)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def envelope(kwargs: Any) -> Envelope:
    """`kwargs` (Celery's task keyword arguments, or anything else) decoded; never raises."""
    arguments = _object(kwargs) or {}
    command = _object(arguments.get("command"))
    step = _object(arguments.get("step"))
    fields = _fields(command) if command is not None else {}
    request = _object(command.get("request")) if command is not None else None
    named = step or command
    return Envelope(
        command=command,
        step=step,
        request_id=_text(fields.get("request_id")),
        tenant_id=_text(fields.get("tenant_id")),
        user_id=_text(fields.get("user_id")),
        job_id=_text(named.get("job_id")) if named is not None else None,
        backfill=(command is not None and command.get("backfill") is True)
        or (request is not None and request.get("backfill") is True),
        overflow=command is not None and command.get("overflow") is True,
    )


def parse_command(model: type[C], command: Any) -> C:
    """The command as its model, or `CommandInvalid` with the failing fields and reasons: a
    validation error's own text quotes the input, the user's messages before redaction, and
    it would reach the job's error, the logs and task events."""
    try:
        return model.model_validate(command)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        # The request a command carries is named by its own fields, as the API names them.
        locs = [e["loc"][1:] if e["loc"][:1] == ("request",) else e["loc"] for e in errors]
        problems = "; ".join(f"{field_path(loc) or 'command'}: {e['type']}"
                             for loc, e in zip(locs, errors[:10], strict=False))
        raise CommandInvalid(f"the task's {model.__name__} does not validate: {problems}",
                             field=field_path(locs[0]) or None) from None
