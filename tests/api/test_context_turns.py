"""Threads keep their order: a hit brings its next turn along, and an event said again
at another time is another memory."""

from __future__ import annotations

import httpx
from helpers import search, wait_job


def label_of(score: float) -> str:
    return "high" if score >= 0.7 else "relevant" if score >= 0.5 else "reference"


def post_raw(api: httpx.Client, user: str, thread: str, at: str, *texts: str) -> None:
    job = api.post("/v1/interactions", json={
        "user_id": user, "thread_id": thread, "extract": "raw",
        "messages": [{"role": "user", "content": t, "created_at": at} for t in texts],
    }).json()
    assert wait_job(api, job["job_id"])["status"] == "succeeded"


def test_next_turn_comes_with_its_hit_across_interactions(api: httpx.Client, user: str) -> None:
    post_raw(api, user, "trip", "2024-03-01T10:00:00Z", "I finally booked the trip we planned")
    post_raw(api, user, "trip", "2024-03-01T10:01:00Z", "It departs on June 3 from Porto")
    post_raw(api, user, "work", "2024-02-01T09:00:00Z",
             "The business trip to Berlin was cancelled", "Rome has the best pasta")
    hits = search(api, user, "Which trip did I book?", top_k=3, mode="hybrid")
    assert hits[0]["memory"]["content"] == "I finally booked the trip we planned"
    assert hits[1]["memory"]["content"] == "It departs on June 3 from Porto"
    assert hits[1]["context_of"] == hits[0]["memory"]["id"]
    # The next turn is context: its score and label are what its own text earned.
    assert hits[1]["score"] < hits[0]["score"]
    assert hits[1]["label"] == label_of(hits[1]["score"])
    floor = (hits[1]["score"] + hits[0]["score"]) / 2
    above = search(api, user, "Which trip did I book?", top_k=3, mode="hybrid", min_score=floor)
    assert [h["memory"]["id"] for h in above] == [hits[0]["memory"]["id"]]
    dense = search(api, user, "Which trip did I book?", top_k=3, mode="dense")
    assert all(h["context_of"] is None for h in dense)


def test_same_words_at_another_time_are_another_event(api: httpx.Client, user: str) -> None:
    post_raw(api, user, "gym", "2024-01-01T08:00:00Z", "Went to the gym this morning")
    post_raw(api, user, "gym", "2024-01-03T08:00:00Z", "Went to the gym this morning")
    post_raw(api, user, "gym", "2024-01-03T08:00:00Z", "Went to the gym this morning")
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert sorted(m["occurred_at"] for m in items) == ["2024-01-01T08:00:00Z",
                                                       "2024-01-03T08:00:00Z"]


def test_a_next_turn_is_context_in_the_block_not_a_hit(api: httpx.Client, user: str) -> None:
    post_raw(api, user, "family", "2024-04-01T10:00:00Z", "My daughter is called Mia",
             "我喜欢吃火锅")
    body = api.post("/v1/context", json={"user_id": user,
                                         "query": "what is my daughter called?"}).json()
    items = {i["memory"]["content"]: i for i in body["items"]}
    assert "My daughter is called Mia" in items
    pot = items.get("我喜欢吃火锅")
    if pot is not None:  # shown only as the context of its hit, with its own score
        assert pot["context_of"] == items["My daughter is called Mia"]["memory"]["id"]
        assert pot["label"] == "context"
        assert pot["score"] < items["My daughter is called Mia"]["score"]
