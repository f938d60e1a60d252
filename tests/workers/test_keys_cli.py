"""`memoryd keys create|list|revoke` against a real Redis."""

from __future__ import annotations

import re

import pytest
from conftest import redis_db_url
from typer.testing import CliRunner

from memoryd.tenancy.api_keys import ApiKeyStore
from memoryd.tenancy.auth import key_digest
from memoryd.workers.cli import app


def test_create_list_revoke(redis_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import redis

    url = redis_db_url(redis_server, 11)
    monkeypatch.setenv("MEMORYD_REDIS_URL", url)
    runner = CliRunner()
    created = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--scopes", "read,admin",
                                  "--name", "运维 ops"])
    assert created.exit_code == 0, created.output
    key = created.output.splitlines()[0].strip()
    key_id = re.search(r"id (key_[0-9a-f]+)", created.output)
    assert key.startswith("mk_") and key_id
    store = ApiKeyStore(redis.Redis.from_url(url))
    principal = store.lookup(key_digest(key))
    assert principal is not None and principal.tenant == "acme"
    assert {s.value for s in principal.scopes} == {"read", "admin"}

    listed = runner.invoke(app, ["keys", "list"])
    assert listed.exit_code == 0
    line = next(row for row in listed.output.splitlines() if key_id.group(1) in row)
    assert "acme" in line and "admin,read" in line and "revoked=-" in line and "运维 ops" in line
    assert key not in listed.output and key[7:] not in listed.output

    revoked = runner.invoke(app, ["keys", "revoke", key_id.group(1)])
    assert revoked.exit_code == 0
    assert store.lookup(key_digest(key)) is None
    assert "revoked=-" not in next(
        row for row in runner.invoke(app, ["keys", "list"]).output.splitlines()
        if key_id.group(1) in row)

    bad = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--scopes", "read,root"])
    assert bad.exit_code == 1 and "scopes" in bad.output
    # A ':' would once have shared Redis keys with tenant `tenant-one`'s user `eu:...`.
    colon = runner.invoke(app, ["keys", "create", "--tenant", "tenant-one:eu", "--scopes",
                                "read"])
    assert colon.exit_code == 1 and "tenant" in colon.output and "':'" in colon.output
    missing = runner.invoke(app, ["keys", "revoke", "key_nope"])
    assert missing.exit_code == 1 and "not_found" in missing.output


def test_create_operator_key(redis_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--operator`: a key holding only the scope `operator`, under no tenant; a tenant key
    can never be given that scope."""
    import redis

    url = redis_db_url(redis_server, 11)
    monkeypatch.setenv("MEMORYD_REDIS_URL", url)
    runner = CliRunner()
    created = runner.invoke(app, ["keys", "create", "--operator", "--name", "on call"])
    assert created.exit_code == 0, created.output
    key = created.output.splitlines()[0].strip()
    assert "tenant (operator), scopes operator" in created.output
    principal = ApiKeyStore(redis.Redis.from_url(url)).lookup(key_digest(key))
    assert principal is not None and {s.value for s in principal.scopes} == {"operator"}
    listed = runner.invoke(app, ["keys", "list"])
    row = next(r for r in listed.output.splitlines() if "on call" in r)
    assert "(operator)" in row and " operator " in row and key not in listed.output

    as_scope = runner.invoke(app, ["keys", "create", "--tenant", "acme", "--scopes",
                                   "read,operator"])
    assert as_scope.exit_code == 1 and "operator" in as_scope.output
    neither = runner.invoke(app, ["keys", "create"])
    assert neither.exit_code == 2


def test_keys_as_json(redis_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("MEMORYD_REDIS_URL", redis_db_url(redis_server, 11))
    runner = CliRunner()
    created = runner.invoke(app, ["keys", "create", "--tenant", "json-co", "--json"])
    assert created.exit_code == 0, created.output
    made = json.loads(created.output)
    assert made["key"].startswith("mk_") and made["tenant"] == "json-co"
    assert made["scopes"] == ["read", "write"] and made["revoked_at"] is None
    listed = json.loads(runner.invoke(app, ["keys", "list", "--json"]).output)
    mine = next(k for k in listed if k["id"] == made["id"])
    assert "key" not in mine and made["key"] not in json.dumps(listed)
    revoked = json.loads(runner.invoke(app, ["keys", "revoke", made["id"], "--json"]).output)
    assert revoked["id"] == made["id"] and revoked["revoked_at"] is not None
