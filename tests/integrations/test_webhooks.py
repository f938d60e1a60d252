"""Webhooks against the live stack: real HTTP receivers on 127.0.0.1, real Celery deliveries on
the webhooks queue, the documented signature check, URL policy and tenancy.

The session stack allows 127.0.0.1 and keeps timeouts and backoff short with three attempts
(tests/conftest.py). Each test registers its own endpoints under a tenant of its own, so no
other test's writes reach these receivers.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from memoryd.client import ApiError, AsyncMemorydClient, MemorydClient
from memoryd.jobs.enqueue import submit
from memoryd.jobs.names import TaskName
from memoryd.platform.errors import InvalidInput
from memoryd.platform.settings import Settings
from memoryd.records.commands import UpdateCommand
from memoryd.records.models import utcnow
from memoryd.records.schemas import UpdateRequest
from memoryd.records.webhooks import EventKind, WebhookCreate
from memoryd.tenancy.api_keys import ALL_SCOPES, ApiKeyStore, KeyScope
from memoryd.webhooks.events import JobEnd
from memoryd.webhooks.service import Webhooks
from memoryd.webhooks.signing import signature, signature_header
from memoryd.webhooks.urls import UrlPolicy, WebhookUrlRefused, check_url

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def documented_verify() -> Callable[..., bool]:
    """The `verify` function of docs/integrations.md's Webhooks section, as a reader copies it."""
    section = DOC.read_text().split("## Webhooks", 1)[1].split("\n## ", 1)[0]
    code = next(block for block in re.findall(r"```python\n(.*?)```", section, re.S)
                if "def verify" in block)
    namespace: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    verify: Callable[..., bool] = namespace["verify"]
    return verify


# ---- a receiver ---------------------------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


