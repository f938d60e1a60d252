"""Rules extraction: the user's stated facts become memories; the assistant's do not. (The
default extraction keeps the turns too: tests/api/test_default_extraction.py.)"""

from __future__ import annotations

import httpx
from helpers import search, wait_job


def test_rules_extract_user_facts_in_both_languages(api: httpx.Client, user: str) -> None:
    job = api.post("/v1/interactions", json={
        "user_id": user, "thread_id": "t-rules", "extract": "rules",
        "messages": [
            {"role": "user", "content": "Remember that my daughter's name is Mia. 我喜欢吃火锅"},
            {"role": "assistant", "content": "I love hiking and my name is Claude."},
            {"role": "user", "content": "ok thanks"},
        ],
    }).json()
    done = wait_job(api, job["job_id"])
    assert done["status"] == "succeeded", done
    assert done["result"]["extract"] == "rules"
    contents = sorted(m["content"] for m in done["result"]["memories"])
    assert contents == sorted(["User's daughter's name is Mia", "用户喜欢吃火锅"])
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert {m["type"] for m in items} == {"semantic"}
    assert {m["thread_id"] for m in items} == {"t-rules"}
    assert search(api, user, "what food does the user like", top_k=1)[0]["memory"][
        "content"] == "用户喜欢吃火锅"


def test_store_roles_keeps_assistant_turns_in_raw_mode(api: httpx.Client, user: str) -> None:
    job = api.post("/v1/interactions", json={
        "user_id": user, "extract": "raw", "store_roles": ["user", "assistant"],
        "messages": [{"role": "user", "content": "Which train goes to Kyoto?"},
                     {"role": "assistant", "content": "The Nozomi goes to Kyoto."}],
    }).json()
    assert wait_job(api, job["job_id"])["result"]["added"] == 2
    roles = {m["metadata"]["role"]
             for m in api.get("/v1/memories", params={"user_id": user}).json()["items"]}
    assert roles == {"user", "assistant"}
