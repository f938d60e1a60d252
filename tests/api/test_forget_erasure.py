"""Forget means gone: from job results, from failed jobs' kept arguments, from what a job
accepted before the forget would still write, and from every byte on disk."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import wait_job

from memoryd.platform import failpoints
from ops.chaos.common import FakeOpenAIEmbeddings
from ops.chaos.erasure import forgotten_text_erased
from ops.chaos.procs import UpStack
from ops.stack import wait_until


def enqueue_save(api: httpx.Client, user: str, content: str, **fields: Any) -> str:
    answer = api.post("/v1/memories", json={"user_id": user, "content": content, **fields})
    assert answer.status_code == 202, answer.text
    return str(answer.json()["job_id"])


def forget(api: httpx.Client, user: str, **params: Any) -> dict[str, Any]:
    answer = api.delete("/v1/memories", params={"user_id": user, "wait": 30, **params})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def contents(api: httpx.Client, user: str) -> list[str]:
    page = api.get("/v1/memories", params={"user_id": user, "limit": 200})
    assert page.status_code == 200, page.text
    return [item["content"] for item in page.json()["items"]]


def test_forget_all_blanks_the_text_in_job_results(api: httpx.Client, user: str) -> None:
    word = f"qxresult{uuid.uuid4().hex[:8]}"
    saved = enqueue_save(api, user, f"My locker word is {word}")
    ingested = api.post("/v1/interactions", json={
        "user_id": user, "extract": "raw",
        "messages": [{"role": "user", "content": f"Remember {word} too"}]}).json()["job_id"]
    for job_id in (saved, ingested):
        done = wait_job(api, job_id)
        assert done["status"] == "succeeded" and word in str(done["result"])  # the text was there
    memory_id = wait_job(api, saved)["result"]["memory"]["id"]

    assert forget(api, user, all="true")["deleted"] == 2
    for job_id in (saved, ingested):
        after = api.get(f"/v1/jobs/{job_id}")
        assert after.status_code == 200 and after.json()["status"] == "succeeded"
        assert word not in after.text
    # What stays is what happened: ids and outcomes.
    kept = api.get(f"/v1/jobs/{saved}").json()["result"]
    assert kept["outcome"] == "added" and kept["memory"]["id"] == memory_id
    assert kept["memory"]["content"] == ""


def test_forget_blanks_every_field_of_job_results(api: httpx.Client, user: str) -> None:
    """On 204bae7 a forget blanked `content` but kept `tags`, `metadata` and the slot
    `key` of the user's job results."""
    word = f"qxfields{uuid.uuid4().hex[:8]}"
    saved = enqueue_save(api, user, "My locker is on floor three", key=f"locker-{word}",
                         tags=[f"tag-{word}"], metadata={"note": f"meta {word}",
                                                         "nested": {"deep": word}})
    done = wait_job(api, saved)
    assert done["status"] == "succeeded" and str(done["result"]).count(word) >= 3
    assert forget(api, user, all="true")["deleted"] == 1
    after = api.get(f"/v1/jobs/{saved}")
    assert after.status_code == 200 and word not in after.text
    memory = after.json()["result"]["memory"]
    assert (memory["key"], memory["tags"], memory["metadata"]) == ("", [], {})
    assert memory["id"] == done["result"]["memory"]["id"]


# ---- a stack whose embedder can be stopped, and paused (a failpoint) --------------------


@pytest.fixture(scope="module")
def paused_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UpStack, Any]]:
    """`memoryd up` on the fake embedding API; `embed.documents` pauses a write for 3 s
    once its marker file is removed (it starts present: nothing pauses). Every forget
    compacts before it answers (bound 0)."""
    work = tmp_path_factory.mktemp("forget-stack")
    fp_dir = work / "failpoints"
    fp_dir.mkdir()
    (fp_dir / failpoints.EMBED_DOCUMENTS).write_text("0")
    fake = FakeOpenAIEmbeddings().start()
    stack = UpStack("forget", work / "data", work, embedder="openai:fake-embed",
                    openai_base_url=fake.base_url, failpoints=failpoints.EMBED_DOCUMENTS,
                    failpoint_dir=fp_dir, failpoint_pause_s=3, task_max_retries=0,
                    task_unavailable_max_retries=0, worker_concurrency=4,
                    erasure_compaction_s=0, log_level="INFO")
    try:
        stack.start()
        yield stack, fake
    finally:
        stack.stop()
        fake.stop()


