"""Hostile input from issue 31, against the live session stack (real HTTP, Redis, worker,
Qdrant Edge): each answers a 4xx with a stable code naming the field, or is normalised at
the boundary; nothing answers a 5xx, and nothing stored changes."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers import save, wait_job

from memoryd.memories.transfer import ImportRecord
from memoryd.records.schemas import METADATA_MAX_BYTES, METADATA_MAX_DEPTH, METADATA_MAX_ITEMS


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def raw_json(client: httpx.Client, method: str, path: str, body: Any,
             **params: Any) -> httpx.Response:
    """A body sent as the JSON text `json.dumps` writes: a lone surrogate goes as the escape
    `\\ud800`, as a hostile client would send it (httpx itself would refuse to encode it)."""
    return client.request(method, path, params=params, content=json.dumps(body).encode(),
                          headers={"content-type": "application/json"})


def refused(response: httpx.Response, field: str, status: int = 422,
            code: str = "invalid_input") -> str:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert error.get("field") == field, error
    message: str = error["message"]
    return message


@pytest.fixture()
def stored(api: httpx.Client, user: str) -> list[dict[str, Any]]:
    response = save(api, user, "I keep bees in my garden")
    assert response.status_code == 201, response.text
    return listed(api, user)


def ingested(api: httpx.Client, response: httpx.Response) -> dict[str, Any]:
    """The result of an interaction's job (the route has no `?wait=`)."""
    assert response.status_code == 202, response.text
    job = wait_job(api, response.json()["job_id"])
    assert job["status"] == "succeeded", job
    result: dict[str, Any] = job["result"]
    return result


def listed(api: httpx.Client, user: str) -> list[dict[str, Any]]:
    response = api.get("/v1/memories", params={"user_id": user})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


# ---- item 1: metadata bounded at every boundary ------------------------------------------

