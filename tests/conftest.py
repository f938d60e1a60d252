"""Real parts for every test: a Redis server, the embedded stack (gateway over HTTP,
an in-process Celery worker, a Qdrant Edge shard), on 127.0.0.1 and free ports."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_rerank_server import FakeRerankServer

from memoryd.platform.redis_runtime import RedisHandle, ensure_redis, free_port, redis_reachable
from memoryd.platform.settings import Settings

KEY_A = "test-key-alpha"
KEY_B = "test-key-beta"


# The files that run longest (whole benches, fault drills, stacks stopped and restarted),
# longest first (as measured on a 2-core host), sent to the test processes first: with
# `--dist loadfile` each file goes to one process, and one of these left to the end keeps
# one process busy while the others idle (ops/test.sh turns off xdist's reordering by test
# count, which put them last).
LONG_RUNNING = (
    "tests/faults/test_worker_killed.py", "tests/ops/test_bench_smoke.py",
    "tests/workers/test_time_limits.py", "tests/api/test_score_isolation.py",
    "tests/ops/test_bench_extract_smoke.py", "tests/faults/test_redis_away.py",
    "tests/faults/test_embedded_faults.py", "tests/ops/test_bench_scale_smoke.py",
    "tests/shared/embeddings/test_e5_engine.py", "tests/ops/test_bench_ab_smoke.py",
    "tests/api/test_reindex.py", "tests/api/test_forget_erasure.py",
    "tests/workers/test_memoryd_up.py", "tests/shared/evaluation/test_eval_end_to_end.py",
    "tests/ops/test_bench_fairness_smoke.py", "tests/api/test_schemathesis.py",
    "tests/ops/test_bench_candidates_smoke.py", "tests/llm/test_llm_rate_limit.py",
    "tests/workers/test_bulk_queue.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_RUNNING)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(LONG_RUNNING))

    items.sort(key=key)  # stable: every file keeps its tests' order


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A reachable REDIS_URL if one is given, else a redis-server of our own."""
    given = os.environ.get("REDIS_URL")
    if given and redis_reachable(given):
        yield given
        return
    handle: RedisHandle = ensure_redis(
        f"redis://127.0.0.1:{free_port()}/0", tmp_path_factory.mktemp("redis")
    )
    try:
        yield handle.url
    finally:
        handle.stop()


def redis_db_url(base: str, db: int) -> str:
    return base.rsplit("/", 1)[0] + f"/{db}"


def stack_settings(data_dir: Path, redis_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "redis_url": redis_url,
        "port": free_port(),
        "api_keys": f"{KEY_A}=tenant-a,{KEY_B}=tenant-b",
        "start_redis": False,
        "worker_concurrency": 4,
        "user_lock_wait_s": 2.0,
        "log_json": True,
        "log_level": "WARNING",
        # Search access counts reach Redis and the store within half a second (30 s in
        # production), so the access test sees them quickly.
        "search_access_flush_s": 0.5,
        # Webhooks (tests/integrations/test_webhooks.py): receivers on 127.0.0.1, which the
        # default policy refuses; short timeouts and backoff, three attempts.
        "webhook_allow_hosts": "127.0.0.1",
        "webhook_connect_timeout_s": 0.5,
        "webhook_timeout_s": 0.5,
        "webhook_backoff_base_s": 0.1,
        "webhook_backoff_max_s": 0.4,
        "webhook_max_attempts": 3,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def bench_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `--cache-dir` for this test process's bench smokes (tests/ops/): they fill from
    the same generated LoCoMo (tests/support/tiny_locomo.py), so the first to run embeds the
    pool and saves it, and the others read it back, as a rerun of a bench does
    (ops/bench/fill.py `embed_pool`)."""
    return tmp_path_factory.mktemp("bench-cache")


@pytest.fixture(scope="session")
def fake_reranker() -> Iterator[FakeRerankServer]:
    server = FakeRerankServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def stack(
    redis_server: str, tmp_path_factory: pytest.TempPathFactory, fake_reranker: FakeRerankServer
) -> Iterator[Any]:
    from memoryd.workers.stack import EmbeddedStack

    settings = stack_settings(tmp_path_factory.mktemp("stack"), redis_db_url(redis_server, 1),
                              rerank_url=fake_reranker.url)
    embedded = EmbeddedStack(settings)
    embedded.prepare()
    embedded.start_in_background()
    # The stack's retention timer first fires 5 minutes in, inside a run: its purge would
    # race the retention tests, which send their own (tests/api/test_retention.py).
    if embedded.purger is not None:
        embedded.purger.stop()
        embedded.purger = None
    try:
        yield embedded
    finally:
        embedded.stop()


@pytest.fixture(scope="session")
def base_url(stack: Any) -> str:
    return f"http://127.0.0.1:{stack.settings.port}"


def _client(base_url: str, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30.0
    )


@pytest.fixture()
def api(base_url: str) -> Iterator[httpx.Client]:
    with _client(base_url, KEY_A) as client:
        yield client


@pytest.fixture()
def api_b(base_url: str) -> Iterator[httpx.Client]:
    with _client(base_url, KEY_B) as client:
        yield client


@pytest.fixture()
def user() -> str:
    return f"user-{uuid.uuid4().hex[:12]}"


# The LLM stack (a subprocess) and the fake LLM server, for tests/llm/.
pytest_plugins = ["llm_stack"]
