"""Shares of the memory queue (shared/jobs/lanes.py) and where an enqueued write goes
(shared/jobs/enqueue.py, shared/jobs/names.py), against a real Redis and a real Celery
publish."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis
from conftest import redis_db_url

from memoryd.jobs.celery_app import create_app
from memoryd.jobs.enqueue import submit
from memoryd.jobs.job_store import JobStore
from memoryd.jobs.lanes import Lanes, Shares, tenant_key, user_key
from memoryd.jobs.names import QueueName, TaskName, queue_for
from memoryd.platform.settings import Settings
from memoryd.records.commands import SaveCommand
from memoryd.records.schemas import SaveRequest

DB = 5  # a database of its own (the suite runs files in parallel)


@pytest.fixture()
def client(redis_server: str) -> Iterator[redis.Redis]:
    r = redis.Redis.from_url(redis_db_url(redis_server, DB))
    r.flushdb()
    try:
        yield r
    finally:
        r.flushdb()
        r.close()


def _job(jobs: JobStore, tenant: str, user: str) -> str:
    job_id = str(uuid.uuid4())
    assert jobs.create(job_id, tenant, TaskName.SAVE.value, None, user)
    return job_id


def test_a_tenant_holds_at_most_its_share(client: redis.Redis) -> None:
    jobs = JobStore(client, 3600)
    lanes = Lanes(client, Shares(tenant=2, user=2, lapse_s=900))
    first, second, third = (_job(jobs, "t-a", f"u{i}") for i in range(3))
    assert lanes.admit(first, "t-a", "u0")
    assert lanes.admit(second, "t-a", "u1")
    assert not lanes.admit(third, "t-a", "u2")  # the tenant's share is full
    # Another tenant's write is not counted against tenant a's share.
    assert lanes.admit(_job(jobs, "t-b", "u0"), "t-b", "u0")
    assert lanes.held("t-a") == 2
    # An ended job frees its place (failed ones too), found from its job record.
    jobs.mark_succeeded(first, {"added": 0})
    assert lanes.admit(third, "t-a", "u2")
    jobs.mark_failed(second, {"code": "x", "message": "y"})
    assert lanes.admit(_job(jobs, "t-a", "u3"), "t-a", "u3")
    assert not lanes.admit(_job(jobs, "t-a", "u4"), "t-a", "u4")


def test_a_user_holds_at_most_the_user_share(client: redis.Redis) -> None:
    jobs = JobStore(client, 3600)
    lanes = Lanes(client, Shares(tenant=3, user=1, lapse_s=900))
    assert lanes.admit(_job(jobs, "t-a", "busy"), "t-a", "busy")
    assert not lanes.admit(_job(jobs, "t-a", "busy"), "t-a", "busy")
    # The same tenant's other users still have their place.
    assert lanes.admit(_job(jobs, "t-a", "quiet"), "t-a", "quiet")
    assert lanes.held("t-a", "busy") == 1


def test_a_discarded_or_lapsed_job_stops_counting(client: redis.Redis) -> None:
    jobs = JobStore(client, 3600)
    lanes = Lanes(client, Shares(tenant=1, user=1, lapse_s=900))
    gone = _job(jobs, "t-a", "u")
    assert lanes.admit(gone, "t-a", "u")
    jobs.discard(gone)  # its publish failed: no record, no place
    stuck = _job(jobs, "t-a", "u")
    assert lanes.admit(stuck, "t-a", "u")
    # A job whose end is never recorded lapses with its entry's score.
    client.zadd(tenant_key("t-a"), {stuck: 1.0})
    client.zadd(user_key("t-a", "u"), {stuck: 1.0})
    assert lanes.admit(_job(jobs, "t-a", "u"), "t-a", "u")


def test_keys_of_different_names_never_meet() -> None:
    assert user_key("a:b", "c") != user_key("a", "b:c")
    assert tenant_key("a") != tenant_key("a:")


def test_an_overflowed_command_keeps_the_bulk_queue() -> None:
    command = {"tenant_id": "t", "user_id": "u", "request": {"content": "x"}}
    assert queue_for(TaskName.SAVE, {"command": command}) is QueueName.MEMORY
    assert queue_for(TaskName.SAVE, {"command": {**command, "overflow": True}}) is QueueName.BULK
    assert queue_for(TaskName.INGEST, {"command": {
        **command, "request": {"backfill": True}}}) is QueueName.BULK


def _save(tenant: str, user: str) -> SaveCommand:
    return SaveCommand(tenant_id=tenant, user_id=user, received_at=datetime.now(UTC),
                       request=SaveRequest(user_id=user, content="my locker is 12"))


def test_submit_routes_beyond_the_share_to_the_bulk_queue(
    client: redis.Redis, redis_server: str
) -> None:
    url = redis_db_url(redis_server, DB)
    app = create_app(Settings(redis_url=url))
    jobs = JobStore(client, 3600)
    lanes = Lanes(client, Shares(tenant=2, user=1, lapse_s=900))
    try:
        for _ in range(5):  # one user's flood: one on the memory queue, four beyond it
            submit(jobs, app, TaskName.SAVE, _save("t-a", "flood"), lanes=lanes)
        submit(jobs, app, TaskName.SAVE, _save("t-a", "other"), lanes=lanes)
        submit(jobs, app, TaskName.SAVE, _save("t-a", "third"), lanes=lanes)  # tenant full
        submit(jobs, app, TaskName.SAVE, _save("t-b", "saver"), lanes=lanes)
        # A caller without lanes keeps the memory queue.
        submit(jobs, app, TaskName.SAVE, _save("t-a", "flood"))
        memory = [json.loads(m) for m in client.lrange(QueueName.MEMORY.value, 0, -1)]
        bulk = [json.loads(m) for m in client.lrange(QueueName.BULK.value, 0, -1)]
    finally:
        app.close()

    def owners(messages: list[dict[str, object]]) -> list[tuple[str, str]]:
        found = []
        for message in messages:
            body = json.loads(base64.b64decode(str(message["body"])))
            command = body[1]["command"]
            found.append((command["tenant_id"], command["user_id"]))
        return sorted(found)

    assert owners(memory) == sorted([("t-a", "flood"), ("t-a", "other"), ("t-b", "saver"),
                                     ("t-a", "flood")])
    assert owners(bulk) == sorted([("t-a", "flood")] * 4 + [("t-a", "third")])
