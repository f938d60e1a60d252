"""Every `curl` example of README.md, run as written by bash and the real curl binary
against a `memoryd up` of its own.

The README's blocks that hold a `curl` run in order as one shell session, as a reader
pastes them after the README's start command. Only the value of the one variable the
README defines for the address (`MEMORYD_URL=http://127.0.0.1:8420`) is replaced with the
test stack's free port; the key comes from `~/.memoryd/api-key` as written, with HOME
pointing at a fresh directory whose `.memoryd` is the stack's data directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from conftest import redis_db_url
from helpers import wait_job
from up_process import start_up, stop_up, wait_ready

from memoryd.embeddings.e5.engine import default_cache_dir
from memoryd.platform.redis_runtime import free_port

README = Path(__file__).resolve().parents[2] / "README.md"
DEFAULT_URL = "MEMORYD_URL=http://127.0.0.1:8420"
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CURL = re.compile(r"\bcurl\b")


def curl_blocks(text: str) -> list[str]:
    """The shell blocks that hold a curl command, in README order."""
    return [block for lang, block in _BLOCK.findall(text)
            if lang in ("sh", "bash", "shell") and _CURL.search(block)]


def printing_curls(script: str) -> int:
    """Commands whose answer goes to stdout: curl at the start of a line (not in `$(…)`)."""
    return len(re.findall(r"^curl\b", script, re.MULTILINE))


def answers(stdout: str) -> list[Any]:
    """`curl -s` prints each body with no line break after it: read them one by one."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while at < len(stdout):
        if stdout[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(stdout, at)
        found.append(value)
    return found


class UpStack:
    def __init__(self, home: Path, redis_url: str) -> None:
        self.base = f"http://127.0.0.1:{free_port()}"
        self.proc = start_up(home / ".memoryd", int(self.base.rsplit(":", 1)[1]), {
            "MEMORYD_REDIS_URL": redis_url, "MEMORYD_LOG_LEVEL": "WARNING",
            "MEMORYD_LOG_JSON": "true", "MEMORYD_ENGINE_CACHE_DIR": str(default_cache_dir())})
        try:
            wait_ready(self.proc, self.base)
        except AssertionError:
            self.stop()
            raise

    def stop(self) -> None:
        stop_up(self.proc)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, redis_server: str) -> Iterator[tuple[Path, str]]:
    """A fresh HOME whose `~/.memoryd` is the data directory of a running `memoryd up`
    (no MEMORYD_API_KEYS: it makes `~/.memoryd/api-key` on first start, as the README says)."""
    url = redis_db_url(redis_server, 14)
    redis.Redis.from_url(url).flushdb()
    home = tmp_path_factory.mktemp("readme-home")
    stack = UpStack(home, url)
    try:
        yield home, stack.base
    finally:
        stack.stop()


def test_the_readme_defines_the_address_once_and_every_curl_is_in_a_run_block() -> None:
    text = README.read_text()
    script = "\n".join(curl_blocks(text))
    assert text.count(DEFAULT_URL) == 1 and DEFAULT_URL in script
    in_any_block = sum(len(_CURL.findall(block)) for _, block in _BLOCK.findall(text))
    assert len(_CURL.findall(script)) == in_any_block == 7
    assert "localhost:" not in script and "<" not in script.replace("<<", "")  # no placeholders


def test_every_curl_example_runs_as_written(home: tuple[Path, str]) -> None:
    home_dir, base = home
    script = "\n".join(curl_blocks(README.read_text())).replace(DEFAULT_URL, f"MEMORYD_URL={base}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env["HOME"] = str(home_dir)
    run = subprocess.run(["bash", "-c", "set -eo pipefail\n" + script], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.stdout, run.stderr)
    replies = answers(run.stdout)
    assert len(replies) == printing_curls(script), run.stdout
    for reply in replies:
        assert isinstance(reply, dict) and reply.get("error") is None, reply
    interaction, found, context, saved, reindex, index = replies
    assert interaction["status"] == "queued" and interaction["job_id"]
    assert "results" in found
    assert context["language"] == "zh" and context["token_budget"] == 300
    assert saved["memory"]["content"] == "Allergic to peanuts"
    assert reindex["kind"] == "index.reindex" and index["embedder"]
    key = (home_dir / ".memoryd" / "api-key").read_text().strip()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"},
                      timeout=30) as client:
        assert wait_job(client, interaction["job_id"])["status"] == "succeeded"
    # The re-embedding the README starts, with the operator key it names, finishes (and the
    # stack stops cleanly after).
    operator = (home_dir / ".memoryd" / "operator-key").read_text().strip()
    deadline = time.monotonic() + 180
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {operator}"},
                      timeout=30) as op:
        while True:
            job = op.get(f"/v1/admin/jobs/{reindex['job_id']}").json()
            if job.get("status") in ("succeeded", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert job["status"] == "succeeded", job
