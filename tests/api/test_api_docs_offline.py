"""The API reference (/docs, Swagger UI; /redoc, ReDoc) renders with the network off: its
scripts, styles and icon come from the gateway (api/docs_assets.py), not a CDN.

Headless Debian chromium through playwright, as in test_admin_page.py; every request to a
host other than 127.0.0.1 is aborted and recorded, and the test asserts there was none.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def test_docs_pages_reference_only_this_origin(base_url: str) -> None:
    for path in ("/docs", "/redoc"):
        page = httpx.get(f"{base_url}{path}")
        assert page.status_code == 200, path
        assert "cdn.jsdelivr.net" not in page.text and "fonts.googleapis" not in page.text
        assert "/docs-assets/" in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
    script = httpx.get(f"{base_url}/docs-assets/swagger-ui-bundle.js")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text[:2000]
    assert httpx.head(f"{base_url}/docs").status_code == 200
    assert "/docs-assets" not in str(httpx.get(f"{base_url}/openapi.json").json()["paths"])


def test_docs_render_offline_in_chromium(base_url: str, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    from playwright.sync_api import Route, expect, sync_playwright

    operations = sum(len(ops) for ops in httpx.get(f"{base_url}/openapi.json").json()
                     ["paths"].values())
    foreign: list[str] = []
    failed: list[tuple[str, str]] = []
    console: list[str] = []

    def offline(route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            foreign.append(route.request.url)
            route.abort("internetdisconnected")

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1280, "height": 900}, offline=False,
        )
        try:
            context.route("**/*", offline)
            page = context.new_page()
            page.on("requestfailed",
                    lambda request: failed.append((request.url, request.failure or "")))
            page.on("console", lambda message: console.append(message.text))

            page.goto(f"{base_url}/docs")
            search = page.locator(".opblock-summary-path[data-path='/v1/search']")
            expect(search).to_be_visible(timeout=20_000)
            expect(page.locator(".opblock")).to_have_count(operations)
            # The stylesheet applied: Swagger UI colours a POST block's method badge.
            badge = page.locator(".opblock-post .opblock-summary-method").first
            colour: Any = badge.evaluate("e => getComputedStyle(e).backgroundColor")
            assert colour not in ("rgba(0, 0, 0, 0)", "transparent"), colour
            search.click()
            expect(page.locator(".opblock-post.is-open")).to_contain_text("top_k")

            page.goto(f"{base_url}/redoc")
            expect(page.locator("h1").first).to_contain_text("memoryd", timeout=20_000)
            expect(page.get_by_text("/v1/search").first).to_be_attached()
        finally:
            context.close()

    assert foreign == [], f"the docs reached for other hosts: {foreign}"
    local = [url for url, _ in failed if urlsplit(url).hostname == "127.0.0.1"]
    assert local == [], f"requests to the gateway failed: {failed}"
    # Anything else was stopped by the pages' security policy before the network: ReDoc's
    # attribution logo (cdn.redoc.ly), which ReDoc hides when it does not load.
    assert all(why in ("csp", "net::ERR_BLOCKED_BY_CSP") for _, why in failed), failed
    refused = [text for text in console if "Refused to" in text and "img-src" not in text]
    assert refused == [], refused
