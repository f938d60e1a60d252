"""The OpenAI-compatible memory proxy, driven by the official `openai` client against a
gateway whose upstream is a local fake chat server (real HTTP both ways), over the session
stack's Redis, worker and index."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from conftest import KEY_A
from helpers import save, search, wait_job
from live_gateway import gateway, settings_with
from pydantic import SecretStr

from memoryd.platform.redis_runtime import free_port
from memoryd.proxy.sse import StreamWatch
from memoryd.tenancy.api_keys import ApiKeyStore, KeyScope
from memoryd.testing.fake_llm import FakeLLM, http_error, streamed, text_reply

UPSTREAM_KEY = "sk-upstream-secret"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy_url(stack: Any, upstream: FakeLLM) -> Iterator[str]:
    settings = settings_with(stack, proxy_upstream_url=upstream.openai_url,
                             proxy_upstream_api_key=SecretStr(UPSTREAM_KEY))
    with gateway(settings, stack.runtime.index) as url:
        yield url


@pytest.fixture()
def fake(upstream: FakeLLM) -> FakeLLM:
    upstream.reset()
    upstream.default = text_reply("Sure.")
    return upstream


def client(url: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY_A, max_retries=0,
                         default_headers=headers)


def test_memory_goes_in_as_a_system_message(
    proxy_url: str, fake: FakeLLM, api: httpx.Client, user: str,
) -> None:
    for content in ("I am allergic to peanuts", "My sister lives in Porto and teaches maths",
                    "I am learning Japanese on weekends"):
        assert save(api, user, content).status_code == 201
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}}}}]
    raw = client(proxy_url, **{"X-Memoryd-User": user}).chat.completions.with_raw_response.create(
        model="fake-model", temperature=0.25, tools=tools,  # type: ignore[arg-type]
        messages=[{"role": "system", "content": "You are a cook."},
                  {"role": "user", "content": "Am I allergic to peanuts?"}],
        extra_body={"provider_option": {"keep": [1, 2]}},
    )
    assert raw.parse().choices[0].message.content == "Sure."
    assert raw.headers["X-Memoryd-Memory"] == "used"
    (sent,) = fake.received()
    roles = [m["role"] for m in sent.messages]
    assert roles == ["system", "system", "user"]  # after the client's own system message
    assert sent.messages[0]["content"] == "You are a cook."
    assert "allergic to peanuts" in sent.messages[1]["content"]
    assert sent.messages[2]["content"] == "Am I allergic to peanuts?"
    # Every other field as the client sent it; the upstream's key, never the caller's.
    assert sent.body["tools"] == tools and sent.body["temperature"] == 0.25
    assert sent.body["provider_option"] == {"keep": [1, 2]}
    assert sent.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_models_list_is_the_upstreams(
    stack: Any, proxy_url: str, fake: FakeLLM, base_url: str,
) -> None:
    """`client.models.list()` through the proxy: the upstream's list, asked for with the
    upstream's key; a read-only key may list; no upstream is 404 as for chat."""
    fake.models = ["gpt-fake-mini", "gpt-fake-large"]
    raw = client(proxy_url).models.with_raw_response.list()
    assert [m.id for m in raw.parse().data] == ["gpt-fake-mini", "gpt-fake-large"]
    assert raw.headers["x-ratelimit-remaining-requests"] == "99"  # the upstream's advice
    (sent,) = fake.model_requests
    assert sent.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    reader = ApiKeyStore(stack.runtime.redis).create(
        "tenant-a", frozenset({KeyScope.READ}), name="test-proxy-models")[0]
    listed = openai.OpenAI(base_url=f"{proxy_url}/v1", api_key=reader, max_retries=0)
    assert [m.id for m in listed.models.list()] == ["gpt-fake-mini", "gpt-fake-large"]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{proxy_url}/v1", api_key="mk_not_a_key",
                      max_retries=0).models.list()
    assert len(fake.model_requests) == 2  # the refused call never went upstream
    with pytest.raises(openai.NotFoundError) as unset:  # the session gateway has no upstream
        client(base_url).models.list()
    assert unset.value.body["code"] == "proxy_not_configured"  # type: ignore[index]


