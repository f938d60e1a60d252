"""The default extraction through the real gateway and worker (issue 29 §1, §2): every turn
is kept as an episode, facts are drawn beside them, and each memory says where it came from.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from helpers import wait_job

EVERYDAY = [
    ("I just moved to Berlin last month for a new job",
     "User just moved to Berlin last month for a new job"),
    ("We adopted a cat named Luna two weeks ago",
     "User and family adopted a cat named Luna two weeks ago"),
    ("I also have a dog named Rex", "User also has a dog named Rex"),
    ("我老婆下个月生日，她喜欢郁金香", "用户老婆下个月生日，她喜欢郁金香"),
    ("我最近在学吉他，每天练半个小时", "用户最近在学吉他，每天练半个小时"),
]


def post(api: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    accepted = api.post("/v1/interactions", json=body)
    assert accepted.status_code == 202, accepted.text
    job = wait_job(api, accepted.json()["job_id"])
    assert job["status"] == "succeeded", job
    return job


def listing(api: httpx.Client, user: str, **params: Any) -> list[dict[str, Any]]:
    response = api.get("/v1/memories", params={"user_id": user, "limit": 200, **params})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def by_kind(items: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {m["content"]: m for m in items if m["kind"] == kind}


def test_everyday_turns_keep_episodes_and_facts_with_their_sources(
    api: httpx.Client, user: str
) -> None:
    jobs = []
    for i, (said, _) in enumerate(EVERYDAY):
        jobs.append(post(api, {
            "user_id": user, "thread_id": "t-life",
            "messages": [
                {"role": "user", "content": said, "metadata": {"turn": f"s1:{2 * i}"},
                 "created_at": f"2025-05-0{i + 1}T10:00:00Z"},
                {"role": "assistant", "content": f"Noted, thanks for telling me ({i}).",
                 "metadata": {"turn": f"s1:{2 * i + 1}"}},
            ],
        }))
    assert all(j["result"].get("default") and j["result"]["episodes"] == 2 for j in jobs), jobs
    items = listing(api, user)
    episodes, facts = by_kind(items, "episode"), by_kind(items, "fact")
    assert len(episodes) == 10 and len(items) == 15
    assert set(facts) == {fact for _, fact in EVERYDAY}
    for i, (said, fact) in enumerate(EVERYDAY):
        episode = episodes[said]
        assert episode["type"] == "episodic" and episode["metadata"]["role"] == "user"
        assert episode["thread_id"] == "t-life"
        [source] = episode["sources"]
        assert source["role"] == "user" and source["message_index"] == 0
        assert source["metadata"] == {"turn": f"s1:{2 * i}"}
        assert source["thread_id"] == "t-life" and source["job_id"] == jobs[i]["job_id"]
        assert source["at"].startswith(f"2025-05-0{i + 1}T10:00:00")
        # The fact names its message and links to its episode.
        found = facts[fact]
        assert found["episodes"] == [episode["id"]]
        assert [(s["message_index"], s["role"], s["metadata"]) for s in found["sources"]] == [
            (0, "user", {"turn": f"s1:{2 * i}"})]
        # The episode can be asked for the facts drawn from it.
        drawn = listing(api, user, episode=episode["id"])
        assert [m["content"] for m in drawn] == [fact]
    # Assistant turns are kept, marked by their role.
    reply = episodes["Noted, thanks for telling me (2)."]
    assert reply["metadata"]["role"] == "assistant"
    assert reply["sources"][0]["role"] == "assistant"
    assert reply["sources"][0]["metadata"] == {"turn": "s1:5"}
    assert listing(api, user, kind="fact", episode=reply["id"]) == []
    assert {m["kind"] for m in listing(api, user, kind="episode")} == {"episode"}


def test_a_request_is_no_fact_and_its_turn_is_kept(api: httpx.Client, user: str) -> None:
    job = post(api, {"user_id": user, "messages": [
        {"role": "user", "content": "我对花生过敏,给我推荐点零食吧"}]})
    contents = {m["content"]: m["kind"] for m in job["result"]["memories"]}
    assert contents == {"我对花生过敏,给我推荐点零食吧": "episode", "用户对花生过敏": "fact"}


def test_the_same_turn_posted_again_is_one_memory(api: httpx.Client, user: str) -> None:
    body = {"user_id": user, "thread_id": "t-again",
            "messages": [{"role": "user", "content": "I love hiking in the Alps"},
                         {"role": "assistant", "content": "The Alps are lovely."}]}
    first = post(api, body)
    again = post(api, body)
    assert first["result"]["added"] == 3
    assert (again["result"]["added"], again["result"]["duplicate"]) == (0, 3)
    items = listing(api, user)
    assert len(items) == 3
    episode = by_kind(items, "episode")["I love hiking in the Alps"]
    assert [s["job_id"] for s in episode["sources"]] == [first["job_id"], again["job_id"]]
    fact = by_kind(items, "fact")["User loves hiking in the Alps"]
    assert fact["episodes"] == [episode["id"]]
    assert [s["job_id"] for s in fact["sources"]] == [first["job_id"], again["job_id"]]
    # The same words from the assistant are another turn than the user's.
    post(api, {"user_id": user, "thread_id": "t-again",
               "messages": [{"role": "assistant", "content": "I love hiking in the Alps"}]})
    turns = [(m["content"], m["metadata"]["role"]) for m in listing(api, user, kind="episode")]
    assert sorted(turns) == [("I love hiking in the Alps", "assistant"),
                             ("I love hiking in the Alps", "user"),
                             ("The Alps are lovely.", "assistant")]


def test_explicit_modes_keep_their_behaviour_with_kind_and_sources(
    api: httpx.Client, user: str
) -> None:
    rules = post(api, {"user_id": user, "extract": "rules", "thread_id": "t-x", "messages": [
        {"role": "user", "content": "I have a dog named Rex", "metadata": {"turn": "a"}},
        {"role": "assistant", "content": "Rex is a good name."}]})
    assert "default" not in rules["result"]
    [fact] = listing(api, user)
    assert (fact["kind"], fact["content"], fact["episodes"]) == (
        "fact", "User has a dog named Rex", [])
    assert fact["sources"][0]["metadata"] == {"turn": "a"}
    raw = post(api, {"user_id": f"{user}-raw", "extract": "raw", "messages": [
        {"role": "user", "content": "hello there", "metadata": {"turn": "b"}}]})
    assert raw["result"]["added"] == 1
    [episode] = listing(api, f"{user}-raw")
    assert episode["kind"] == "episode" and episode["metadata"] == {"turn": "b", "role": "user"}
    assert episode["sources"][0]["metadata"] == {"turn": "b"}


def test_forgetting_one_episode_forgets_the_facts_drawn_only_from_it(
    api: httpx.Client, user: str
) -> None:
    first = post(api, {"user_id": user, "thread_id": "t1", "messages": [
        {"role": "user", "content": "I also have a dog named Rex. I love sushi"}]})
    post(api, {"user_id": user, "thread_id": "t2", "messages": [
        {"role": "user", "content": "I love sushi"}]})
    items = listing(api, user)
    episodes, facts = by_kind(items, "episode"), by_kind(items, "fact")
    one = episodes["I also have a dog named Rex. I love sushi"]
    two = episodes["I love sushi"]
    assert facts["User loves sushi"]["episodes"] == [one["id"], two["id"]]
    deleted = api.delete(f"/v1/memories/{one['id']}", params={"user_id": user, "wait": 20})
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["facts_forgotten"] == [facts["User also has a dog named Rex"]["id"]]
    left = listing(api, user)
    assert {m["content"] for m in left} == {"I love sushi", "User loves sushi"}
    sushi = by_kind(left, "fact")["User loves sushi"]
    assert sushi["episodes"] == [two["id"]]
    assert [s["thread_id"] for s in sushi["sources"]] == ["t2"]
    assert first["job_id"] not in {s["job_id"] for s in sushi["sources"]}


def test_forget_by_thread_removes_episodes_and_facts(api: httpx.Client, user: str) -> None:
    post(api, {"user_id": user, "thread_id": "t-gone", "messages": [
        {"role": "user", "content": "我最近在学吉他，每天练半个小时"},
        {"role": "assistant", "content": "加油！"}]})
    post(api, {"user_id": user, "thread_id": "t-kept", "messages": [
        {"role": "user", "content": "I work as a nurse"}]})
    assert len(listing(api, user)) == 5
    forgot = api.delete("/v1/memories", params={"user_id": user, "thread_id": "t-gone",
                                               "wait": 20})
    assert forgot.status_code == 200 and forgot.json()["deleted"] == 3
    assert {m["content"] for m in listing(api, user)} == {"I work as a nurse",
                                                         "User works as a nurse"}


def test_export_and_import_keep_kind_sources_and_links(api: httpx.Client, user: str) -> None:
    post(api, {"user_id": user, "thread_id": "t-move", "messages": [
        {"role": "user", "content": "I just moved to Berlin last month for a new job",
         "metadata": {"dia_id": "D1:3"}}]})
    exported = api.get("/v1/export", params={"user_id": user})
    assert exported.status_code == 200
    records = [json.loads(line) for line in exported.text.splitlines() if line.strip()]
    assert {r["kind"] for r in records} == {"episode", "fact"}
    target = f"{user}-copy"
    accepted = api.post("/v1/import", params={"user_id": target},
                        content="".join(json.dumps(r) + "\n" for r in records).encode(),
                        headers={"content-type": "application/x-ndjson"})
    assert accepted.status_code == 202, accepted.text
    assert wait_job(api, accepted.json()["job_id"])["status"] == "succeeded"
    copied = listing(api, target)
    episodes, facts = by_kind(copied, "episode"), by_kind(copied, "fact")
    episode = episodes["I just moved to Berlin last month for a new job"]
    fact = facts["User just moved to Berlin last month for a new job"]
    assert episode["sources"][0]["metadata"] == {"dia_id": "D1:3"}
    assert episode["sources"][0]["role"] == "user"
    assert fact["sources"][0]["metadata"] == {"dia_id": "D1:3"}
    assert fact["episodes"] == [episode["id"]]
    assert [m["id"] for m in listing(api, target, episode=episode["id"])] == [fact["id"]]


def test_an_episode_filter_that_is_no_memory_id_is_refused(api: httpx.Client, user: str) -> None:
    for value in ("not-an-id", "../webhooks", ""):
        response = api.get("/v1/memories", params={"user_id": user, "episode": value})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_input" and "episode" in error["message"], error


def test_a_conversation_posted_as_sent_to_the_model_keeps_its_turns_only(
    api: httpx.Client, user: str
) -> None:
    """A chat server may post the messages it sends to an OpenAI model, instructions
    included: a `developer` message (that API's name for a system one) is accepted as a
    `system` one is, and neither is kept nor read for facts."""
    job = post(api, {"user_id": user, "messages": [
        {"role": "developer", "content": "You are a helpful assistant. I live in Paris."},
        {"role": "system", "content": "Answer briefly. My dog is called Max."},
        {"role": "user", "content": "I also have a dog named Rex"},
        {"role": "assistant", "content": "A dog named Rex, lovely!"},
    ]})
    assert job["result"]["episodes"] == 2, job
    items = listing(api, user)
    assert sorted((m["kind"], m["content"]) for m in items) == [
        ("episode", "A dog named Rex, lovely!"), ("episode", "I also have a dog named Rex"),
        ("fact", "User also has a dog named Rex")]
    context = api.post("/v1/context", json={
        "user_id": user, "query": "What is my dog called?",
        "recent_messages": [{"role": "developer", "content": "You are a helpful assistant."},
                            {"role": "user", "content": "What is my dog called?"}]})
    assert context.status_code == 200, context.text
    assert "Rex" in context.json()["block"]
