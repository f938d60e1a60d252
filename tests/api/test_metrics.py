"""/metrics, scraped for real after real requests and tasks (retried and failed ones too)."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import httpx
import pytest
from conftest import KEY_A
from helpers import save, wait_job
from live_gateway import gateway, settings_with
from pydantic import SecretStr
from test_tenant_walk import PUBLIC, app_routes

from memoryd.api.routers.metrics import check_metrics_token
from memoryd.jobs.names import QueueName, TaskName
from memoryd.platform.errors import Unauthorized
from memoryd.platform.metrics import StackCollector
from memoryd.platform.settings import Settings


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample; labels in any order."""
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:]+)(\{(.*)\})? (\S+)$", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(4))
    raise AssertionError(f"no sample {name}{labels}")


def scrape(base_url: str) -> str:
    response = httpx.get(f"{base_url}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def test_requests_and_tasks_are_counted(
    base_url: str, api: httpx.Client, user: str, stack: Any
) -> None:
    before = scrape(base_url)
    saved = save(api, user, "我每天早上六点起床 and go for a run").json()["memory"]
    assert api.get(f"/v1/memories/{saved['id']}", params={"user_id": user}).status_code == 200
    after = scrape(base_url)

    # Latency per route template, never per raw path (no ids in label values).
    route = "/v1/memories/{memory_id}"
    assert sample(after, "memoryd_http_request_duration_seconds_count",
                  method="GET", route=route, status="200") >= 1
    assert saved["id"] not in after
    assert sample(after, "memoryd_http_request_duration_seconds_bucket", method="POST",
                  route="/v1/memories", status="201", le="+Inf") >= 1

    def delta(name: str, **labels: str) -> float:
        try:
            old = sample(before, name, **labels)
        except AssertionError:
            old = 0.0
        return sample(after, name, **labels) - old

    assert delta("memoryd_tasks_enqueued_total", task="memory.save") >= 1
    assert delta("memoryd_tasks_completed_total", task="memory.save", state="succeeded") >= 1
    assert delta("memoryd_task_duration_seconds_count", task="memory.save") >= 1
    assert sample(after, "memoryd_task_duration_seconds_sum", task="memory.save") > 0
    assert sample(after, "memoryd_queue_depth", queue="memory") >= 0
    assert sample(after, "memoryd_queue_depth", queue="llm") >= 0
    assert sample(after, "memoryd_memories_stored") >= 0


def test_stored_memories_are_sampled_and_cached(api: httpx.Client, user: str, stack: Any) -> None:
    save(api, user, "The user's favourite colour is teal")
    rt = stack.runtime
    queues = [q.value for q in QueueName]
    def count() -> int:
        return rt.index.view().store.count_all()

    cached = StackCollector(rt.redis, count, queues, count_ttl_s=3600)
    first = sample(cached.render().decode(), "memoryd_memories_stored")
    assert first >= 1
    save(api, user, "The user collects vintage fountain pens")
    assert sample(cached.render().decode(), "memoryd_memories_stored") == first
    fresh = StackCollector(rt.redis, count, queues, count_ttl_s=0)
    assert sample(fresh.render().decode(), "memoryd_memories_stored") >= first + 1


def test_retries_and_failures_per_task(
    base_url: str, api: httpx.Client, user: str, stack: Any
) -> None:
    before = scrape(base_url)
    # A held user lock makes the save fail transiently, so it is retried, then succeeds.
    lock = stack.runtime.redis.lock(f"memoryd:lock:tenant-a:{user}", timeout=60)
    assert lock.acquire(blocking=False)
    job = api.post("/v1/memories", json={"user_id": user, "content": "I speak Portuguese"}).json()
    deadline = time.monotonic() + 30
    while api.get(f"/v1/jobs/{job['job_id']}").json()["status"] != "retrying":
        assert time.monotonic() < deadline, "the save was never retried"
        time.sleep(0.05)
    lock.release()
    assert wait_job(api, job["job_id"])["status"] == "succeeded"
    # A malformed command fails for good (a permanent error is not retried).
    failing = f"job-bad-{uuid.uuid4().hex}"
    stack.runtime.jobs.create(failing, "tenant-a", TaskName.UPDATE.value, None)
    stack.runtime.celery.send_task(TaskName.UPDATE.value, kwargs={"command": {"bad": 1}},
                                   task_id=failing, queue="memory")
    assert wait_job(api, failing)["status"] == "failed"
    after = scrape(base_url)

    def grew(name: str, **labels: str) -> bool:
        try:
            old = sample(before, name, **labels)
        except AssertionError:
            old = 0.0
        return sample(after, name, **labels) > old

    assert grew("memoryd_task_retries_total", task="memory.save")
    assert grew("memoryd_tasks_completed_total", task="memory.save", state="retried")
    assert grew("memoryd_task_failures_total", task="memory.update")


