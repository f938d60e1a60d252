"""Secrets and identifiers never reach the store, in raw and rules extraction alike."""

from __future__ import annotations

import httpx
from helpers import save, wait_job


def test_raw_and_rules_store_placeholders_not_secrets(api: httpx.Client, user: str) -> None:
    text = ("Remember that my email is wang.fang@example.cn, 我的手机号是 13912345678, "
            "card 4111 1111 1111 1111, password: Tr0ub4dor")
    for mode in ("raw", "rules"):
        response = api.post("/v1/interactions", json={
            "user_id": user, "extract": mode, "messages": [{"role": "user", "content": text}],
        })
        assert response.status_code == 202, response.text
        assert wait_job(api, response.json()["job_id"])["status"] == "succeeded"
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert items, "raw mode stores the message"
    stored = "\n".join(m["content"] for m in items)
    for secret in ("wang.fang@example.cn", "13912345678", "4111 1111 1111 1111", "Tr0ub4dor"):
        assert secret not in stored
    assert "[EMAIL]" in stored and "[PHONE]" in stored and "[CARD]" in stored
    assert "[PASSWORD]" in stored


def test_llm_extraction_without_a_provider_is_refused(api: httpx.Client, user: str) -> None:
    response = api.post("/v1/interactions", json={
        "user_id": user, "extract": "llm", "messages": [{"role": "user", "content": "hi there"}],
    })
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "extractor_unavailable"
    assert response.json()["error"]["field"] == "extract"


def test_saves_edits_and_imports_are_redacted_too(api: httpx.Client, user: str) -> None:
    saved = save(api, user, "Mail me at li.lei@example.com about the trip")
    assert saved.status_code == 201, saved.text
    memory = saved.json()["memory"]
    assert memory["content"] == "Mail me at [EMAIL] about the trip"
    edited = api.patch(f"/v1/memories/{memory['id']}", params={"user_id": user, "wait": 20},
                       json={"content": "我的新手机号是 13812345678"})
    assert edited.status_code == 200, edited.text
    assert edited.json()["memory"]["content"] == "我的新手机号是 [PHONE]"
    history = api.get(f"/v1/memories/{memory['id']}/history", params={"user_id": user}).json()
    assert "13812345678" not in str(history) and "li.lei@example.com" not in str(history)
    imported = api.post("/v1/import", params={"user_id": user},
                        content=b'{"content": "api_key=sk-abcdefghijklmnopqrstuvwx1234"}\n',
                        headers={"content-type": "application/x-ndjson"})
    assert imported.status_code == 202, imported.text
    assert wait_job(api, imported.json()["job_id"])["status"] == "succeeded"
    stored = [m["content"] for m in api.get("/v1/memories", params={"user_id": user}).json()[
        "items"]]
    assert not any("sk-abcdefghijklmnopqrstuvwx1234" in c for c in stored)
    assert any("[API_KEY]" in c for c in stored)
