"""API keys made with `memoryd keys` carry a tenant and scopes; one dependency enforces them.
Store-wide routes (`/v1/admin/*`) take operator keys only, and operator keys nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers import save

from memoryd.platform.errors import ConfigurationError, InvalidInput
from memoryd.platform.settings import Settings
from memoryd.tenancy.api_keys import (
    ALL_SCOPES,
    ApiKeyStore,
    KeyScope,
    parse_scopes,
    required_scopes,
)
from memoryd.tenancy.auth import OPERATOR_TENANT, KeyRing


def client(base_url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"},
                        timeout=30)


@pytest.fixture(scope="module")
def keys(stack: Any, base_url: str) -> Iterator[dict[str, httpx.Client]]:
    store = ApiKeyStore(stack.runtime.redis)
    made = {
        name: store.create("tenant-a", frozenset(scopes), name=f"test-{name}")[0]
        for name, scopes in {
            "read": {KeyScope.READ}, "write": {KeyScope.WRITE}, "admin": {KeyScope.ADMIN},
            "rw": {KeyScope.READ, KeyScope.WRITE},
        }.items()
    }
    clients = {name: client(base_url, key) for name, key in made.items()}
    yield clients
    for c in clients.values():
        c.close()


def forbidden(response: httpx.Response, scope: str) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "forbidden" and error["field"] == "scope"
    assert scope in error["message"]


def test_read_key_reads_but_never_writes(
    keys: dict[str, httpx.Client], api: httpx.Client, user: str
) -> None:
    memory = save(api, user, "我的女儿叫 Mia, she is seven").json()["memory"]
    path = f"/v1/memories/{memory['id']}"
    reader = keys["read"]
    assert reader.get(path, params={"user_id": user}).json() == memory
    assert reader.post("/v1/search", json={"user_id": user, "query": "女儿"}).status_code == 200
    assert reader.post("/v1/context", json={"user_id": user, "query": "Mia"}).status_code == 200
    assert reader.get("/v1/memories", params={"user_id": user}).status_code == 200
    forbidden(reader.patch(path, params={"user_id": user}, json={"importance": 1}), "write")
    forbidden(reader.delete(path, params={"user_id": user}), "write")
    forbidden(reader.delete("/v1/memories", params={"user_id": user, "all": "true"}), "write")
    forbidden(reader.post("/v1/memories", json={"user_id": user, "content": "x is y"}), "write")
    forbidden(reader.post("/v1/interactions", json={
        "user_id": user, "messages": [{"role": "user", "content": "hi"}]}), "write")
    forbidden(reader.get("/v1/jobs", params={"status": "failed"}), "admin")
    forbidden(reader.post("/v1/jobs/whatever/retry"), "admin")
    # Nothing changed.
    assert api.get(path, params={"user_id": user}).json() == memory


def test_write_key_writes_but_never_reads(
    keys: dict[str, httpx.Client], api: httpx.Client, user: str
) -> None:
    writer = keys["write"]
    accepted = writer.post("/v1/memories", json={"user_id": user, "content": "I like green tea"})
    assert accepted.status_code == 202
    forbidden(writer.get(f"/v1/jobs/{accepted.json()['job_id']}"), "read")
    forbidden(writer.post("/v1/search", json={"user_id": user, "query": "tea"}), "read")
    forbidden(writer.get("/v1/memories", params={"user_id": user}), "read")
    forbidden(writer.post("/v1/jobs/whatever/retry"), "admin")


def test_admin_only_routes(keys: dict[str, httpx.Client]) -> None:
    assert keys["admin"].get("/v1/jobs", params={"status": "failed"}).status_code == 200
    forbidden(keys["rw"].get("/v1/jobs", params={"status": "failed"}), "admin")
    # Retry needs write as well as admin.
    forbidden(keys["admin"].post("/v1/jobs/whatever/retry"), "write")


def test_revoked_key_is_refused_at_once(stack: Any, base_url: str, user: str) -> None:
    store = ApiKeyStore(stack.runtime.redis)
    key, info = store.create("tenant-a", frozenset({KeyScope.READ}))
    with client(base_url, key) as c:
        assert c.get("/v1/memories", params={"user_id": user}).status_code == 200
        assert store.revoke(info.id).revoked_at is not None
        refused = c.get("/v1/memories", params={"user_id": user})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"


def test_stored_key_acts_for_its_tenant_only(stack: Any, base_url: str, api_b: httpx.Client,
                                             user: str) -> None:
    key, _ = ApiKeyStore(stack.runtime.redis).create("tenant-b", ALL_SCOPES)
    memory = save(api_b, user, "Tenant B's user likes oolong").json()["memory"]
    with client(base_url, key) as c:
        assert c.get(f"/v1/memories/{memory['id']}", params={"user_id": user}).json() == memory


def test_key_listing_never_shows_secrets(stack: Any) -> None:
    store = ApiKeyStore(stack.runtime.redis)
    key, info = store.create("tenant-a", frozenset({KeyScope.READ, KeyScope.ADMIN}), name="ops")
    listed = [i for i in store.list() if i.id == info.id]
    assert listed == [info]
    dumped = listed[0].model_dump_json()
    assert key not in dumped and key[7:] not in dumped
    assert listed[0].scopes == [KeyScope.ADMIN, KeyScope.READ]
    # At rest: only the hash.
    for k in stack.runtime.redis.scan_iter("memoryd:apikey*"):
        kind = stack.runtime.redis.type(k)
        values = stack.runtime.redis.hvals(k) if kind == b"hash" else []
        assert all(key.encode() != v and key[7:].encode() not in v for v in values)


@pytest.mark.parametrize(("method", "path", "scopes"), [
    ("GET", "/v1/memories/{memory_id}", {"read"}),
    ("POST", "/v1/search", {"read"}),
    ("POST", "/v1/context", {"read"}),
    ("GET", "/v1/export", {"read"}),
    ("POST", "/v1/interactions", {"write"}),
    ("POST", "/v1/import", {"write"}),
    ("PATCH", "/v1/memories/{memory_id}", {"write"}),
    ("DELETE", "/v1/memories", {"write"}),
    ("GET", "/v1/jobs", {"admin"}),
    ("POST", "/v1/jobs/{job_id}/retry", {"write", "admin"}),
    ("GET", "/v1/admin/anything", {"operator"}),
    ("POST", "/v1/admin/reindex", {"operator"}),
])
def test_required_scopes(method: str, path: str, scopes: set[str]) -> None:
    assert {s.value for s in required_scopes(method, path)} == scopes


def operator_refused(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "forbidden" and error["field"] == "scope"
    assert "operator key" in error["message"]


def test_tenant_keys_never_reach_store_wide_routes(
    keys: dict[str, httpx.Client], api: httpx.Client, stack: Any
) -> None:
    """Every tenant key, the bootstrap one with every tenant scope included, gets 403 on the
    store-wide routes, and nothing starts."""
    for tenant_key in (api, keys["admin"], keys["rw"]):
        operator_refused(tenant_key.get("/v1/admin/index"))
        operator_refused(tenant_key.post("/v1/admin/reindex", json={"embedder": "use"}))
        operator_refused(tenant_key.post("/v1/admin/reindex", json={
            "embedder": "openai:text-embedding-3-small"}))
        operator_refused(tenant_key.get("/v1/admin/jobs/whatever"))
    assert not stack.runtime.redis.exists("memoryd:reindex:lock")


def test_operator_keys_reach_store_wide_routes_only(
    stack: Any, base_url: str, api: httpx.Client, user: str
) -> None:
    memory = save(api, user, "I grow tomatoes on my balcony").json()["memory"]
    stored, info = ApiKeyStore(stack.runtime.redis).create_operator(name="ops on call")
    assert info.tenant == OPERATOR_TENANT and info.scopes == [KeyScope.OPERATOR]
    generated = stack.settings.operator_key_file.read_text().strip()
    assert stack.settings.operator_key_file.stat().st_mode & 0o777 == 0o600
    for key in (generated, stored):
        with client(base_url, key) as operator:
            index = operator.get("/v1/admin/index")
            assert index.status_code == 200, index.text
            assert index.json()["embedder"] == "e5-small"
            assert operator.get("/v1/admin/jobs/nope").status_code == 404
            # No tenant's data, no tenant's writes, no tenant's failed jobs.
            forbidden(operator.get(f"/v1/memories/{memory['id']}", params={"user_id": user}),
                      "read")
            forbidden(operator.post("/v1/search", json={"user_id": user, "query": "tomatoes"}),
                      "read")
            forbidden(operator.post("/v1/memories", json={"user_id": user, "content": "x"}),
                      "write")
            forbidden(operator.get("/v1/jobs", params={"status": "failed"}), "admin")
            forbidden(operator.get("/v1/users"), "read")
    ApiKeyStore(stack.runtime.redis).revoke(info.id)
    with client(base_url, stored) as revoked:
        assert revoked.get("/v1/admin/index").status_code == 401


def test_tenant_keys_cannot_be_made_operators(stack: Any) -> None:
    store = ApiKeyStore(stack.runtime.redis)
    with pytest.raises(InvalidInput) as refused:
        parse_scopes("read,operator")
    assert refused.value.field == "scopes"
    with pytest.raises(InvalidInput):
        store.create("tenant-a", frozenset({KeyScope.READ, KeyScope.OPERATOR}))
    with pytest.raises(InvalidInput) as reserved:
        store.create(OPERATOR_TENANT, frozenset({KeyScope.READ}))
    assert reserved.value.field == "tenant"


@pytest.mark.parametrize(("api_keys", "operator_keys"), [
    ("k1=t1", "op=t1"),                 # a tenant pair pasted as an operator key
    ("k1=t1", "k1"),                    # one key both a tenant's and an operator's
    (f"k1={OPERATOR_TENANT}", "op"),    # the operators' pseudo-tenant named by a tenant key
    ("ké=t1", "op"),                    # a key no request can present (non-ASCII)
    ("k1=t1", "op密钥"),
])
def test_bad_key_settings_are_refused_at_start(tmp_path: Any, api_keys: str,
                                               operator_keys: str) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=api_keys, operator_keys=operator_keys)
    with pytest.raises(ConfigurationError):
        KeyRing.from_settings(settings, embedded=False)