def test_job_accepted_before_a_forget_writes_nothing(paused_stack: tuple[UpStack, Any]) -> None:
    stack, _ = paused_stack
    fp_dir = Path(stack.settings["failpoint_dir"])  # type: ignore[arg-type]
    user = f"paused-{uuid.uuid4().hex[:8]}"
    with stack.client() as api:
        (fp_dir / failpoints.EMBED_DOCUMENTS).unlink()  # the next write pauses
        job_id = enqueue_save(api, user, "My bank PIN hint is the blue door")
        wait_until(lambda: failpoints.reached(fp_dir, failpoints.EMBED_DOCUMENTS) is not None,
                   30, "the save to pause before its write")
        # The save is mid-run (embedding) when the user forgets everything.
        assert forget(api, user, all="true")["deleted"] == 0
        done = wait_job(api, job_id)
        assert done["status"] == "failed" and done["error"]["code"] == "forgotten", done
        assert contents(api, user) == []
        # It kept no arguments: a retry cannot bring the text back either.
        retried = api.post(f"/v1/jobs/{job_id}/retry")
        assert retried.status_code == 409 and retried.json()["error"]["code"] == "conflict"
        # A job accepted after the forget writes as usual.
        assert wait_job(api, enqueue_save(api, user, "I moved to Porto"))["status"] == "succeeded"
        assert contents(api, user) == ["I moved to Porto"]


def test_failed_job_then_forget_then_retry_stores_nothing(
    paused_stack: tuple[UpStack, Any],
) -> None:
    stack, fake = paused_stack
    user, other = f"failed-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    with stack.client() as api:
        fake.stop()  # the embedding API is down: these saves fail at once (no retries)
        try:
            gone = enqueue_save(api, user, "My diary password hint is 'tangerine'",
                                thread_id="t-gone")
            all_gone = enqueue_save(api, other, "My cat is called Pixel")
            kept = enqueue_save(api, user, "I play the cello on Sundays", thread_id="t-keep")
            for job_id in (gone, kept, all_gone):
                failed = wait_job(api, job_id)
                assert failed["status"] == "failed", failed
                assert failed["error"]["code"] == "embedder_unavailable"
        finally:
            fake.start()
        # Forgetting a thread drops that thread's failed job's text, not the other one's;
        # forgetting everything of a user drops all of theirs.
        forget(api, user, thread_id="t-gone")
        forget(api, other, all="true")
        for job_id in (gone, all_gone):
            retried = api.post(f"/v1/jobs/{job_id}/retry")
            assert retried.status_code == 409, retried.text
            assert retried.json()["error"]["code"] == "conflict"
        assert api.post(f"/v1/jobs/{kept}/retry").status_code == 202
        assert "erasure_compacted" in stack.log_path.read_text(errors="replace")
        assert wait_job(api, kept)["status"] == "succeeded"
        assert contents(api, user) == ["I play the cello on Sundays"]
        assert contents(api, other) == []
        listed = api.get("/v1/jobs", params={"status": "failed", "limit": 200}).json()["items"]
        assert all(j["payload_bytes"] == 0 for j in listed if j["job_id"] in (gone, all_gone))


@pytest.mark.parametrize(("bound_s", "operator"), [(2.0, False), (0.0, True)],
                         ids=["periodic", "memoryd-erase"])
def test_forgotten_markers_leave_every_byte_on_disk(
    tmp_path: Path, bound_s: float, operator: bool,
) -> None:
    """The chaos scenario at a small size: markers saved, forgotten and compacted (by the
    periodic task, or by `memoryd erase`), then none in the data directory or the logs;
    the kept ones are still there. (At bound 0 the forget compacts itself: the stack
    above runs so.)"""
    row = forgotten_text_erased(tmp_path, n=4, bound_s=bound_s, operator=operator)
    assert row.ok and row.lost == 0 and row.found == row.expected == 4, row


def test_beat_schedules_the_compaction_at_the_bound() -> None:
    from celery import Celery

    from memoryd.jobs.celery_app import configure
    from memoryd.jobs.names import QUEUE_OF, TaskName
    from memoryd.platform.settings import Settings

    app = Celery("probe", set_as_current=False)
    configure(app, Settings(erasure_compaction_s=120))
    entry = app.conf.beat_schedule["erase-forgotten"]
    assert entry["task"] == TaskName.ERASE.value == "memory.erase"
    assert entry["schedule"] == 120
    assert entry["options"]["queue"] == QUEUE_OF[TaskName.ERASE].value
    # At 0 the forget compacts itself: nothing to schedule.
    configure(app, Settings(erasure_compaction_s=0))
    assert "erase-forgotten" not in app.conf.beat_schedule
