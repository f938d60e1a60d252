"""Real chat text is accepted: invisible characters are dropped from content and from
queries, while identifiers keep refusing them."""

from __future__ import annotations

import httpx
import pytest
from helpers import save, wait_job

from memoryd.records.schemas import normalize_text

DIRTY = "\u200bMy\x02 dentist is Dr\x7f Okafor\ufeff,\tsince 2019\r\n\u2060"
CLEAN = "My dentist is Dr Okafor,\tsince 2019\r\n"


def contents(api: httpx.Client, user: str) -> list[str]:
    items = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    return [m["content"] for m in items]


def test_normalize_text_drops_only_invisible_characters() -> None:
    kept = "tab\there\nline\rcr 猫 é 👍"
    assert normalize_text(kept) == kept
    assert normalize_text("".join(map(chr, range(32))) + "\x7f") == "\t\n\r"
    assert normalize_text("a\u200bb\u200cc\u200dd\u2060e\ufeff") == "abcde"


def test_one_control_character_in_64_messages_is_accepted(api: httpx.Client, user: str) -> None:
    messages = [{"role": "assistant", "content": f"Noted, point {i}."} for i in range(63)]
    messages.insert(40, {"role": "user", "content": DIRTY})
    response = api.post("/v1/interactions", json={
        "user_id": user, "extract": "raw", "messages": messages})
    assert response.status_code == 202, response.text
    assert wait_job(api, response.json()["job_id"])["status"] == "succeeded"
    assert [c.strip() for c in contents(api, user)] == [CLEAN.strip()]


def test_save_edit_and_import_store_normalised_content(api: httpx.Client, user: str) -> None:
    saved = save(api, user, DIRTY)
    assert saved.status_code == 201, saved.text
    memory = saved.json()["memory"]
    assert memory["content"].strip() == CLEAN.strip()
    edited = api.patch(f"/v1/memories/{memory['id']}", params={"user_id": user, "wait": 20},
                       json={"content": "Prefers\x01 window\u200d seats"})
    assert edited.status_code == 200, edited.text
    imported = api.post("/v1/import", params={"user_id": user},
                        json=[{"content": "Runs\x1b[0m marathons\u200b"}])
    assert imported.status_code == 202, imported.text
    assert wait_job(api, imported.json()["job_id"])["status"] == "succeeded"
    assert sorted(contents(api, user)) == ["Prefers window seats", "Runs[0m marathons"]


@pytest.mark.parametrize("content", ["\x02\u200b", "\ufeff \x03"])
def test_content_that_is_only_invisible_is_refused(
    api: httpx.Client, user: str, content: str
) -> None:
    refused = api.post("/v1/memories", json={"user_id": user, "content": content})
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "content"


@pytest.mark.parametrize(("field", "value"), [
    ("user_id", "alice\x02"), ("thread_id", "t\x00 1"), ("key", "slot\x1b"),
])
def test_identifiers_still_refuse_control_characters(
    api: httpx.Client, user: str, field: str, value: str
) -> None:
    body = {"user_id": user, "content": "Has a cat", field: value}
    refused = api.post("/v1/memories", json=body)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_input" and error["field"] == field
    assert "control characters" in error["message"]


def test_a_query_is_read_without_its_invisible_characters(api: httpx.Client, user: str) -> None:
    """A chat server asks with the user's latest turn as typed: a stray control character
    in it must not cost the answer its memories (the same turn, posted, is accepted)."""
    assert save(api, user, "My dentist is Dr Okafor").status_code == 201
    asked = "Who is my\x02 dentist\u200b?\x1b"
    clean = api.post("/v1/search", json={"user_id": user, "query": "Who is my dentist?"})
    search = api.post("/v1/search", json={"user_id": user, "query": asked})
    assert search.status_code == 200, search.text
    assert ([h["score"] for h in search.json()["results"]]
            == [h["score"] for h in clean.json()["results"]])
    assert search.json()["results"][0]["memory"]["content"] == "My dentist is Dr Okafor"
    context = api.post("/v1/context", json={"user_id": user, "query": asked})
    assert context.status_code == 200, context.text
    assert "Dr Okafor" in context.json()["block"]


@pytest.mark.parametrize("path", ["/v1/search", "/v1/context"])
def test_a_query_of_only_invisible_characters_is_refused(
    api: httpx.Client, user: str, path: str
) -> None:
    refused = api.post(path, json={"user_id": user, "query": "\x02\u200b \ufeff"})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_input" and error["field"] == "query"
