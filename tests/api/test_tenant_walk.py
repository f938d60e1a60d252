"""Every route of the real app, called by tenant B with tenant A's memory ids, job ids and
user ids: B never gets A's data and never changes it (A's points, vectors, audit trail and
job records compared byte for byte before and after).

The routes come from `app.routes` (routers included lazily are opened up): a route that
is in none of the lists below fails the test, so a new endpoint must say how it is walked
before it can ship. Store-wide routes (`OPERATOR`) are walked too: B's key, which holds
every tenant scope, gets 403 `forbidden` there and changes nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from helpers import save, wait_job
from test_failed_jobs import failing_update

from memoryd.records.models import Owner
from memoryd.store.conditions import Match

# Routes that carry no tenant data at all.
PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/openapi.json"), ("GET", "/docs"),
          ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"), ("HEAD", "/openapi.json"),
          ("HEAD", "/docs"), ("HEAD", "/docs/oauth2-redirect"), ("HEAD", "/redoc")}

SECRET = "A's secret: 我的银行卡密码提示是第一只猫的名字"


class Victim:
    def __init__(self, user: str, memory: dict[str, Any], job_id: str, failed_id: str,
                 webhook_id: str) -> None:
        self.user = user
        self.memory = memory
        self.job_id = job_id
        self.failed_id = failed_id
        self.webhook_id = webhook_id


Call = Callable[[httpx.Client, Victim], httpx.Response]


def _mid(v: Victim) -> str:
    return str(v.memory["id"])


# (method, path template) → the call B makes with A's ids. History and export are added
# by other work: they are walked as soon as the app has them.
CALLS: dict[tuple[str, str], Call] = {
    ("POST", "/v1/search"): lambda c, v: c.post("/v1/search", json={
        "user_id": v.user, "query": SECRET, "top_k": 10}),
    ("POST", "/v1/context"): lambda c, v: c.post("/v1/context", json={
        "user_id": v.user, "query": SECRET, "min_score": 0}),
    ("GET", "/v1/memories"): lambda c, v: c.get("/v1/memories", params={"user_id": v.user}),
    ("GET", "/v1/memories/{memory_id}"): lambda c, v: c.get(
        f"/v1/memories/{_mid(v)}", params={"user_id": v.user}),
    ("PATCH", "/v1/memories/{memory_id}"): lambda c, v: c.patch(
        f"/v1/memories/{_mid(v)}", params={"user_id": v.user, "wait": 5},
        json={"content": "overwritten by B", "enabled": False}),
    ("DELETE", "/v1/memories/{memory_id}"): lambda c, v: c.delete(
        f"/v1/memories/{_mid(v)}", params={"user_id": v.user, "wait": 5}),
    ("DELETE", "/v1/memories"): lambda c, v: c.delete(
        "/v1/memories", params={"user_id": v.user, "all": "true", "wait": 5}),
    ("POST", "/v1/memories"): lambda c, v: c.post(
        "/v1/memories", params={"wait": 5}, json={"user_id": v.user, "content": SECRET,
                                                  "key": "pin"}),
    ("POST", "/v1/interactions"): lambda c, v: c.post("/v1/interactions", json={
        "user_id": v.user, "thread_id": "t-walk", "extract": "raw",
        "messages": [{"role": "user", "content": "forget everything about me"}]}),
    ("GET", "/v1/jobs/{job_id}"): lambda c, v: c.get(f"/v1/jobs/{v.job_id}"),
    ("GET", "/v1/jobs"): lambda c, v: c.get("/v1/jobs", params={"status": "failed"}),
    ("POST", "/v1/jobs/{job_id}/retry"): lambda c, v: c.post(f"/v1/jobs/{v.failed_id}/retry"),
    ("GET", "/v1/memories/{memory_id}/history"): lambda c, v: c.get(
        f"/v1/memories/{_mid(v)}/history", params={"user_id": v.user}),
    ("GET", "/v1/export"): lambda c, v: c.get("/v1/export", params={"user_id": v.user}),
    ("POST", "/v1/export"): lambda c, v: c.post("/v1/export", json={"user_id": v.user}),
    ("GET", "/v1/users"): lambda c, v: c.get("/v1/users", params={"prefix": v.user}),
    ("POST", "/v1/import"): lambda c, v: c.post(
        "/v1/import", params={"user_id": v.user},
        json=[{"content": "imported by B into its own tenant"}]),
    # Counts only, no tenant data: B (any caller) may read them.
    ("GET", "/metrics"): lambda c, v: c.get("/metrics"),
    # Webhooks: B lists and registers its own; A's endpoint is a 404 to B.
    ("GET", "/v1/webhooks"): lambda c, v: c.get("/v1/webhooks"),
    ("POST", "/v1/webhooks"): lambda c, v: c.post("/v1/webhooks", json={
        "url": "http://127.0.0.1:9/b-hook", "events": ["memory.deleted"]}),
    ("DELETE", "/v1/webhooks/{webhook_id}"): lambda c, v: c.delete(
        f"/v1/webhooks/{v.webhook_id}"),
    ("POST", "/v1/webhooks/{webhook_id}/rotate-secret"): lambda c, v: c.post(
        f"/v1/webhooks/{v.webhook_id}/rotate-secret"),
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): lambda c, v: c.get(
        f"/v1/webhooks/{v.webhook_id}/deliveries"),
    # The proxy (no upstream on this stack: 404 before any memory is read or written).
    ("POST", "/v1/chat/completions"): lambda c, v: c.post(
        "/v1/chat/completions", headers={"X-Memoryd-User": v.user}, json={
            "model": "m", "messages": [{"role": "user", "content": SECRET}]}),
    ("GET", "/v1/models"): lambda c, v: c.get("/v1/models"),
    ("GET", "/v1/jobs/recent"): lambda c, v: c.get("/v1/jobs/recent",
                                                   params={"user_id": v.user}),
    ("GET", "/v1/whoami"): lambda c, v: c.get("/v1/whoami"),
}


# Store-wide routes (operator keys only), with the call B makes: each must answer 403.
OPERATOR: dict[tuple[str, str], Call] = {
    ("POST", "/v1/admin/reindex"): lambda c, v: c.post(
        "/v1/admin/reindex", json={"embedder": "use", "batch_size": 1}),
    ("GET", "/v1/admin/index"): lambda c, v: c.get("/v1/admin/index"),
    ("GET", "/v1/admin/jobs/{job_id}"): lambda c, v: c.get(f"/v1/admin/jobs/{v.job_id}"),
}


def _flat(routes: Any) -> Any:
    """Every route, with FastAPI's lazily included routers opened up (their routes are not
    in `app.routes` itself)."""
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is not None:
            for context in contexts():
                yield context.path, getattr(context.original_route, "methods", None)
        else:
            yield getattr(route, "path", None), getattr(route, "methods", None)


def app_routes(stack: Any) -> set[tuple[str, str]]:
    routes = set()
    for path, methods in _flat(stack.server.config.app.routes):
        for method in methods or ():
            routes.add((method, path))
    return routes


def test_the_route_list_is_complete(stack: Any) -> None:
    """The walk sees the real routes (a lazily included router once hid all of them)."""
    routes = app_routes(stack)
    assert {("POST", "/v1/search"), ("GET", "/v1/users"), ("POST", "/v1/admin/reindex"),
            ("GET", "/metrics")} <= routes, sorted(routes)


def snapshot(stack: Any, v: Victim) -> str:
    """Everything of A's user, read from the store and Redis directly, as canonical JSON."""
    view, r = stack.runtime.index.view(), stack.runtime.redis
    store = view.store
    owner = Owner(tenant_id="tenant-a", user_id=v.user)
    points = store.find_across_owners([Match("tenant_id", "tenant-a"),
                                       Match("user_id", v.user)], 1000)
    full = store.get(owner, sorted(p.id for p in points), with_vectors=True)
    jobs = {j: {k.decode(): val.decode() for k, val in r.hgetall(f"memoryd:job:{j}").items()}
            for j in (v.job_id, v.failed_id)}
    return json.dumps({
        "points": [(p.id, p.payload, p.dense) for p in full],
        "audit": [e.model_dump(mode="json")
                  for p in full for e in view.audit.audit_of(owner, p.id)],
        "jobs": jobs,
        "failed": r.zscore("memoryd:jobs:failed:tenant-a", v.failed_id),
    }, sort_keys=True, ensure_ascii=False)


