"""The admin page in headless Chromium: key, user, search with scores, edit, persisted; the
jobs view (failed jobs with their reason, retry); and no error in the browser's console.

Debian's `chromium` driven by the Python playwright package (its own driver, no browser
download). Skips only when /usr/bin/chromium is missing; `ops/test.sh` installs it when
it can. The screenshot lands in tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import KEY_A
from helpers import save, wait_job

from memoryd.jobs.enqueue import submit
from memoryd.jobs.names import TaskName
from memoryd.records.commands import UpdateCommand
from memoryd.records.identity import content_hash, memory_id
from memoryd.records.models import utcnow
from memoryd.records.schemas import UpdateRequest
from memoryd.tenancy.api_keys import ApiKeyStore, KeyScope

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@contextmanager
def browser_page(tmp_path: Path) -> Iterator[tuple[Any, list[str]]]:
    """A page of headless Chromium, and the errors its console and scripts report."""
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            context.close()


def log_in(page: Any, base_url: str, key: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{base_url}/ui/")
    expect(page.locator("#login")).to_be_visible()
    page.fill("#key", key)
    page.click("#login-form button[type=submit]")
    expect(page.locator("#app")).to_be_visible()


def failing_update(stack: Any, user: str, content: str) -> str:
    """An edit of a memory that does not exist yet: the worker fails it (not found)."""
    target = memory_id("tenant-a", user, "global", None, content_hash(content))
    command = UpdateCommand(tenant_id="tenant-a", user_id=user, received_at=utcnow(),
                            memory_id=target, changes=UpdateRequest(importance=9))
    rt = stack.runtime
    return submit(rt.jobs, rt.celery, TaskName.UPDATE, command).job_id


HOSTILE = '<img src=x onerror="document.title=\'pwned\'"> 我在 <b>Hangzhou</b> 学习 pottery'


def test_admin_page_search_and_edit(
    api: httpx.Client, base_url: str, tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    from playwright.sync_api import expect

    user = f"ui-{uuid.uuid4().hex[:10]}"
    target = save(api, user, "I keep bees on the roof of my building", tags=["hobby"]).json()
    assert target["outcome"] == "added"
    for text in ("我每天早上喝一杯乌龙茶", HOSTILE):
        assert save(api, user, text).status_code == 201
    memory_id = target["memory"]["id"]

    with browser_page(tmp_path) as (page, errors):
        page.goto(f"{base_url}/ui/")
        expect(page.locator("#login")).to_be_visible()
        expect(page.locator("#app")).to_be_hidden()

        page.fill("#key", KEY_A)
        page.click("#login-form button[type=submit]")
        expect(page.locator("#app")).to_be_visible()
        # The index line is store-wide (operator keys only): a tenant's key leaves it
        # empty, and the page does not ask for it (a 403 in the console).
        expect(page.locator("#users button").first).to_be_visible()
        expect(page.locator("#index-info")).to_have_text("")
        expect(page.locator("#jobs-toggle")).to_be_visible()  # the key has `admin`

        page.fill("#user-prefix", user)
        page.click("#user-filter button")
        page.locator(f"#users button[data-user='{user}']").click()
        expect(page.locator("#memories > li")).to_have_count(3)
        # Hostile content is shown as text and never becomes markup.
        expect(page.locator("#memories")).to_contain_text('<img src=x onerror=')
        assert page.locator("#memories img, #memories b").count() == 0
        assert page.title() == "memoryd admin"

        page.fill("#query", "who keeps bees?")
        page.click("#search-form button[type=submit]")
        first = page.locator("#memories > li").first
        expect(first.locator(".content")).to_have_text(
            "I keep bees on the roof of my building")
        expect(first.locator(".score")).to_be_visible()
        score_text = first.locator(".score").inner_text()
        assert 0 < float(score_text.split()[0]) <= 1, score_text
        expect(first.locator(".explain")).to_contain_text("relevance")

        first.locator(".edit").click()
        first.locator("textarea[name=content]").fill(
            "I keep two hives of bees on the roof 屋顶")
        first.locator("input[name=tags]").fill("hobby, 蜜蜂")
        first.locator(".editor button[type=submit]").click()
        expect(page.locator("#status")).to_have_text("Memory saved.")
        expect(first.locator(".content")).to_have_text(
            "I keep two hives of bees on the roof 屋顶")

        first.locator(".history").click()
        expect(first.locator(".history-list")).to_be_visible()

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "admin-page.png"
        page.screenshot(path=str(shot), full_page=True)
        record_property("screenshot", str(shot))

        # The key lives in this tab's session storage only.
        assert page.evaluate("sessionStorage.getItem('memoryd.key')") == KEY_A
        assert page.evaluate("localStorage.length") == 0
        assert errors == []  # nothing refused, nothing thrown

    stored = api.get(f"/v1/memories/{memory_id}", params={"user_id": user}).json()
    assert stored["content"] == "I keep two hives of bees on the roof 屋顶"
    assert stored["tags"] == ["hobby", "蜜蜂"]


def test_admin_page_is_served_without_a_key(base_url: str) -> None:
    page = httpx.get(f"{base_url}/ui/")
    assert page.status_code == 200 and "memoryd admin" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = httpx.get(f"{base_url}/ui/app.js")
    assert script.status_code == 200 and "innerHTML" not in script.text
    assert httpx.get(f"{base_url}/v1/users").status_code == 401


def test_jobs_view_shows_a_failed_job_with_its_reason_and_retries_it(
    stack: Any, api: httpx.Client, base_url: str, tmp_path: Path, user: str,
) -> None:
    from playwright.sync_api import expect

    content = "My tortoise Hermes is forty years old"
    job_id = failing_update(stack, user, content)
    assert wait_job(api, job_id)["status"] == "failed"
    with browser_page(tmp_path) as (page, errors):
        log_in(page, base_url, KEY_A)
        page.click("#jobs-toggle")
        failed = page.locator(f"#failed-jobs li[data-job='{job_id}']")
        expect(failed).to_contain_text("memory.update")
        expect(failed.locator(".reason")).to_contain_text("not_found")
        expect(failed).to_contain_text(f"user {user}")
        recent = page.locator(f"#recent-jobs li[data-job='{job_id}']")
        expect(recent.locator(".status")).to_have_text("failed")

        # The cause goes away (the memory now exists); Retry runs the same edit again.
        assert save(api, user, content).status_code == 201
        failed.locator("button.retry").click()
        expect(page.locator("#status")).to_have_text("Job queued again.")
        done = wait_job(api, job_id)
        assert done["status"] == "succeeded" and done["attempts"] == 2
        page.click("#jobs-refresh")
        expect(recent.locator(".status")).to_have_text("succeeded")
        expect(failed).to_have_count(0)
        assert errors == []
    listed = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert [m["importance"] for m in listed] == [9]


def test_a_read_only_key_logs_in_without_a_refused_call(
    stack: Any, api: httpx.Client, base_url: str, tmp_path: Path, user: str,
) -> None:
    """The page asks GET /v1/whoami what the key may do and calls nothing else it may not:
    no jobs (admin), no index (operator), so no 403 in the console."""
    from playwright.sync_api import expect

    assert save(api, user, "I water the ferns on Sundays").status_code == 201
    reader = ApiKeyStore(stack.runtime.redis).create(
        "tenant-a", frozenset({KeyScope.READ}), name="test-ui-reader")[0]
    with browser_page(tmp_path) as (page, errors):
        log_in(page, base_url, reader)
        page.fill("#user-id", user)
        page.click("#user-manual button")
        expect(page.locator("#memories > li")).to_have_count(1)
        expect(page.locator("#jobs-toggle")).to_be_hidden()
        expect(page.locator("#index-info")).to_have_text("")
        assert errors == []


def test_whoami_names_the_keys_tenant_and_scopes(stack: Any, api: httpx.Client,
                                                 base_url: str) -> None:
    me = api.get("/v1/whoami")
    assert me.status_code == 200, me.text
    assert me.json()["tenant_id"] == "tenant-a" and me.json()["operator"] is False
    assert me.json()["scopes"] == ["admin", "read", "write"]
    store = ApiKeyStore(stack.runtime.redis)
    writer = store.create("tenant-a", frozenset({KeyScope.WRITE}), name="test-whoami")[0]
    as_writer = httpx.get(f"{base_url}/v1/whoami",
                          headers={"Authorization": f"Bearer {writer}"}).json()
    assert as_writer["scopes"] == ["write"]  # any key may ask, whatever its scopes
    assert KEY_A not in me.text and writer not in str(as_writer)  # never the key
    assert httpx.get(f"{base_url}/v1/whoami").status_code == 401


def test_recent_jobs_are_the_tenants_newest_first(
    stack: Any, api: httpx.Client, api_b: httpx.Client, user: str,
) -> None:
    jobs = []
    for content in ("I collect vintage fountain pens", "My favourite ink colour is teal"):
        accepted = api.post("/v1/memories", json={"user_id": user, "content": content})
        assert accepted.status_code == 202, accepted.text
        jobs.append(accepted.json()["job_id"])
        assert wait_job(api, jobs[-1])["status"] == "succeeded"
    page = api.get("/v1/jobs/recent", params={"user_id": user, "limit": 10})
    assert page.status_code == 200, page.text
    items = page.json()["items"]
    assert [j["job_id"] for j in items] == jobs[::-1]
    assert {(j["status"], j["user_id"], j["kind"]) for j in items} == {
        ("succeeded", user, "memory.save")}
    assert api.get("/v1/jobs/recent", params={"limit": 1}).json()["items"][0]["job_id"]
    other = api_b.get("/v1/jobs/recent", params={"user_id": user}).json()["items"]
    assert other == []  # another tenant sees none of them
    reader = ApiKeyStore(stack.runtime.redis).create(
        "tenant-a", frozenset({KeyScope.READ}), name="test-recent-reader")[0]
    refused = api.get("/v1/jobs/recent", headers={"Authorization": f"Bearer {reader}"})
    assert refused.status_code == 403 and refused.json()["error"]["field"] == "scope"
    bad = api.get("/v1/jobs/recent", params={"limit": 0})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
