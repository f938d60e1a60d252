"""GET /v1/users: a tenant's user ids with their memory counts, paged by id."""

from __future__ import annotations

import uuid

import httpx
from helpers import save


def test_users_are_listed_per_tenant_and_paged(api: httpx.Client, api_b: httpx.Client) -> None:
    prefix = f"lu-{uuid.uuid4().hex[:8]}-"
    users = [f"{prefix}{name}" for name in ("amy", "bo", "陈静")]
    facts = ["I grow tomatoes on my balcony", "我每周去游泳两次", "My laptop runs Debian"]
    for i, user in enumerate(users):
        for fact in facts[: i + 1]:
            assert save(api, user, fact).status_code == 201
    assert save(api_b, f"{prefix}zed", "Another tenant's user").status_code == 201

    first = api.get("/v1/users", params={"prefix": prefix, "limit": 2}).json()
    assert first["items"] == [{"user_id": users[0], "memories": 1},
                              {"user_id": users[1], "memories": 2}]
    rest = api.get("/v1/users", params={"prefix": prefix, "limit": 2,
                                        "cursor": first["next_cursor"]}).json()
    assert rest == {"items": [{"user_id": users[2], "memories": 3}], "next_cursor": None}
    other = api_b.get("/v1/users", params={"prefix": prefix}).json()["items"]
    assert other == [{"user_id": f"{prefix}zed", "memories": 1}]
    bad = api.get("/v1/users", params={"limit": 0})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
