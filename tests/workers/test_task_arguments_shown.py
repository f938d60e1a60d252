"""What Celery shows of a write (its arguments and result, in task events, so in Flower, and
in its error logs) names the job, never what the user said: the messages reach the worker
before redaction. The job's caller still gets the whole result."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import redis
from celery import Celery
from conftest import redis_db_url
from helpers import wait_job
from up_process import start_up, wait_ready

from memoryd.jobs.names import QUEUE_OF, TaskName
from memoryd.jobs.shown import arguments_shown, shown
from memoryd.memories.locks import user_lock
from memoryd.platform.redis_runtime import free_port
from memoryd.records.models import Owner

SECRET_MAIL = "zhao.lei@example.org"
SECRET_TEXT = "我最喜欢的咖啡店在三里屯"


def test_a_command_is_shown_by_ids_times_and_sizes() -> None:
    text = arguments_shown({"command": {
        "tenant_id": "t1", "user_id": "u1", "request_id": "r1", "thread_id": "th1",
        "received_at": "2026-12-01T05:00:00+00:00", "scope": "global", "extract": "raw",
        "messages": [{"role": "user", "content": f"mail {SECRET_MAIL}"}] * 3,
        "content": SECRET_TEXT, "key": "pet", "tags": ["coffee", "beijing"],
        "metadata": {"note": SECRET_TEXT}, "importance": 7, "project": None,
    }})
    assert SECRET_MAIL not in text and SECRET_TEXT not in text
    assert "coffee" not in text and "pet" not in text
    for part in ("'tenant_id': 't1'", "'user_id': 'u1'", "'thread_id': 'th1'",
                 "'received_at': '2026-12-01T05:00:00+00:00'", "'messages': '<3 items>'",
                 f"'content': '<{len(SECRET_TEXT)} chars>'", "'metadata': '<1 keys>'",
                 "'importance': 7", "'project': None"):
        assert part in text, text


def test_a_result_is_shown_by_outcome_ids_and_sizes() -> None:
    result = {"outcome": "added", "memory_id": "m1", "added": 2,
              "memory": {"id": "m1", "content": SECRET_TEXT}, "memories": [{"c": SECRET_TEXT}]}
    assert shown(result) == {"outcome": "added", "memory_id": "m1", "added": 2,
                             "memory": "<2 keys>", "memories": "<1 items>"}


def test_task_events_of_a_retried_write_carry_no_content(
    redis_server: str, tmp_path: Path
) -> None:
    url = redis_db_url(redis_server, 12)
    broker = redis.Redis.from_url(url)
    broker.flushdb()
    events: list[dict[str, Any]] = []
    listening = threading.Event()
    app = Celery("listener", broker=url, set_as_current=False)

    def listen(receiver_box: list[Any]) -> None:
        with app.connection() as connection:
            receiver = app.events.Receiver(connection, handlers={"*": events.append})
            receiver_box.append(receiver)
            listening.set()
            receiver.capture(limit=None, timeout=None, wakeup=False)

    box: list[Any] = []
    listener = threading.Thread(target=listen, args=(box,), daemon=True)
    listener.start()
    assert listening.wait(10)
    port = free_port()
    proc = start_up(tmp_path / "data", port, {
        "MEMORYD_REDIS_URL": url, "MEMORYD_API_KEYS": "ev-key=tenant-ev",
        "MEMORYD_TASK_EVENTS": "true", "MEMORYD_USER_LOCK_WAIT_S": "0.3",
        "MEMORYD_SEARCH_RECORD_ACCESS": "false"})
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": "Bearer ev-key"}
    try:
        wait_ready(proc, base)
        # The user's lock held here: the job's first run times out on it and is retried.
        with user_lock(broker, Owner(tenant_id="tenant-ev", user_id="u-ev"), 30, 5):
            response = httpx.post(f"{base}/v1/interactions", headers=headers, timeout=30, json={
                "user_id": "u-ev", "thread_id": "th-ev", "extract": "raw", "messages": [
                    {"role": "user", "content": f"my mail is {SECRET_MAIL}, {SECRET_TEXT}"}]})
            assert response.status_code == 202, response.text
            job_id = response.json()["job_id"]
            deadline = time.monotonic() + 60
            while httpx.get(f"{base}/v1/jobs/{job_id}", headers=headers,
                            timeout=10).json()["status"] != "retrying":
                assert time.monotonic() < deadline, "the job was never retried"
                time.sleep(0.05)
        deadline = time.monotonic() + 90
        while (job := httpx.get(f"{base}/v1/jobs/{job_id}", headers=headers,
                                timeout=10).json())["status"] != "succeeded":
            assert job["status"] != "failed", job
            assert time.monotonic() < deadline, job
            time.sleep(0.1)
        deadline = time.monotonic() + 10
        while not any(e.get("type") == "task-succeeded" and e.get("uuid") == job_id
                      for e in list(events)):
            assert time.monotonic() < deadline, "no task-succeeded event"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        if box:
            box[0].should_stop = True
        listener.join(10)

    mine = [e for e in events if e.get("uuid") == job_id]
    kinds = [e["type"] for e in mine]
    assert kinds.count("task-received") >= 2, kinds  # the first run and the retried one
    assert {"task-sent", "task-retried", "task-succeeded"} <= set(kinds), kinds
    for event in mine:
        if event["type"] in ("task-sent", "task-received"):
            assert "'user_id': 'u-ev'" in event["kwargs"], event
            assert "'messages': '<1 items>'" in event["kwargs"], event
    everything = json.dumps(mine, ensure_ascii=False)
    assert SECRET_MAIL not in everything and SECRET_TEXT not in everything
    # The caller still reads what was stored (redacted) from the job.
    assert SECRET_TEXT in json.dumps(job["result"], ensure_ascii=False)
    assert SECRET_MAIL not in json.dumps(job["result"])


def test_a_command_that_does_not_validate_fails_naming_fields_not_values(
    stack: Any, api: httpx.Client, user: str
) -> None:
    # As a gateway of another version might send it: a role this worker does not know.
    job_id = f"job-invalid-{user}"
    command = {"tenant_id": "tenant-a", "user_id": user, "received_at": "2026-12-01T05:00:00Z",
               "scope": "global", "extract": "raw", "store_roles": ["user"],
               "messages": [{"role": "robot", "content": f"my mail is {SECRET_MAIL}"}]}
    assert stack.runtime.jobs.create(job_id, "tenant-a", TaskName.INGEST.value, None)
    stack.runtime.celery.send_task(TaskName.INGEST.value, kwargs={"command": command},
                                   task_id=job_id, queue=QUEUE_OF[TaskName.INGEST].value)
    view = wait_job(api, job_id)
    assert view["status"] == "failed", view
    assert view["attempts"] == 1  # permanent: never retried
    assert view["error"]["code"] == "command_invalid"
    assert view["error"]["field"] == "messages[0].role"  # named as the API names fields
    assert "IngestCommand does not validate: messages[0].role: enum" in view["error"]["message"]
    assert SECRET_MAIL not in json.dumps(view)