def test_a_metrics_token_is_required_when_set(base_url: str) -> None:
    settings = Settings(metrics_token="s3cret-token")
    with pytest.raises(Unauthorized):
        check_metrics_token(settings, None)
    with pytest.raises(Unauthorized):
        check_metrics_token(settings, "Bearer wrong")
    check_metrics_token(settings, "Bearer s3cret-token")
    check_metrics_token(Settings(metrics_token=""), None)  # empty means open


def test_a_non_ascii_token_is_a_mismatch_not_an_error() -> None:
    settings = Settings(metrics_token="s3cret-token")
    for header in ("Bearer ké…", "Bearer s3cret-tokén", "Bearer \xff\xfe"):
        with pytest.raises(Unauthorized):
            check_metrics_token(settings, header)
    # A non-ASCII token matches its own UTF-8 bytes (what an HTTP server hands over as
    # latin-1 text), and nothing else.
    utf8_token = Settings(metrics_token="tökén")
    check_metrics_token(utf8_token, "Bearer tökén".encode().decode("latin-1"))
    with pytest.raises(Unauthorized):
        check_metrics_token(utf8_token, "Bearer tökén")


def test_server_mode_metrics_need_a_token_unless_opened(stack: Any) -> None:
    store = stack.runtime.index
    with gateway(settings_with(stack), store, server_mode=True) as base:
        closed = httpx.get(f"{base}/metrics", timeout=30)
        assert closed.status_code == 401, closed.text
        assert "MEMORYD_METRICS_TOKEN" in closed.json()["error"]["message"]
    with gateway(settings_with(stack, metrics_open=True), store, server_mode=True) as base:
        scrape(base)
    token = "scrape-token-7f3a"
    with gateway(settings_with(stack, metrics_token=SecretStr(token)), store,
                 server_mode=True) as base:
        assert httpx.get(f"{base}/metrics", timeout=30).status_code == 401
        wrong = httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        ok = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and "memoryd_" in ok.text
    # Embedded mode (the session stack) keeps /metrics open on 127.0.0.1.
    scrape(f"http://127.0.0.1:{stack.settings.port}")


def test_non_ascii_bearer_is_401_on_every_route(stack: Any) -> None:
    """Raw non-ASCII bytes in the bearer key: 401 on every authenticated route and on a
    token-protected /metrics, never a 500 (the admin page is static and needs no key)."""
    bad_headers = [
        [(b"Authorization", "Bearer ké…".encode())],
        [(b"Authorization", b"Bearer \xff\xfe\x80")],
        [(b"Authorization", "Bearer 密钥".encode())],
    ]
    settings = settings_with(stack, metrics_token=SecretStr("scrape-token-7f3a"))
    with gateway(settings, stack.runtime.index, server_mode=True) as base:
        routes = sorted(app_routes(stack) - PUBLIC)
        assert ("GET", "/metrics") in routes and ("POST", "/v1/admin/reindex") in routes
        with httpx.Client(base_url=base, timeout=30) as c:
            for method, template in routes:
                path = template.replace("{memory_id}", "m1").replace("{job_id}", "j1")
                for headers in bad_headers:
                    response = c.request(method, path, headers=headers,
                                         params={"user_id": "u1"}, json={})
                    assert response.status_code == 401, (method, path, response.text)
                    assert response.json()["error"]["code"] == "unauthorized"
            for headers in bad_headers:
                page = c.get("/ui/", headers=headers)
                assert page.status_code == 200 and "<html" in page.text
            # And the good key still works through the same gateway.
            fine = c.get("/v1/memories", params={"user_id": "u1"},
                         headers={"Authorization": f"Bearer {KEY_A}"})
            assert fine.status_code == 200, fine.text
