"""Fixtures (a plugin, see conftest.py): a memoryd stack with an LLM, pointed at the fake.

The stack runs as `memoryd up` in a subprocess: the session stack in this process has no
LLM (its interactions default to rules), and one process holds one embedded stack.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import KEY_A, KEY_B, redis_db_url
from fake_llm import FakeLLM
from up_process import start_up, wait_ready

from memoryd.platform.redis_runtime import free_port

EXTRACTOR = "extractor-model"
JUDGE = "judge-model"
# Short on purpose: the timeout scenario waits this long once.
LLM_TIMEOUT_S = 1.5


def start_llm_stack(data_dir: Path, redis_url: str, llm_env: dict[str, str],
                    port: int) -> subprocess.Popen[str]:
    return start_up(data_dir, port, {
        "MEMORYD_REDIS_URL": redis_url, "MEMORYD_START_REDIS": "false",
        "MEMORYD_API_KEYS": f"{KEY_A}=tenant-a,{KEY_B}=tenant-b",
        "MEMORYD_LOG_JSON": "true", "MEMORYD_LOG_LEVEL": "WARNING",
        "MEMORYD_WORKER_CONCURRENCY": "2", "MEMORYD_LLM_WORKER_CONCURRENCY": "2",
        "MEMORYD_TASK_MAX_RETRIES": "3", "MEMORYD_TASK_RETRY_BACKOFF_MAX_S": "2",
        "MEMORYD_USER_LOCK_WAIT_S": "5",
        **llm_env,
    })


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="session")
def llm_base_url(
    redis_server: str, fake_llm_server: FakeLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    port = free_port()
    proc = start_llm_stack(
        tmp_path_factory.mktemp("llm-stack"), redis_db_url(redis_server, 6),
        {
            "MEMORYD_LLM_PROVIDER": "openai",
            "MEMORYD_LLM_BASE_URL": fake_llm_server.openai_url,
            "MEMORYD_LLM_API_KEY": "test-llm-key",
            "MEMORYD_LLM_MODEL": EXTRACTOR,
            "MEMORYD_LLM_JUDGE_MODEL": JUDGE,
            "MEMORYD_LLM_TIMEOUT_S": str(LLM_TIMEOUT_S),
            "MEMORYD_LLM_PARSE_RETRIES": "1",
        },
        port,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, base)
        yield base
    finally:
        stop(proc)


@pytest.fixture()
def llm(fake_llm_server: FakeLLM, llm_base_url: str) -> FakeLLM:
    """The fake model, its script and record cleared for this test."""
    fake_llm_server.reset()
    return fake_llm_server


@pytest.fixture()
def lapi(llm_base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=llm_base_url, headers={"Authorization": f"Bearer {KEY_A}"},
                      timeout=30.0) as client:
        yield client