def test_metadata_depth_keys_and_size_are_bounded(
    api: httpx.Client, user: str, stored: list[dict[str, Any]]
) -> None:
    for depth in (METADATA_MAX_DEPTH + 1, 127, 400):
        message = refused(save(api, user, "deep", metadata=nested(depth)), "metadata")
        assert "deeper" in message
    wide = {f"k{i}": i for i in range(METADATA_MAX_ITEMS + 1)}
    assert "keys" in refused(save(api, user, "wide", metadata=wide), "metadata")
    big = {"text": "x" * METADATA_MAX_BYTES}
    assert "bytes" in refused(save(api, user, "big", metadata=big), "metadata")
    many_lists = {"l": [[1, 2, 3]] * (METADATA_MAX_ITEMS // 2)}
    refused(save(api, user, "lists", metadata=many_lists), "metadata")
    # NaN and Infinity: Python's JSON parser reads them.
    nan = api.post("/v1/memories", content=b'{"user_id": "%s", "content": "n", '
                   b'"metadata": {"x": NaN}}' % user.encode(),
                   headers={"content-type": "application/json"})
    assert "finite" in refused(nan, "metadata")

    turn = [{"role": "user", "content": "I like tea"}]
    refused(api.post("/v1/interactions", json={"user_id": user, "messages": turn,
                                               "metadata": nested(200)}), "metadata")
    deep_message = [{**turn[0], "metadata": nested(200)}]
    refused(api.post("/v1/interactions", json={"user_id": user, "messages": deep_message}),
            "messages[0].metadata")
    context = api.post("/v1/context", json={"user_id": user, "query": "tea",
                                            "recent_messages": deep_message})
    refused(context, "recent_messages[0].metadata")
    # PATCH takes no metadata: the field is refused by name, not stored.
    memory_id = stored[0]["id"]
    patched = api.patch(f"/v1/memories/{memory_id}", params={"user_id": user},
                        json={"metadata": nested(400)})
    refused(patched, "metadata", code="unknown_field")

    # Within the bounds, metadata is kept as sent.
    fine = {"source": {"app": "notes", "tags": ["a", "b"]}, "n": 1.5}
    kept = save(api, user, "I keep two hives", metadata=fine)
    assert kept.status_code == 201, kept.text
    assert kept.json()["memory"]["metadata"] == fine
    assert [m["content"] for m in listed(api, user)] == ["I keep two hives",
                                                        stored[0]["content"]]


def test_import_refuses_deep_nesting(
    api: httpx.Client, user: str, stored: list[dict[str, Any]]
) -> None:
    brackets = api.post("/v1/import", params={"user_id": user}, content=b"[" * 500000)
    assert "nests too deeply" in refused(brackets, "body")
    line = api.post("/v1/import", params={"user_id": user},
                    content=b'{"content": ' + b"[" * 500000)
    refused(line, "records[0]")
    record = {"content": "imported", "metadata": nested(400)}
    as_lines = api.post("/v1/import", params={"user_id": user},
                        content=json.dumps(record).encode() + b"\n")
    refused(as_lines, "records[0].metadata")
    as_array = api.post("/v1/import", params={"user_id": user},
                        json=[{"content": "fine"}, record])
    refused(as_array, "records[1].metadata")
    # The same bodies on a JSON route: the parser's own limit, a 400, never a 500.
    body = api.post("/v1/memories", content=b"[" * 500000,
                    headers={"content-type": "application/json"})
    assert 400 <= body.status_code < 500, body.text
    assert listed(api, user) == stored


def test_exported_metadata_imports_again(api: httpx.Client, user: str) -> None:
    """The bound is the same on both sides: what a save accepted, an import accepts."""
    fine = nested(METADATA_MAX_DEPTH)
    assert save(api, user, "I keep bees", metadata=fine).status_code == 201
    exported = api.get("/v1/export", params={"user_id": user}).text
    ImportRecord.model_validate(json.loads(exported.splitlines()[0]))
    imported = api.post("/v1/import", params={"user_id": user + "-copy", "wait": 0},
                        content=exported.encode())
    assert imported.status_code == 202, imported.text
    assert wait_job(api, imported.json()["job_id"])["status"] == "succeeded"


# ---- item 6: input that answered 500 or the wrong code -----------------------------------

OVERFLOWING = ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59",
               "0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00+01:00"]


@pytest.mark.parametrize("when", OVERFLOWING)
def test_dates_whose_offset_overflows(
    api: httpx.Client, user: str, stored: list[dict[str, Any]], when: str
) -> None:
    for field in ("as_of", "occurred_before", "occurred_after"):
        search = api.post("/v1/search", json={"user_id": user, "query": "bees", field: when})
        assert "years 1 to 9999" in refused(search, field)
    for field in ("expires_at", "occurred_at"):
        refused(save(api, user, "I keep wasps", **{field: when}), field)
    refused(api.patch(f"/v1/memories/{stored[0]['id']}", params={"user_id": user},
                      json={"expires_at": when}), "expires_at")
    for field in ("before", "after"):
        refused(api.delete("/v1/memories", params={"user_id": user, field: when}), field)
    imported = api.post("/v1/import", params={"user_id": user},
                        json=[{"content": "imported", "created_at": when}])
    refused(imported, "records[0].created_at")
    assert listed(api, user) == stored


def test_lone_surrogates_are_dropped_from_text_and_refused_elsewhere(
    api: httpx.Client, user: str, stored: list[dict[str, Any]]
) -> None:
    turn = ingested(api, raw_json(api, "POST", "/v1/interactions", {
        "user_id": user, "extract": "raw",
        "messages": [{"role": "user", "content": "My cat is called Pixel \ud800"}]}))
    assert [m["content"] for m in turn["memories"]] == ["My cat is called Pixel"]
    saved = raw_json(api, "POST", "/v1/memories",
                     {"user_id": user, "content": "I drive a \udfffvan"}, wait=20)
    assert saved.status_code == 201, saved.text
    assert saved.json()["memory"]["content"] == "I drive a van"
    after = listed(api, user)

    # A query is chat text too: read without the surrogate.
    query = raw_json(api, "POST", "/v1/search", {"user_id": user, "query": "cat \ud800"})
    assert query.status_code == 200, query.text
    assert query.json()["results"][0]["memory"]["content"] == "My cat is called Pixel"
    refused(raw_json(api, "POST", "/v1/memories", {
        "user_id": user, "content": "fine", "metadata": {"note": "x \ud800"}}), "metadata")
    refused(raw_json(api, "POST", "/v1/memories", {
        "user_id": user, "content": "fine", "metadata": {"\ud800": 1}}), "metadata")
    refused(raw_json(api, "POST", "/v1/memories", {
        "user_id": user, "content": "fine", "tags": ["a\ud800"]}), "tags[0]")
    refused(raw_json(api, "POST", "/v1/memories", {
        "user_id": user + "\ud800", "content": "fine"}), "user_id")
    # A message of nothing but a surrogate is dropped like an empty one (item 10).
    only = raw_json(api, "POST", "/v1/interactions", {
        "user_id": user, "messages": [{"role": "user", "content": "\ud800"}]})
    refused(only, "messages")
    assert listed(api, user) == after


def test_failed_jobs_cursor_that_is_no_number(api: httpx.Client) -> None:
    import base64

    for value in ("nan", "inf", "-Infinity"):
        raw = json.dumps({"v": value, "ids": []}).encode()
        cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        response = api.get("/v1/jobs", params={"status": "failed", "cursor": cursor})
        refused(response, "cursor")


def test_job_id_that_names_another_key(stack: Any, api: httpx.Client, api_b: httpx.Client,
                                       user: str) -> None:
    """`<id>:lease` named the running lease of a job (a string in Redis): 503 WRONGTYPE told
    any tenant that the job was running. Now every id that is not a job id is no job."""
    accepted = api.post("/v1/memories", json={"user_id": user, "content": "I like tea"})
    job_id = accepted.json()["job_id"]
    wait_job(api, job_id)
    # As while the job runs: its lease is held (the worker's own call, for a known state).
    # The worker records the success under its lease and drops the lease just after: take
    # it once the worker has let it go.
    deadline = time.monotonic() + 30
    while (left := stack.runtime.jobs.take_lease(job_id, "test-holder", 30)) is not None:
        assert time.monotonic() < deadline, f"the worker kept the job's lease ({left} s left)"
        time.sleep(0.05)
    try:
        unknown = api_b.get(f"/v1/jobs/{uuid.uuid4()}")
        assert unknown.status_code == 404
        for client in (api, api_b):
            for suffix in (":lease", ":x", "/../x"):
                response = client.get(f"/v1/jobs/{job_id}{suffix}")
                assert response.status_code == 404, response.text
                assert response.json()["error"]["code"] == "not_found"
            retry = client.post(f"/v1/jobs/{job_id}:lease/retry")
            assert retry.status_code == 404, retry.text
    finally:
        stack.runtime.jobs.drop_lease(job_id, "test-holder")


# ---- item 9: identifiers -----------------------------------------------------------------

HIDDEN = ["\u202eadmin\u200b", "ad\u200bmin", "admin\u2066", "\ufeffadmin", "ad\u00admin",
          "admin\u200e", "a\u2060b"]
PATHS = ["a/../b", "..", ".", "../users", "a/./b", "x/..", "a\\..\\b"]


@pytest.mark.parametrize("bad", HIDDEN + PATHS)
def test_identifiers_refuse_invisible_characters_and_dot_segments(
    api: httpx.Client, user: str, stored: list[dict[str, Any]], bad: str
) -> None:
    refused(save(api, bad, "I like tea"), "user_id")
    refused(api.get("/v1/memories", params={"user_id": bad}), "user_id")
    refused(api.post("/v1/search", json={"user_id": bad, "query": "tea"}), "user_id")
    refused(save(api, user, "I like tea", thread_id=bad), "thread_id")
    refused(save(api, user, "I like tea", key=bad), "key")
    refused(save(api, user, "I like tea", tags=["ok", bad]), "tags[1]")
    refused(save(api, user, "I like tea", project=bad), "project")
    turn = {"user_id": user, "messages": [{"role": "user", "content": "I like tea"}]}
    refused(api.post("/v1/interactions", json={**turn, "thread_id": bad}), "thread_id")
    refused(api.post("/v1/import", params={"user_id": bad}, json=[{"content": "x"}]),
            "user_id")
    users = api.get("/v1/users").json()["items"]
    assert bad not in [u["user_id"] for u in users]
    assert listed(api, user) == stored


def test_identifiers_that_stay_valid(api: httpx.Client, user: str) -> None:
    for name in (f"{user}/a.b", f"{user}...", f"{user}.v2", f"{user}-😀"):
        response = save(api, name, "I like tea", tags=["❤️", "v1.2"], thread_id="t.1/2")
        assert response.status_code == 201, response.text


# ---- item 10: a message empty once normalised --------------------------------------------

@pytest.mark.parametrize("mode", ["raw", "rules"])
def test_message_empty_once_normalised_is_dropped(api: httpx.Client, user: str,
                                                  mode: str) -> None:
    messages = [{"role": "user", "content": "I moved to Lisbon in May"},
                {"role": "assistant", "content": "\u200b"},
                {"role": "user", "content": "\u200b\ufeff"},
                {"role": "user", "content": "My sister is called Ana"}]
    result = ingested(api, api.post("/v1/interactions", json={
        "user_id": user, "messages": messages, "extract": mode}))
    assert result["dropped_messages"] == [{"index": 1, "reason": "empty once normalised"},
                                          {"index": 2, "reason": "empty once normalised"}]
    assert result["added"] >= 1
    contents = " ".join(m["content"] for m in listed(api, user))
    assert "Ana" in contents
    assert mode == "rules" or "Lisbon" in contents  # rules keep only the facts they know


def test_interaction_with_nothing_left_is_refused(api: httpx.Client, user: str,
                                                  stored: list[dict[str, Any]]) -> None:
    empty = [{"role": "user", "content": "\u200b"}, {"role": "assistant", "content": " \x00"}]
    message = refused(api.post("/v1/interactions", json={"user_id": user, "messages": empty}),
                      "messages")
    assert "empty" in message
    assert listed(api, user) == stored


# ---- item 7: memory text never reaches the logs ------------------------------------------

@pytest.fixture()
def captured_logs() -> Iterator[io.StringIO]:
    """Every record the stack logs while the test runs, through the stack's own formatter
    (the processors that render and scrub a record), at every level."""
    root = logging.getLogger()
    assert root.handlers, "the stack configured logging"
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(root.handlers[0].formatter)
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_surrogate_text_never_reaches_logs_or_jobs(
    api: httpx.Client, user: str, captured_logs: io.StringIO
) -> None:
    marker = f"LOGMARK{uuid.uuid4().hex[:8]}"
    bodies = [
        ("/v1/memories", {"user_id": user, "content": f"{marker} \ud800 poison"}),
        ("/v1/memories", {"user_id": user, "content": "fine",
                          "metadata": {"k": f"{marker}\ud800"}}),
        ("/v1/interactions", {"user_id": user, "messages": [
            {"role": "user", "content": f"{marker} \ud800 poison"}]}),
        ("/v1/search", {"user_id": user, "query": f"{marker} \ud800"}),
    ]
    jobs = []
    for path, body in bodies:
        response = raw_json(api, "POST", path, body)
        assert response.status_code < 500, response.text
        if response.status_code == 202:
            jobs.append(response.json()["job_id"])
    for job_id in jobs:
        job = wait_job(api, job_id)
        assert job["status"] == "succeeded", job
    time.sleep(0.2)  # the worker's last records (task_succeeded) follow the job's state
    logged = captured_logs.getvalue()
    assert logged, "the capture saw the stack's records"
    assert marker not in logged
    assert "ud800" not in logged
