"""A proxy turn right after a restart of the stack: the lookup's wait for the previous turn
ends when that turn's job ends, not at `MEMORYD_PROXY_FRESH_WAIT_S`.

The job-end subscription of a gateway is new after a restart; it used to start at the first
wait, which read the job's state before Redis had confirmed the subscription, so an end
published in between reached nobody and the turn waited its whole bound (api/waits.py).
`memoryd up` as a subprocess (its own Redis, gateway and worker threads) with the fake
OpenAI-compatible upstream; re-reads 5-15 s apart, so a missed end could only be noticed
at the 5 s bound, which the turn's headers would show.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from up_process import start_up, stop_up, wait_ready

from memoryd.platform.redis_runtime import free_port
from memoryd.testing.fake_llm import FakeLLM, text_reply

FRESH_WAIT_S = 5.0


@pytest.fixture()
def upstream() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        fake.default = text_reply("Noted.")
        yield fake


def fresh_ms(headers: httpx.Headers) -> float:
    timing = headers.get("server-timing", "")
    found = re.search(r"memoryd-fresh;dur=([\d.]+)", timing)
    assert found, timing
    return float(found.group(1))


@pytest.mark.timeout(600)
def test_two_quick_turns_after_a_restart(tmp_path: Path, upstream: FakeLLM) -> None:
    port, redis_port = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"MEMORYD_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
           "MEMORYD_PROXY_UPSTREAM_URL": upstream.openai_url,
           "MEMORYD_PROXY_FRESH_WAIT_S": str(FRESH_WAIT_S), "MEMORYD_WAIT_POLL_S": "10",
           "MEMORYD_LOG_JSON": "true", "MEMORYD_LOG_LEVEL": "WARNING"}
    procs: list[subprocess.Popen[str]] = []
    try:
        for _ in range(2):  # a start, then the restart the turns follow
            if procs:
                stop_up(procs[-1])
            procs.append(start_up(tmp_path, port, env))
            wait_ready(procs[-1], base)
        key = (tmp_path / "api-key").read_text().strip()
        chat = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0,
                             default_headers={"X-Memoryd-User": "rita"}, timeout=60)
        first = chat.chat.completions.with_raw_response.create(model="m", messages=[
            {"role": "user", "content": "Remember that I moved to Lisbon in April 2025"}])
        assert first.headers["X-Memoryd-Job"]
        second = chat.chat.completions.with_raw_response.create(model="m", messages=[
            {"role": "user", "content": "So I moved to Lisbon in April 2025?"}])
        # The wait saw the first turn's job end: it did not run out, and said so.
        assert second.headers["X-Memoryd-Fresh"] == "applied"
        assert fresh_ms(second.headers) < FRESH_WAIT_S * 1000
        assert second.headers["X-Memoryd-Memory"] == "used"
        assert "Lisbon" in upstream.received()[-1].text
    finally:
        for proc in procs:
            stop_up(proc)
