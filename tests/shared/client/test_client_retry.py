"""Retries: 503 and 429 are retried with backoff (Retry-After first); others are not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest
from live_gateway import gateway

from memoryd.client import MemorydClient, NotFound, RetryPolicy, Unavailable
from memoryd.platform.redis_runtime import ensure_redis, free_port
from memoryd.platform.retry_after import retry_after
from memoryd.platform.settings import Settings


def test_retry_after_is_honoured_in_both_forms() -> None:
    policy = RetryPolicy(max_retry_after_s=30)
    assert policy.delay(0, httpx.Response(503, headers={"retry-after": "7"})) == 7.0
    assert policy.delay(0, httpx.Response(429, headers={"retry-after": "600"})) == 30.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    assert 15 <= (retry_after(later) or 0) <= 20
    assert retry_after("not a date") is None
    # Without the header: full jitter under an exponential cap.
    delays = [RetryPolicy(base_s=0.5, max_s=3).delay(4, httpx.Response(503)) for _ in range(50)]
    assert all(0 <= d <= 3 for d in delays) and len(set(delays)) > 1


@pytest.fixture()
def gateway_without_redis(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A real gateway whose Redis is not up yet: job reads answer 503 until it is."""
    port = free_port()
    settings = Settings(
        data_dir=tmp_path, redis_url=f"redis://127.0.0.1:{port}/0", api_keys="k=tenant",
        redis_timeout_s=0.5, qdrant_local_path=tmp_path / "qdrant",
    )
    with gateway(settings.model_copy(update={"port": free_port()})) as url:
        yield url, port


def test_503_is_retried_until_the_service_is_back(
    gateway_without_redis: tuple[str, int], tmp_path: Path
) -> None:
    url, redis_port = gateway_without_redis
    with pytest.raises(Unavailable) as down:
        MemorydClient(url, "k", retry=RetryPolicy(attempts=1)).job("some-job")
    assert down.value.code == "queue_unavailable" and down.value.status == 503

    handles = []
    starter = threading.Timer(0.5, lambda: handles.append(
        ensure_redis(f"redis://127.0.0.1:{redis_port}/0", tmp_path / "redis")))
    starter.start()
    try:
        patient = MemorydClient(url, "k", retry=RetryPolicy(attempts=60, base_s=0.1, max_s=0.3))
        # Redis came back during the retries: the real answer for an unknown job is 404.
        with pytest.raises(NotFound):
            patient.job("some-job")
    finally:
        starter.join()
        for handle in handles:
            handle.stop()
    metrics = httpx.get(f"{url}/metrics").text
    line = 'memoryd_http_request_duration_seconds_count{method="GET",route="/v1/jobs/{job_id}"'
    assert f'{line},status="503"}}' in metrics and f'{line},status="404"}}' in metrics
