"""The admin page in headless Chromium: key, user, search with scores, edit, persisted.

Debian's `chromium` driven by the Python playwright package (its own driver, no browser
download). Skips only when /usr/bin/chromium is missing; `ops/test.sh` installs it when
it can. The screenshot lands in tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from conftest import KEY_A
from helpers import save

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
HOSTILE = '<img src=x onerror="document.title=\'pwned\'"> 我在 <b>Hangzhou</b> 学习 pottery'


def test_admin_page_search_and_edit(
    api: httpx.Client, base_url: str, tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    user = f"ui-{uuid.uuid4().hex[:10]}"
    target = save(api, user, "I keep bees on the roof of my building", tags=["hobby"]).json()
    assert target["outcome"] == "added"
    for text in ("我每天早上喝一杯乌龙茶", HOSTILE):
        assert save(api, user, text).status_code == 201
    memory_id = target["memory"]["id"]

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = context.new_page()
            page.goto(f"{base_url}/ui/")
            expect(page.locator("#login")).to_be_visible()
            expect(page.locator("#app")).to_be_hidden()

            page.fill("#key", KEY_A)
            page.click("#login-form button[type=submit]")
            expect(page.locator("#app")).to_be_visible()
            # The index line is store-wide (operator keys only): a tenant's key leaves it empty.
            expect(page.locator("#index-info")).to_have_text("")

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
        finally:
            context.close()

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