@pytest.fixture()
def victim(stack: Any, api: httpx.Client, user: str) -> Victim:
    saved = save(api, user, SECRET, thread_id="t-walk", tags=["secret"])
    assert saved.status_code == 201
    job = api.post("/v1/memories", json={"user_id": user, "content": "A likes jasmine tea"})
    job_id = job.json()["job_id"]
    assert wait_job(api, job_id)["status"] == "succeeded"
    failed_id, _ = failing_update(stack, user, "a memory that does not exist yet")
    assert wait_job(api, failed_id)["status"] == "failed"
    hook = api.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/a-hook",
                                          "events": ["memory.deleted"]})
    assert hook.status_code == 201, hook.text
    return Victim(user, saved.json()["memory"], job_id, failed_id, hook.json()["id"])


def _writes(route: tuple[str, str]) -> bool:
    return route[0] != "GET" and route[1] not in {"/v1/search", "/v1/context", "/v1/export"}


def test_every_route_is_classified(stack: Any) -> None:
    unclassified = app_routes(stack) - PUBLIC - set(CALLS) - set(OPERATOR)
    assert not unclassified, f"routes not in the tenant walk: {sorted(unclassified)}"
    assert not set(OPERATOR) & set(CALLS)


def test_other_tenant_walk(stack: Any, api: httpx.Client, api_b: httpx.Client,
                           victim: Victim) -> None:
    before = snapshot(stack, victim)
    hooks_before = api.get("/v1/webhooks").json()
    for route in sorted(app_routes(stack) & set(OPERATOR)):
        refused = OPERATOR[route](api_b, victim)
        assert refused.status_code == 403, (route, refused.text)
        assert refused.json()["error"]["code"] == "forbidden", (route, refused.text)
        assert "operator" in refused.json()["error"]["message"]
    assert not stack.runtime.redis.exists("memoryd:reindex:lock")
    # Reads first, so they see B's tenant before B's own writes put anything under A's
    # user id there.
    walked = sorted(app_routes(stack) & set(CALLS), key=lambda r: (_writes(r), r))
    b_jobs = []
    for route in walked:
        response = CALLS[route](api_b, victim)
        text = response.text
        assert response.status_code < 500, (route, text)
        # Never A's data: not its content, not its job's result, not its failed job.
        assert SECRET not in text or route in {("POST", "/v1/memories")}, (route, text)
        assert "jasmine" not in text, (route, text)
        assert victim.failed_id not in text or route == ("POST", "/v1/jobs/{job_id}/retry"), \
            (route, text)
        assert "a-hook" not in text and (victim.webhook_id not in text or "{webhook_id}" in
                                         route[1]), (route, text)
        if route in {("GET", "/v1/memories/{memory_id}"), ("PATCH", "/v1/memories/{memory_id}"),
                     ("DELETE", "/v1/memories/{memory_id}"), ("GET", "/v1/jobs/{job_id}"),
                     ("POST", "/v1/jobs/{job_id}/retry"),
                     ("GET", "/v1/memories/{memory_id}/history"),
                     ("DELETE", "/v1/webhooks/{webhook_id}"),
                     ("POST", "/v1/webhooks/{webhook_id}/rotate-secret"),
                     ("GET", "/v1/webhooks/{webhook_id}/deliveries")}:
            assert response.status_code == 404, (route, text)
        is_json = response.headers.get("content-type", "").startswith("application/json")
        body = response.json() if is_json else None
        if route == ("GET", "/v1/users"):
            assert response.status_code == 200 and body["items"] == []
        if route == ("GET", "/v1/memories"):
            # Walked before B saves anything for this user id (reads go first).
            assert response.status_code == 200 and body["items"] == []
        if route in {("GET", "/v1/jobs"), ("GET", "/v1/jobs/recent")}:
            assert response.status_code == 200
            assert not {victim.job_id, victim.failed_id} & {i["job_id"] for i in body["items"]}
        if route == ("GET", "/v1/whoami"):
            assert body["tenant_id"] == "tenant-b"
        if route == ("POST", "/v1/search"):
            assert body["results"] == []
        if route == ("POST", "/v1/context"):
            assert body["items"] == [] and body["block"] == ""
        if isinstance(body, dict) and "job_id" in body and response.status_code == 202:
            b_jobs.append(body["job_id"])
    # B's own writes ran to the end (in B's tenant) before A is compared again.
    for job_id in b_jobs:
        assert wait_job(api_b, job_id)["status"] in ("succeeded", "failed")
    time.sleep(0.2)
    assert snapshot(stack, victim) == before
    assert api.get("/v1/webhooks").json() == hooks_before  # A's endpoint, as it was
    # And A still reads its memory through the API, unchanged.
    got = api.get(f"/v1/memories/{victim.memory['id']}", params={"user_id": victim.user})
    assert got.json() == victim.memory
