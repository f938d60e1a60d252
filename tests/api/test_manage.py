"""List, get, edit, disable, delete, keyed slots, bulk forget, jobs and idempotency."""

from __future__ import annotations

import httpx
from helpers import save, search, wait_job


def test_keyed_save_replaces_the_slot(api: httpx.Client, user: str) -> None:
    first = save(api, user, "The user's pet is a cat named Miso", key="pet")
    assert first.status_code == 201
    second = save(api, user, "The user's pet is a parrot named Kiwi", key="pet")
    assert second.status_code == 200, second.text
    assert second.json()["outcome"] == "updated"
    assert second.json()["memory"]["id"] == first.json()["memory"]["id"]
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert [m["content"] for m in items] == ["The user's pet is a parrot named Kiwi"]


def test_semantic_duplicate_is_reported(api: httpx.Client, user: str) -> None:
    first = save(api, user, "I am allergic to peanuts.")
    dup = save(api, user, "I'm allergic to peanuts")
    assert dup.status_code == 200, dup.text
    assert dup.json()["outcome"] == "duplicate"
    assert dup.json()["duplicate_kind"] == "semantic"
    assert dup.json()["duplicate_of"] == first.json()["memory"]["id"]


def test_chinese_and_mixed_content(api: httpx.Client, user: str) -> None:
    assert save(api, user, "我养了一只叫豆豆的橘猫").status_code == 201
    assert save(api, user, "周末喜欢去 West Lake 跑步, usually 10 km").status_code == 201
    assert save(api, user, "The quarterly report is due on March 3rd").status_code == 201
    assert search(api, user, "我的宠物叫什么名字", top_k=1)[0]["memory"]["content"] == (
        "我养了一只叫豆豆的橘猫"
    )
    assert "West Lake" in search(api, user, "where do I go running?", top_k=1)[0]["memory"][
        "content"]
    assert save(api, user, "我养了一只叫豆豆的橘猫。").json()["outcome"] == "duplicate"


def test_patch_disable_and_delete(api: httpx.Client, user: str) -> None:
    memory = save(api, user, "I play the cello in a community orchestra").json()["memory"]
    path = f"/v1/memories/{memory['id']}"
    edited = api.patch(path, params={"user_id": user, "wait": 10},
                       json={"content": "I play the viola in a community orchestra",
                             "tags": ["music"], "importance": 8})
    assert edited.status_code == 200, edited.text
    got = api.get(path, params={"user_id": user}).json()
    assert (got["content"], got["tags"], got["importance"]) == (
        "I play the viola in a community orchestra", ["music"], 8)
    assert search(api, user, "which instrument?", top_k=1)[0]["memory"]["id"] == memory["id"]
    api.patch(path, params={"user_id": user, "wait": 10}, json={"enabled": False})
    assert search(api, user, "which instrument?") == []
    assert api.get(path, params={"user_id": user}).json()["enabled"] is False
    deleted = api.delete(path, params={"user_id": user, "wait": 10})
    assert deleted.status_code == 200 and deleted.json()["deleted"] == 1
    assert api.get(path, params={"user_id": user}).status_code == 404


def test_bulk_forget_by_thread_and_time(api: httpx.Client, user: str) -> None:
    for thread, day, text in (("a", "01", "I visited Kyoto"), ("a", "02", "I ate ramen"),
                              ("b", "03", "I bought a kimono"), ("b", "20", "I flew home")):
        job = api.post("/v1/interactions", json={
            "user_id": user, "thread_id": thread, "extract": "raw",
            "messages": [{"role": "user", "content": text,
                          "created_at": f"2024-05-{day}T12:00:00Z"}],
        }).json()
        assert wait_job(api, job["job_id"])["status"] == "succeeded"
    by_thread = api.delete("/v1/memories", params={"user_id": user, "thread_id": "a", "wait": 10})
    assert by_thread.json()["deleted"] == 2
    by_time = api.delete("/v1/memories", params={"user_id": user, "before": "2024-05-10T00:00:00",
                                                 "wait": 10})
    assert by_time.json()["deleted"] == 1
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert [m["content"] for m in items] == ["I flew home"]


def test_listing_pages_and_sorts(api: httpx.Client, user: str) -> None:
    facts = ["I collect vinyl records", "My car is a red Volvo", "I was born in Porto",
             "I teach chemistry", "My favourite film is Alien", "I sleep eight hours",
             "I drink oat milk"]
    for i, fact in enumerate(facts):
        assert save(api, user, fact, importance=1 + i,
                    tags=["even" if i % 2 == 0 else "odd"]).status_code == 201
    seen, cursor = [], None
    while True:
        page = api.get("/v1/memories", params={"user_id": user, "limit": 3, "sort": "importance",
                                               **({"cursor": cursor} if cursor else {})}).json()
        seen.extend(m["importance"] for m in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [7, 6, 5, 4, 3, 2, 1]
    odd = api.get("/v1/memories", params={"user_id": user, "tag": "odd"}).json()["items"]
    assert sorted(m["importance"] for m in odd) == [2, 4, 6]


def test_idempotency_key_processes_once(api: httpx.Client, user: str) -> None:
    body = {"user_id": user, "extract": "raw", "idempotency_key": "turn-42",
            "messages": [{"role": "user", "content": "I started learning Rust today"}]}
    first = api.post("/v1/interactions", json=body).json()
    second = api.post("/v1/interactions", json=body).json()
    assert first["job_id"] == second["job_id"]
    assert wait_job(api, first["job_id"])["status"] == "succeeded"
    third = api.post("/v1/interactions", json=body).json()
    assert third == {"job_id": first["job_id"], "status": "succeeded"}
    assert len(api.get("/v1/memories", params={"user_id": user}).json()["items"]) == 1


def test_unknown_job_is_404(api: httpx.Client) -> None:
    assert api.get("/v1/jobs/does-not-exist").status_code == 404


def test_health(api: httpx.Client) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"redis": "ok", "store": "ok"}
    assert "/v1/search" in api.get("/openapi.json").json()["paths"]
