"""A command carries the request it came from (shared/records/commands.py). Jobs queued by
the earlier version, with the request's fields at the top level, still run after an
upgrade; today's form is what the gateway sends."""

from __future__ import annotations

from typing import Any

import httpx
from helpers import wait_job

from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.records.commands import IngestCommand, SaveCommand


def _send(stack: Any, task: TaskName, job_id: str, command: dict[str, Any]) -> None:
    assert stack.runtime.jobs.create(job_id, "tenant-a", task.value, None)
    stack.runtime.celery.send_task(task.value, kwargs={"command": command}, task_id=job_id,
                                   queue=QUEUE_OF[task].value)


def test_commands_queued_in_the_earlier_form_still_run(
    stack: Any, api: httpx.Client, user: str
) -> None:
    ingest = {"tenant_id": "tenant-a", "user_id": user, "received_at": "2026-12-01T05:00:00Z",
              "scope": "global", "extract": "raw", "store_roles": ["user"], "thread_id": "t-1",
              "messages": [{"role": "user", "content": "My sister Ines plays the cello"}]}
    save = {"tenant_id": "tenant-a", "user_id": user, "received_at": "2026-12-01T05:00:00Z",
            "content": "The user keeps bees on the roof", "type": "semantic",
            "scope": "global", "tags": ["home"], "importance": 7, "source": "explicit"}
    _send(stack, TaskName.INGEST, f"flat-ingest-{user}", ingest)
    _send(stack, TaskName.SAVE, f"flat-save-{user}", save)
    done = [wait_job(api, f"flat-ingest-{user}"), wait_job(api, f"flat-save-{user}")]
    assert [job["status"] for job in done] == ["succeeded", "succeeded"], done
    listed = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    stored = {m["content"]: m for m in listed}
    assert stored["My sister Ines plays the cello"]["thread_id"] == "t-1"
    assert stored["The user keeps bees on the roof"]["tags"] == ["home"]
    assert stored["The user keeps bees on the roof"]["importance"] == 7


def test_the_earlier_form_reads_as_todays() -> None:
    flat = {"tenant_id": "t", "user_id": "u", "received_at": "2026-12-01T05:00:00Z",
            "scope": "project", "project": "p1", "extract": "rules", "store_roles": ["user"],
            "backfill": True, "messages": [{"role": "user", "content": "hi there"}]}
    old = IngestCommand.model_validate(flat)
    assert (old.extract.value, old.scope.value, old.project, old.backfill) == (
        "rules", "project", "p1", True)
    today = old.model_dump(mode="json")
    assert [m["content"] for m in today["request"]["messages"]] == ["hi there"]
    assert "messages" not in today and today["extract"] == "rules"
    assert IngestCommand.model_validate(today) == old
    save = SaveCommand.model_validate({"tenant_id": "t", "user_id": "u",
                                       "received_at": "2026-12-01T05:00:00Z",
                                       "content": "x y z", "type": "episodic",
                                       "scope": "global", "tags": [], "importance": 3})
    assert (save.content, save.type.value, save.importance) == ("x y z", "episodic", 3)
    assert SaveCommand.model_validate(save.model_dump(mode="json")) == save
