"""The same path with Ollama's native protocol (`POST /api/chat`, `format: "json"`)."""

from __future__ import annotations

import httpx
import pytest
from conftest import KEY_A, redis_db_url
from fake_llm import FakeLLM, json_reply
from helpers import wait_job
from llm_stack import start_llm_stack, stop
from up_process import wait_ready

from memoryd.platform.redis_runtime import free_port


def test_ollama_native_extraction_end_to_end(
    redis_server: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with FakeLLM() as fake:
        fake.script(json_reply({"operations": [
            {"action": "ADD", "type": "semantic", "category": "preference",
             "content": "用户喜欢用 Vim 写代码", "confidence": 0.92},
        ]}))
        port = free_port()
        proc = start_llm_stack(
            tmp_path_factory.mktemp("ollama-stack"), redis_db_url(redis_server, 7),
            {"MEMORYD_LLM_PROVIDER": "ollama", "MEMORYD_LLM_BASE_URL": fake.url,
             "MEMORYD_LLM_MODEL": "qwen2.5:7b"},
            port,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(proc, base)
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY_A}"},
                              timeout=30) as client:
                response = client.post("/v1/interactions", json={
                    "user_id": "ollama-user",
                    "messages": [{"role": "user", "content": "我写代码一直用 Vim"}],
                })
                assert response.status_code == 202, response.text
                job = wait_job(client, response.json()["job_id"], 60)
                assert job["status"] == "succeeded", job
                items = client.get("/v1/memories", params={"user_id": "ollama-user",
                                                           "kind": "fact"}).json()
                assert [m["content"] for m in items["items"]] == ["用户喜欢用 Vim 写代码"]
        finally:
            stop(proc)
        [sent] = fake.requests
        assert sent.protocol == "ollama" and sent.path == "/api/chat"
        assert sent.body["format"] == "json" and sent.body["stream"] is False
        assert sent.model == "qwen2.5:7b" and "我写代码一直用 Vim" in sent.text