def test_turn_is_stored_once_even_when_retried(
    proxy_url: str, fake: FakeLLM, api: httpx.Client, user: str,
) -> None:
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    chat = client(proxy_url, **{"X-Memoryd-User": user, "X-Memoryd-Thread": thread})
    messages: Any = [{"role": "user", "content": "My favourite food is ramen with extra egg"}]
    # The retry is answered differently: the turn is still stored once, with the first.
    fake.script(text_reply("Ramen it is."), text_reply("Noted: ramen."))
    jobs = []
    for _ in range(2):  # the client's retry of the same request
        raw = chat.chat.completions.with_raw_response.create(model="m", messages=messages)
        assert raw.headers["X-Memoryd-Memory"] in ("empty", "used")
        jobs.append(raw.headers["X-Memoryd-Job"])
        assert wait_job(api, jobs[-1])["status"] == "succeeded"
    assert jobs[0] == jobs[1]
    hits = search(api, user, "what food do I like?")
    ramen = "User's favourite food is ramen with extra egg"
    # The turn as the default extraction keeps it: both messages as episodes, the fact.
    facts = [h["memory"] for h in hits if h["memory"]["kind"] == "fact"]
    assert [m["content"] for m in facts] == [ramen]
    assert facts[0]["thread_id"] == thread
    listed = api.get("/v1/memories", params={"user_id": user}).json()["items"]
    assert sorted((m["kind"], m["content"]) for m in listed) == [
        ("episode", "My favourite food is ramen with extra egg"), ("episode", "Ramen it is."),
        ("fact", ramen)]


def test_stream_passes_through_chunk_by_chunk_and_is_stored(
    proxy_url: str, fake: FakeLLM, api: httpx.Client, user: str,
) -> None:
    deltas = ["Night ", "shifts ", "are ", "hard", "; ", "sleep ", "well."]
    fake.script(streamed(deltas))
    raw = client(proxy_url, **{"X-Memoryd-User": user}).chat.completions.with_raw_response.create(
        model="m", stream=True,
        messages=[{"role": "user", "content": "I work as a nurse on night shifts"}])
    assert raw.headers["content-type"].startswith("text/event-stream")
    got = [c.choices[0].delta.content for c in raw.parse() if c.choices]
    assert [d for d in got if d] == deltas  # in order, none merged or split
    assert wait_job(api, raw.headers["X-Memoryd-Job"])["status"] == "succeeded"
    hits = search(api, user, "what is my job?")
    kept = {h["memory"]["content"]: h["memory"]["kind"] for h in hits}
    assert kept["User works as a nurse on night shifts"] == "fact"
    assert kept["I work as a nurse on night shifts"] == "episode"
    assert kept["Night shifts are hard; sleep well."] == "episode"  # the streamed answer


def test_the_next_turn_reads_the_previous_turns_memory(
    proxy_url: str, fake: FakeLLM, user: str,
) -> None:
    """A turn's memory reaches the very next turn's context, although storing it is
    asynchronous: the lookup waits for the user's pending writes first."""
    chat = client(proxy_url, **{"X-Memoryd-User": user})
    first = chat.chat.completions.with_raw_response.create(model="m", messages=[
        {"role": "user", "content": "Remember that I moved to Berlin in March 2024"}])
    assert first.headers["X-Memoryd-Job"]  # enqueued, and not awaited by this test
    following = chat.chat.completions.with_raw_response.create(model="m", messages=[
        {"role": "user", "content": "So I moved to Berlin in March 2024?"}])
    assert following.headers["X-Memoryd-Fresh"] == "applied"
    assert following.headers["X-Memoryd-Memory"] == "used"
    _, sent = fake.received()
    assert "Berlin" in sent.messages[0]["content"]  # the memory block, before the question
    assert sent.messages[-1]["content"] == "So I moved to Berlin in March 2024?"


