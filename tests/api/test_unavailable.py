"""With Redis or the store down, the gateway answers 503 with a code that says which."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_gateway import gateway

from memoryd.platform.redis_runtime import free_port
from memoryd.platform.settings import Settings


@pytest.fixture()
def broken_gateway(tmp_path: Path) -> Iterator[str]:
    dead = free_port()  # nothing listens here
    settings = Settings(
        data_dir=tmp_path, redis_url=f"redis://127.0.0.1:{dead}/0",
        qdrant_url=f"http://127.0.0.1:{dead}", api_keys="k=tenant", redis_timeout_s=0.5,
        qdrant_timeout_s=1.0,
    )
    with gateway(settings.model_copy(update={"port": free_port()})) as url:
        yield url


def test_readyz_names_what_is_down(broken_gateway: str) -> None:
    ready = httpx.get(f"{broken_gateway}/readyz", timeout=10)
    assert ready.status_code == 503
    checks = ready.json()["checks"]
    assert checks["redis"].startswith("unreachable") and checks["store"].startswith("unreachable")
    assert httpx.get(f"{broken_gateway}/healthz").status_code == 200


def test_writes_and_reads_fail_with_clear_codes(broken_gateway: str) -> None:
    headers = {"Authorization": "Bearer k"}
    enqueue = httpx.post(f"{broken_gateway}/v1/interactions", headers=headers, timeout=10, json={
        "user_id": "u", "messages": [{"role": "user", "content": "I like tea"}]})
    assert enqueue.status_code == 503
    assert enqueue.json()["error"]["code"] == "queue_unavailable"
    search = httpx.post(f"{broken_gateway}/v1/search", headers=headers, timeout=10,
                        json={"user_id": "u", "query": "tea"})
    assert search.status_code == 503
    assert search.json()["error"]["code"] == "store_unavailable"
