"""The queue hop's one decoder (shared/jobs/envelope.py): what every place after the queue
reads from a task's keyword arguments, on today's messages, an earlier version's, and ones
that are not what they should be."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd.jobs.envelope import Envelope, envelope, parse_command
from memoryd.jobs.names import QueueName, TaskName, queue_for
from memoryd.platform.errors import CommandInvalid
from memoryd.records.commands import IngestCommand, SaveCommand

SECRET = "my card is 4111 1111 1111 1111"

TODAY = {"command": {
    "tenant_id": "tenant-a", "user_id": "u-1", "request_id": "req-1",
    "received_at": "2026-12-01T05:00:00Z", "extract": "raw",
    "request": {"user_id": "u-1", "thread_id": "t-1", "backfill": True,
                "messages": [{"role": "user", "content": SECRET}]},
}}


def test_todays_command_is_decoded() -> None:
    sent = envelope(TODAY)
    assert sent == Envelope(command=TODAY["command"], request_id="req-1", tenant_id="tenant-a",
                            user_id="u-1", backfill=True)
    assert sent.fields()["thread_id"] == "t-1"  # the request's fields beneath the command's
    assert queue_for(TaskName.INGEST, TODAY) is QueueName.BULK
    parsed = parse_command(IngestCommand, sent.command)
    assert (parsed.request_id, parsed.thread_id, parsed.backfill) == ("req-1", "t-1", True)


def test_an_earlier_versions_flat_command_is_decoded() -> None:
    flat = {"command": {"tenant_id": "t", "user_id": "u", "received_at": "2026-12-01T05:00:00Z",
                        "content": "x", "type": "semantic", "scope": "global", "tags": [],
                        "importance": 3, "backfill": True}}
    sent = envelope(flat)
    assert (sent.tenant_id, sent.user_id, sent.request_id, sent.backfill) == (
        "t", "u", None, True)


def test_overflow_and_the_plain_queue() -> None:
    command = {"tenant_id": "t", "user_id": "u"}
    assert queue_for(TaskName.SAVE, {"command": command}) is QueueName.MEMORY
    assert envelope({"command": {**command, "overflow": True}}).overflow
    assert queue_for(TaskName.SAVE, {"command": {**command, "overflow": True}}) is QueueName.BULK
    # Only `true` routes: a text or a number is not a mark.
    assert queue_for(TaskName.SAVE, {"command": {**command, "overflow": "yes"}}) is (
        QueueName.MEMORY)
    assert queue_for(TaskName.EXTRACT_LLM, {}) is QueueName.LLM


def test_a_reindex_step_names_its_job() -> None:
    assert envelope({"step": {"job_id": "reindex-1", "offset": 3}}).job_id == "reindex-1"
    assert envelope({"command": {"job_id": "reindex-2"}}).job_id == "reindex-2"
    assert envelope({"step": {"job_id": 7}}).job_id is None


@pytest.mark.parametrize("kwargs", [
    None, "command", 42, [], {}, {"command": None}, {"command": "text"},
    {"command": ["tenant_id", "t"]}, {"command": {"request": "not an object"}},
    {"command": {"tenant_id": 5, "user_id": ["u"], "request_id": {"a": 1}}},
    {"step": "x", "command": 3},
])
def test_malformed_arguments_read_as_absent_and_never_raise(kwargs: Any) -> None:
    sent = envelope(kwargs)
    assert (sent.request_id, sent.tenant_id, sent.user_id, sent.job_id) == (
        None, None, None, None)
    assert not sent.backfill and not sent.overflow
    assert queue_for(TaskName.SAVE, kwargs if isinstance(kwargs, dict) else {}) is (
        QueueName.MEMORY)


@pytest.mark.parametrize("command", [
    None, "text", [], {},
    {"tenant_id": "t", "user_id": "u", "received_at": "not a time", "content": SECRET,
     "type": "semantic", "scope": "nowhere", "tags": [], "importance": 3},
])
def test_a_command_that_does_not_validate_fails_naming_fields_never_values(
    command: Any
) -> None:
    with pytest.raises(CommandInvalid) as caught:
        parse_command(SaveCommand, command)
    error = caught.value.to_dict()
    assert error["code"] == "command_invalid"
    assert "SaveCommand does not validate" in error["message"]
    assert SECRET not in str(error) and "nowhere" not in str(error)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_the_failing_fields_are_named_as_the_api_names_them() -> None:
    bad = {**TODAY["command"], "request": {"user_id": "u-1", "messages": [{"role": "robot",
                                                                           "content": SECRET}]}}
    with pytest.raises(CommandInvalid) as caught:
        parse_command(IngestCommand, bad)
    assert caught.value.field == "messages[0].role"
    assert SECRET not in str(caught.value)