def test_the_turn_after_a_stream_reads_its_memory(
    proxy_url: str, fake: FakeLLM, user: str,
) -> None:
    """The same across a stream: the turn is enqueued before `data: [DONE]` is relayed, and
    the client sends its next turn only after reading it."""
    chat = client(proxy_url, **{"X-Memoryd-User": user})
    fake.script(streamed(["Good ", "luck ", "with ", "the ", "exam."]))
    stream = chat.chat.completions.create(model="m", stream=True, messages=[
        {"role": "user", "content": "I have my driving exam on Friday"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    following = chat.chat.completions.with_raw_response.create(model="m", messages=[
        {"role": "user", "content": "When is my driving exam?"}])
    assert following.headers["X-Memoryd-Fresh"] == "applied"
    assert following.headers["X-Memoryd-Memory"] == "used"
    _, sent = fake.received()
    assert "driving exam" in sent.messages[0]["content"]


def test_stream_reassembly_reads_the_upstream_bytes(fake: FakeLLM) -> None:
    """What is stored as the answer of a stream: its deltas joined, read off the same bytes
    the caller gets, in reads of any size."""
    deltas = ["Grüße ", "aus ", "Berlin", " 🙂"]
    fake.script(streamed(deltas))
    watch = StreamWatch()
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.stream("POST", f"{fake.openai_url}/chat/completions", json=body) as response:
        for piece in response.iter_raw(7):  # lines and UTF-8 characters cut across reads
            watch.feed(piece)
    watch.close()
    assert watch.text == "".join(deltas) and watch.done and watch.finished


def test_upstream_errors_pass_through(proxy_url: str, fake: FakeLLM, user: str) -> None:
    chat = client(proxy_url, **{"X-Memoryd-User": user})
    messages: Any = [{"role": "user", "content": "hello"}]
    fake.script(http_error(429, "slow down please", retry_after=7))
    with pytest.raises(openai.RateLimitError) as limited:
        chat.chat.completions.create(model="m", messages=messages)
    assert limited.value.response.headers["retry-after"] == "7"
    assert "slow down please" in limited.value.message
    assert "X-Memoryd-Job" not in limited.value.response.headers  # nothing to store
    fake.script(http_error(500, "the model crashed"))
    with pytest.raises(openai.InternalServerError) as crashed:
        chat.chat.completions.create(model="m", messages=messages, stream=True)
    assert crashed.value.status_code == 500 and "the model crashed" in crashed.value.message


def test_unreachable_and_unconfigured_upstreams(stack: Any, base_url: str, user: str) -> None:
    messages: Any = [{"role": "user", "content": "hello"}]
    dead = settings_with(stack, proxy_upstream_url=f"http://127.0.0.1:{free_port()}/v1")
    with gateway(dead, stack.runtime.index) as url:
        with pytest.raises(openai.APIStatusError) as unreachable:
            client(url, **{"X-Memoryd-User": user}).chat.completions.create(
                model="m", messages=messages)
    assert unreachable.value.status_code == 502
    assert unreachable.value.body["code"] == "upstream_unreachable"  # type: ignore[index]
    # The session stack's gateway has no upstream.
    with pytest.raises(openai.NotFoundError) as unset:
        client(base_url).chat.completions.create(model="m", messages=messages)
    assert unset.value.body["code"] == "proxy_not_configured"  # type: ignore[index]


def test_without_a_user_the_request_goes_unchanged(proxy_url: str, fake: FakeLLM) -> None:
    messages: Any = [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": "My favourite food is ramen"}]
    raw = client(proxy_url).chat.completions.with_raw_response.create(
        model="m", messages=messages)
    assert raw.headers["X-Memoryd-Memory"] == "none"
    assert "X-Memoryd-Job" not in raw.headers
    assert fake.received()[0].messages == messages


def test_the_header_names_the_user_before_the_user_field(
    proxy_url: str, fake: FakeLLM, api: httpx.Client, user: str,
) -> None:
    assert save(api, user, "My sister lives in Porto and teaches maths").status_code == 201
    chat = client(proxy_url)
    messages: Any = [{"role": "user", "content": "where does my sister live?"}]
    by_field = chat.chat.completions.with_raw_response.create(
        model="m", messages=messages, user=user)
    assert by_field.headers["X-Memoryd-Memory"] == "used"
    other = f"other-{uuid.uuid4().hex[:8]}"
    by_header = chat.chat.completions.with_raw_response.create(
        model="m", messages=messages, user=user, extra_headers={"X-Memoryd-User": other})
    assert by_header.headers["X-Memoryd-Memory"] == "empty"  # the header's user has none
    first, second = fake.received()
    assert "My sister lives in Porto" in first.messages[0]["content"]
    assert second.messages == messages  # nothing for the other user: no block went in
    assert first.body["user"] == second.body["user"] == user  # forwarded as sent


def test_a_client_that_leaves_mid_stream_stores_nothing(
    proxy_url: str, fake: FakeLLM, api: httpx.Client, user: str,
) -> None:
    fake.script(streamed([f"word{i} " for i in range(40)], chunk_delay_s=0.05))
    raw = client(proxy_url, **{"X-Memoryd-User": user}).chat.completions.with_raw_response.create(
        model="m", stream=True,
        messages=[{"role": "user", "content": "I run 10 km every Sunday morning"}])
    job = raw.headers["X-Memoryd-Job"]
    stream = raw.parse()
    for _, _chunk in zip(range(3), stream, strict=False):
        pass
    stream.close()
    deadline = time.monotonic() + 10
    while fake.streams_cut == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.streams_cut == 1  # the proxy closed the upstream stream too
    time.sleep(0.5)  # the relay has wound down by now
    assert api.get(f"/v1/jobs/{job}").status_code == 404
    assert api.get("/v1/memories", params={"user_id": user}).json()["items"] == []


def test_bad_input_names_the_field(proxy_url: str, fake: FakeLLM) -> None:
    auth = {"Authorization": f"Bearer {KEY_A}"}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=proxy_url, headers=auth, timeout=30) as http:
        cases = [
            ({"X-Memoryd-User": "x" * 200}, body, "X-Memoryd-User"),
            ({}, {**body, "user": "   "}, "user"),
            ({"X-Memoryd-User": "u", "X-Memoryd-Thread": "t" * 200}, body, "X-Memoryd-Thread"),
            ({"X-Memoryd-User": "u", "X-Memoryd-Token-Budget": "5"}, body,
             "x-memoryd-token-budget"),
            ({}, {"model": "m", "messages": []}, "messages"),
        ]
        for headers, payload, field in cases:
            response = http.post("/v1/chat/completions", json=payload, headers=headers)
            assert response.status_code == 422, response.text
            assert response.json()["error"]["field"] == field
    assert fake.received() == []  # refused before anything went upstream


def test_the_proxy_needs_read_and_write_scopes(
    stack: Any, proxy_url: str, fake: FakeLLM, user: str,
) -> None:
    store = ApiKeyStore(stack.runtime.redis)
    messages: Any = [{"role": "user", "content": "hello"}]
    for scopes, missing in (({KeyScope.READ}, "write"), ({KeyScope.WRITE}, "read")):
        key = store.create("tenant-a", frozenset(scopes), name="test-proxy-scope")[0]
        chat = openai.OpenAI(base_url=f"{proxy_url}/v1", api_key=key, max_retries=0,
                             default_headers={"X-Memoryd-User": user})
        with pytest.raises(openai.PermissionDeniedError) as refused:
            chat.chat.completions.create(model="m", messages=messages)
        assert refused.value.body["field"] == "scope"  # type: ignore[index]
        assert missing in refused.value.message
    assert fake.received() == []