class Receiver:
    """An HTTP server on 127.0.0.1 answering each POST by `plan(n)` (n from 1): a status, or
    ("sleep", seconds) to answer 200 only after that long."""

    def __init__(self, plan: Callable[[int], int | tuple[str, float]] = lambda n: 200,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.plan = plan
        self.received: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (the stdlib's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.received.append(Received(dict(self.headers.items()), body))
                    n = len(receiver.received)
                action = receiver.plan(n)
                if isinstance(action, tuple):
                    time.sleep(action[1])
                    action = 200
                try:
                    self.send_response(action)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up waiting

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def wait_for(self, count: int, timeout_s: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        raise AssertionError(f"{len(self.received)} of {count} requests arrived")

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@pytest.fixture()
def receivers() -> Iterator[Callable[..., Receiver]]:
    started: list[Receiver] = []

    def start(plan: Callable[[int], int | tuple[str, float]] = lambda n: 200,
              host: str = "127.0.0.1", port: int = 0) -> Receiver:
        receiver = Receiver(plan, host, port)
        started.append(receiver)
        return receiver

    yield start
    for receiver in started:
        receiver.stop()


# ---- a tenant of the test's own ------------------------------------------------------


@pytest.fixture()
def tenant(stack: Any) -> str:
    return f"wh-{uuid.uuid4().hex[:10]}"


def _key(stack: Any, tenant: str, scopes: frozenset[KeyScope] = ALL_SCOPES) -> str:
    key, _ = ApiKeyStore(stack.runtime.redis).create(tenant, scopes, "webhooks test")
    return key


@pytest.fixture()
def owner(stack: Any, base_url: str, tenant: str) -> Iterator[httpx.Client]:
    """The tenant's admin client; its endpoints are removed afterwards."""
    with httpx.Client(base_url=base_url, timeout=30.0,
                      headers={"Authorization": f"Bearer {_key(stack, tenant)}"}) as client:
        yield client
        for item in client.get("/v1/webhooks").json()["items"]:
            client.delete(f"/v1/webhooks/{item['id']}")


def register(client: httpx.Client, url: str, events: list[str],
             include_content: bool = False) -> dict[str, Any]:
    response = client.post("/v1/webhooks", json={"url": url, "events": events,
                                                 "include_content": include_content})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    assert created["secret"].startswith("whsec_")
    return created


def save(client: httpx.Client, user: str, content: str) -> dict[str, Any]:
    response = client.post("/v1/memories", params={"wait": 20},
                           json={"user_id": user, "content": content})
    assert response.status_code in (200, 201), response.text
    result: dict[str, Any] = response.json()
    return result


def deliveries(client: httpx.Client, webhook_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/webhooks/{webhook_id}/deliveries")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def settled(client: httpx.Client, webhook_id: str, count: int,
            timeout_s: float = 20.0) -> list[dict[str, Any]]:
    """The endpoint's deliveries once `count` of them are delivered or failed."""
    deadline = time.monotonic() + timeout_s
    while True:
        items = deliveries(client, webhook_id)
        done = [d for d in items if d["status"] in ("delivered", "failed")]
        if len(done) >= count or time.monotonic() > deadline:
            return items
        time.sleep(0.05)


# ---- URL policy ----------------------------------------------------------------------


def test_url_policy_refuses_internal_hosts_by_default() -> None:
    default = UrlPolicy.from_settings(Settings())
    for url in ("http://127.0.0.1:8420/v1/admin", "http://[::1]/x", "http://169.254.169.254/",
                "http://[fe80::1]/x", "http://0.0.0.0/x", "http://10.1.2.3/x",
                "http://192.168.1.1/x", "http://[::ffff:127.0.0.1]/x", "http://224.0.0.1/x"):
        with pytest.raises(WebhookUrlRefused) as refused:
            check_url(url, default)
        assert refused.value.field == "url" and refused.value.code == "url_refused"
    # A name is judged by every address it resolves to.
    with pytest.raises(WebhookUrlRefused):
        check_url("https://hooks.internal/x", default, lambda host, port: ["93.184.216.34",
                                                                            "127.0.0.1"])
    assert check_url("https://hooks.example/x", default, lambda host, port: ["93.184.216.34"])
    for url in ("ftp://example.com/x", "http://user:pw@example.com/x", "http:///x",
                "http://example.com/" + "a" * 2048, "http://exa mple.com/"):
        with pytest.raises(InvalidInput) as invalid:
            check_url(url, default)
        assert invalid.value.field == "url"
    private = UrlPolicy.from_settings(Settings(webhook_allow_private=True))
    assert check_url("http://10.1.2.3/x", private)
    with pytest.raises(WebhookUrlRefused):
        check_url("http://127.0.0.1/x", private)  # private allowed, loopback still refused
    allowed = UrlPolicy.from_settings(Settings(webhook_allow_hosts="127.0.0.1,hooks.lan"))
    assert check_url("http://127.0.0.1:9000/x", allowed)
    assert check_url("http://hooks.lan/x", allowed)
    with pytest.raises(WebhookUrlRefused):
        check_url("http://127.0.0.2/x", allowed)


def test_url_policy_refuses_ipv4_embedded_in_ipv6_and_special_ranges() -> None:
    default = UrlPolicy.from_settings(Settings())
    private = UrlPolicy.from_settings(Settings(webhook_allow_private=True))
    refused = {
        "http://[2002:7f00:1::]/": "6to4 address of 127.0.0.1",
        "http://[2002:a9fe:a9fe::]/": "6to4 address of 169.254.169.254",
        "http://[2002:a00:1::]/": "6to4 address of 10.0.0.1",
        # Teredo: server 65.54.227.120, client 127.0.0.1 (stored inverted, ~0x7f000001).
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/": "Teredo address of 127.0.0.1",
        "http://[64:ff9b::a9fe:a9fe]/": "NAT64 address of 169.254.169.254",
        "http://[64:ff9b::7f00:1]/": "NAT64 address of 127.0.0.1",
        "http://[64:ff9b:1::7f00:1]/": "private address",
        "http://192.0.0.192/": "special-purpose",
        "http://192.0.0.8/": "special-purpose",
        "http://192.88.99.1/": "special-purpose",
        "http://255.255.255.255/": "special-purpose",
        "http://[::7f00:1]/": "special-purpose",
        "http://[3fff::1]/": "special-purpose",
        "http://[fec0::1]/": "private address",
    }
    for url, why in refused.items():
        with pytest.raises(WebhookUrlRefused) as caught:
            check_url(url, default)
        assert why in caught.value.message, caught.value.message
        assert caught.value.field == "url" and caught.value.code == "url_refused"
    # Allowing private networks does not allow loopback or metadata through an embedding.
    for url in ("http://[2002:7f00:1::]/", "http://[64:ff9b::a9fe:a9fe]/",
                "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/"):
        with pytest.raises(WebhookUrlRefused):
            check_url(url, private)
    # Embeddings of public addresses are public: 6to4 and NAT64 of 93.184.216.34.
    assert check_url("http://[2002:5db8:d822::1]/", default)
    assert check_url("http://[64:ff9b::5db8:d822]/", default)
    assert check_url("http://[2606:4700::1111]/", default)


def test_a_delivery_connects_to_the_address_it_checked(
    stack: Any, tenant: str, receivers: Callable[..., Receiver],
) -> None:
    """DNS rebinding: the name resolves to an allowed address when checked and to 127.0.0.1
    afterwards. The system resolver answers 127.0.0.1 for "localhost"; the delivery's
    resolver (injected, as the service takes one) answers 127.0.0.2 the first time and
    127.0.0.1 after that. Two receivers share a port: the internal one on 127.0.0.1 and the
    checked one on 127.0.0.2, which the policy allows alone."""
    internal = receivers()
    port = int(internal.url.split(":")[2].split("/")[0])
    checked = receivers(host="127.0.0.2", port=port)
    answers: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        answers.append("127.0.0.2" if not answers else "127.0.0.1")
        return [answers[-1]]

    rt = stack.runtime
    hooks = Webhooks(rt.redis, rt.celery, rt.settings.model_copy(
        update={"webhook_allow_hosts": "127.0.0.2"}), resolve=rebinding)
    endpoint = hooks.endpoints.create(tenant, WebhookCreate(
        url=f"http://localhost:{port}/hook?x=1", events=[EventKind.JOB_SUCCEEDED]))
    try:
        assert hooks.log.claim(tenant, endpoint.id, "dlv_rebind", "evt_rebind",
                               "job.succeeded", '{"n": 1}')
        outcome = hooks.attempt("dlv_rebind")
    finally:
        hooks.close()
        hooks.endpoints.remove(tenant, endpoint.id)
    assert internal.received == [], "the rebound address was called"
    assert outcome.status is not None and outcome.status.value == "delivered"
    [got] = checked.wait_for(1)
    assert got.headers["Host"] == f"localhost:{port}" and got.body == b'{"n": 1}'
    assert answers == ["127.0.0.2"], "one resolution per attempt"


def test_registration_refuses_urls_with_a_code_naming_url(owner: httpx.Client) -> None:
    # The test stack allows 127.0.0.1 only: every other internal host is refused.
    for url in ("http://127.0.0.2:8080/hook", "http://169.254.169.254/latest/meta-data",
                "http://[::1]:9/x", "http://10.0.0.5/x"):
        response = owner.post("/v1/webhooks", json={"url": url, "events": ["job.succeeded"]})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "url_refused"
        assert response.json()["error"]["field"] == "url"
    response = owner.post("/v1/webhooks", json={"url": "http://u:p@127.0.0.1/x",
                                                "events": ["job.succeeded"]})
    assert response.status_code == 422 and response.json()["error"]["field"] == "url"
    response = owner.post("/v1/webhooks", json={"url": "http://127.0.0.1/x",
                                                "events": ["memory.exploded"]})
    assert response.status_code == 422 and response.json()["error"]["field"].startswith("events")
    assert owner.get("/v1/webhooks").json()["items"] == []  # nothing stored by any of them


# ---- deliveries ----------------------------------------------------------------------


def test_a_receiver_failing_twice_gets_the_event_on_attempt_three(
    owner: httpx.Client, receivers: Callable[..., Receiver], user: str,
) -> None:
    flaky = receivers(lambda n: 500 if n <= 2 else 200)
    hook = register(owner, flaky.url, ["job.succeeded"])
    saved = save(owner, user, "I moved to Berlin in March")
    sent = flaky.wait_for(3)
    assert len({r.body for r in sent}) == 1, "every attempt sends the same body"
    assert len({r.headers["Memoryd-Event-Id"] for r in sent}) == 1
    event = sent[-1].event
    assert event["type"] == "job.succeeded"
    assert event["data"]["user_id"] == user
    assert event["data"]["added"] == [saved["memory"]["id"]]
    verify = documented_verify()
    assert verify(hook["secret"], sent[-1].headers["Memoryd-Signature"], sent[-1].body)
    [delivery] = settled(owner, hook["id"], 1)
    assert delivery["status"] == "delivered"
    assert delivery["attempts"] == 3 and delivery["last_status_code"] == 200
    assert delivery["event_id"] == event["id"] and delivery["event"] == "job.succeeded"


def test_a_receiver_that_times_out_is_retried_and_recorded(
    owner: httpx.Client, receivers: Callable[..., Receiver], user: str,
) -> None:
    slow = receivers(lambda n: ("sleep", 2.0))  # the stack waits 0.5 s per attempt
    hook = register(owner, slow.url, ["job.succeeded"])
    save(owner, user, "Allergic to peanuts")
    [delivery] = settled(owner, hook["id"], 1)
    assert delivery["status"] == "failed", delivery
    assert delivery["attempts"] == 3  # webhook_max_attempts in the test stack
    assert delivery["last_error"].startswith("timeout")
    assert delivery["last_status_code"] is None
    assert len(slow.wait_for(3)) == 3


def test_the_documented_check_refuses_tampering_and_replays() -> None:
    verify = documented_verify()
    secret, body = "whsec_test", b'{"id":"evt_1","type":"memory.added"}'
    now = int(time.time())
    assert verify(secret, signature_header(secret, body, now), body)
    assert not verify(secret, signature_header(secret, body, now), body + b" ")
    assert not verify(secret, signature_header(secret, body, now), body.replace(b"1", b"2"))
    assert not verify("whsec_other", signature_header(secret, body, now), body)
    old = now - 301  # signed correctly, outside the replay window
    assert not verify(secret, f"t={old},v1={signature(secret, old, body)}", body)
    assert not verify(secret, f"t={now + 1},v1={signature(secret, now, body)}", body)
    assert not verify(secret, "v1=" + signature(secret, now, body), body)


def test_a_write_sends_job_and_memory_events_with_content_only_when_asked(
    stack: Any, tenant: str, owner: httpx.Client, receivers: Callable[..., Receiver],
    user: str,
) -> None:
    ids_only, with_text = receivers(), receivers()
    every = ["job.succeeded", "job.failed", "memory.added", "memory.updated", "memory.deleted"]
    plain = register(owner, ids_only.url, every)
    full = register(owner, with_text.url, ["memory.added"], include_content=True)
    memory_id = save(owner, user, "My daughter Mia is seven")["memory"]["id"]

    sent = {r.event["type"]: r for r in ids_only.wait_for(2)}
    assert set(sent) == {"job.succeeded", "memory.added"}
    added = sent["memory.added"].event
    assert added["data"]["memory_ids"] == [memory_id] and "memories" not in added["data"]
    assert sent["job.succeeded"].event["data"]["job_id"] == added["data"]["job_id"]
    [texted] = with_text.wait_for(1)
    assert texted.event["data"]["memories"] == [{"id": memory_id,
                                                 "content": "My daughter Mia is seven"}]
    assert texted.event["id"] == added["id"], "one event, two bodies"
    verify = documented_verify()
    assert verify(full["secret"], texted.headers["Memoryd-Signature"], texted.body)
    assert not verify(plain["secret"], texted.headers["Memoryd-Signature"], texted.body)
    for received in (*ids_only.received, texted):
        assert tenant not in received.body.decode(), "events never name the tenant"

    # Updating and deleting it: memory.updated, then memory.deleted.
    job = owner.patch(f"/v1/memories/{memory_id}", params={"user_id": user, "wait": 20},
                      json={"content": "My daughter Mia is eight"})
    assert job.status_code == 200, job.text
    gone = owner.delete(f"/v1/memories/{memory_id}", params={"user_id": user, "wait": 20})
    assert gone.status_code == 200, gone.text
    kinds = [r.event["type"] for r in ids_only.wait_for(6)]
    assert kinds.count("memory.updated") == 1 and kinds.count("memory.deleted") == 1
    deleted = next(r.event for r in ids_only.received if r.event["type"] == "memory.deleted")
    assert deleted["data"]["memory_ids"] == [memory_id]

    # A job that fails in the worker (its memory is gone by the time it runs): job.failed
    # with its error's code. The gateway checks first, so it is enqueued as the gateway does.
    rt = stack.runtime
    failing = submit(rt.jobs, rt.celery, TaskName.UPDATE, UpdateCommand(
        tenant_id=tenant, user_id=user, request_id=None, received_at=utcnow(),
        memory_id=memory_id, changes=UpdateRequest(content="x")))
    failed = next(r.event for r in ids_only.wait_for(7) if r.event["type"] == "job.failed")
    assert failed["data"]["job_id"] == failing.job_id
    assert failed["data"]["error"]["code"] == "not_found"

    listed = settled(owner, plain["id"], 7)
    assert len(listed) == 7 and {d["status"] for d in listed} == {"delivered"}
    assert all(d["attempts"] == 1 and d["last_status_code"] == 200 for d in listed)

    # The same job recorded finished again (a redelivered message) sends nothing new.
    again = JobEnd(tenant, user, added["data"]["job_id"], added["data"]["job_kind"],
                   result={"outcome": "added", "memory": {"id": memory_id, "content": "x"}})
    assert stack.runtime.webhooks.emit(again) == 0
    assert len(deliveries(owner, plain["id"])) == 7


def test_another_tenant_cannot_see_or_touch_an_endpoint(
    stack: Any, base_url: str, owner: httpx.Client, api_b: httpx.Client,
    receivers: Callable[..., Receiver], tenant: str,
) -> None:
    hook = register(owner, receivers().url, ["job.succeeded"])
    assert hook["id"] not in {i["id"] for i in api_b.get("/v1/webhooks").json()["items"]}
    for method, path in (("DELETE", f"/v1/webhooks/{hook['id']}"),
                         ("GET", f"/v1/webhooks/{hook['id']}/deliveries"),
                         ("POST", f"/v1/webhooks/{hook['id']}/rotate-secret")):
        response = api_b.request(method, path)
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"
    # The tenant's own key without the admin scope cannot manage endpoints either.
    plain_key = _key(stack, tenant, frozenset({KeyScope.READ, KeyScope.WRITE}))
    response = httpx.get(f"{base_url}/v1/webhooks",
                         headers={"Authorization": f"Bearer {plain_key}"})
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    assert [i["id"] for i in owner.get("/v1/webhooks").json()["items"]] == [hook["id"]]
    rotated = owner.post(f"/v1/webhooks/{hook['id']}/rotate-secret").json()
    assert rotated["secret"] != hook["secret"] and rotated["secret_rotated_at"]
    assert "secret" not in owner.get("/v1/webhooks").json()["items"][0]


def test_cli_adds_lists_shows_deliveries_and_removes(
    stack: Any, base_url: str, tenant: str, receivers: Callable[..., Receiver], user: str,
) -> None:
    from memoryd.workers.cli import app

    key = _key(stack, tenant)
    env = {"MEMORYD_URL": base_url, "MEMORYD_API_KEY": key}
    runner = CliRunner()
    added = runner.invoke(app, ["webhooks", "add", receivers().url, "-e",
                                "job.succeeded,memory.added", "--json"], env=env)
    assert added.exit_code == 0, added.output
    created = json.loads(added.output)
    assert created["events"] == ["job.succeeded", "memory.added"] and created["secret"]
    listed = runner.invoke(app, ["webhooks", "list"], env=env)
    assert listed.exit_code == 0 and created["id"] in listed.output
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}) as client:
        save(client, user, "Prefers window seats")
        settled(client, created["id"], 2)
    shown = runner.invoke(app, ["webhooks", "deliveries", created["id"]], env=env)
    assert shown.exit_code == 0 and shown.output.count("delivered") == 2, shown.output
    refused = runner.invoke(app, ["webhooks", "add", "http://169.254.169.254/", "-e",
                                  "job.succeeded"], env=env)
    assert refused.exit_code == 1 and "url_refused" in refused.output
    rotated = runner.invoke(app, ["webhooks", "rotate-secret", created["id"], "--json"],
                            env=env)
    assert rotated.exit_code == 0, rotated.output
    assert json.loads(rotated.output)["secret"] not in ("", created["secret"])
    removed = runner.invoke(app, ["webhooks", "remove", created["id"], "--json"], env=env)
    assert removed.exit_code == 0, removed.output
    assert json.loads(removed.output) == {"removed": created["id"]}
    assert created["id"] not in runner.invoke(app, ["webhooks", "list"], env=env).output


def test_each_attempt_checks_the_url_again_and_the_log_stays_bounded(
    stack: Any, tenant: str, owner: httpx.Client, receivers: Callable[..., Receiver],
) -> None:
    receiver = receivers()
    hook = register(owner, receiver.url, ["job.succeeded"])
    rt = stack.runtime
    # The same endpoint seen by a deployment that no longer allows 127.0.0.1.
    strict = Webhooks(rt.redis, rt.celery, rt.settings.model_copy(
        update={"webhook_allow_hosts": "", "webhook_deliveries_kept": 3}))
    try:
        for n in range(5):
            assert strict.log.claim(tenant, hook["id"], f"dlv_bounded{n}", f"evt_{n}",
                                    "job.succeeded", "{}")
        assert not strict.log.claim(tenant, hook["id"], "dlv_bounded4", "evt_4",
                                    "job.succeeded", "{}"), "claimed once"
        kept = strict.deliveries(tenant, hook["id"], 50).items
        assert [d.id for d in kept] == ["dlv_bounded4", "dlv_bounded3", "dlv_bounded2"]
        outcome = strict.attempt("dlv_bounded4")
        assert outcome.status is not None and outcome.status.value == "failed"
        assert outcome.retry_in_s is None
    finally:
        strict.close()
    [latest, *_] = deliveries(owner, hook["id"])
    assert latest["status"] == "failed" and "loopback" in latest["last_error"]
    assert receiver.received == [], "a refused host is never called"


def test_the_python_clients_manage_endpoints(
    stack: Any, base_url: str, tenant: str, receivers: Callable[..., Receiver],
) -> None:
    key = _key(stack, tenant)
    url = receivers().url
    with MemorydClient(base_url, key) as client:
        created = client.create_webhook(url, ["memory.added"], include_content=True)
        assert [w.id for w in client.list_webhooks().items] == [created.id]
        with pytest.raises(ValueError):  # checked by the API's own model before sending
            client.create_webhook(url, ["memory.exploded"])
        with pytest.raises(ApiError) as refused:
            client.create_webhook("http://169.254.169.254/", ["memory.added"])
        assert refused.value.code == "url_refused" and refused.value.field == "url"

    async def run() -> None:
        async with AsyncMemorydClient(base_url, key) as client:
            rotated = await client.rotate_webhook_secret(created.id)
            assert rotated.secret != created.secret
            assert (await client.webhook_deliveries(created.id)).items == []
            await client.delete_webhook(created.id)
            assert (await client.list_webhooks()).items == []
            with pytest.raises(ApiError) as gone:
                await client.delete_webhook(created.id)
            assert gone.value.code == "not_found"

    asyncio.run(run())


def test_a_forget_redacts_deliveries_and_cancels_those_not_yet_sent(
    stack: Any, tenant: str, owner: httpx.Client, receivers: Callable[..., Receiver],
    user: str,
) -> None:
    """On 204bae7 a delivery to an `include_content` endpoint kept the memory's text in
    Redis for 7 days after a forget, and one still retrying kept sending it."""
    word = f"qxhook{uuid.uuid4().hex[:10]}"
    with_text = receivers()
    full = register(owner, with_text.url, ["memory.added"], include_content=True)
    save(owner, user, f"My hook word is {word}")
    with_text.wait_for(1)
    assert [d["status"] for d in settled(owner, full["id"], 1)] == ["delivered"]
    # One delivery still to be sent, as emission leaves it before its task runs.
    log = stack.runtime.webhooks.log
    pending_id = "dlv_" + uuid.uuid4().hex[:16] + full["id"][3:]
    body = json.dumps({"id": "evt_x", "type": "memory.added", "created_at": "2026-01-01",
                       "data": {"user_id": user, "job_id": "j", "job_kind": "memory.save",
                                "memory_ids": ["m"],
                                "memories": [{"id": "m", "content": f"later {word}"}]}})
    assert log.claim(tenant, full["id"], pending_id, "evt_x", "memory.added", body)
    # Another user's delivery keeps its text.
    other_body = body.replace(user, "someone-else").replace(word, "qxkeptword")
    other_id = "dlv_" + uuid.uuid4().hex[:16] + full["id"][3:]
    assert log.claim(tenant, full["id"], other_id, "evt_y", "memory.added", other_body)

    forgot = owner.delete("/v1/memories", params={"user_id": user, "all": "true", "wait": 20})
    assert forgot.status_code == 200, forgot.text

    redis_client = stack.runtime.redis
    for key in redis_client.scan_iter("memoryd:webhook:delivery:*"):
        assert word.encode() not in b"".join(redis_client.hvals(key)), key
    cancelled = log.get(pending_id)
    assert cancelled is not None and cancelled.status.value == "failed"
    assert cancelled.last_error and "forgotten" in cancelled.last_error
    # Its attempt, had it been queued, sends nothing.
    assert stack.runtime.webhooks.attempt(pending_id).status is not None
    time.sleep(0.3)
    assert len(with_text.received) == 1
    kept = log.get(other_id)
    assert kept is not None and "qxkeptword" in kept.body and kept.status.value == "pending"
