"""Nothing crosses users or tenants; project memories are visible only in their project."""

from __future__ import annotations

import httpx
from helpers import save, search, wait_job


def test_other_tenant_and_other_user_see_nothing(
    api: httpx.Client, api_b: httpx.Client, user: str
) -> None:
    memory = save(api, user, "My bank PIN hint is the name of my first cat").json()["memory"]
    path = f"/v1/memories/{memory['id']}"
    # Tenant B, same user id: the memory does not exist for it.
    assert api_b.get(path, params={"user_id": user}).status_code == 404
    assert api_b.patch(path, params={"user_id": user}, json={"content": "x"}).status_code == 404
    assert api_b.delete(path, params={"user_id": user}).status_code == 404
    assert search(api_b, user, "bank PIN hint") == []
    assert api_b.get("/v1/memories", params={"user_id": user}).json()["items"] == []
    # Tenant A, another user: same.
    other = user + "-other"
    assert api.get(path, params={"user_id": other}).status_code == 404
    assert api.patch(path, params={"user_id": other}, json={"importance": 1}).status_code == 404
    assert api.delete(path, params={"user_id": other}).status_code == 404
    assert search(api, other, "bank PIN hint") == []
    # Bulk forget by another tenant removes nothing of ours.
    gone = api_b.delete("/v1/memories", params={"user_id": user, "all": "true", "wait": 10})
    assert gone.status_code == 200 and gone.json()["deleted"] == 0
    # A job of tenant A is not visible to tenant B.
    job = api.post("/v1/memories", json={"user_id": user, "content": "I like tea"}).json()
    assert api_b.get(f"/v1/jobs/{job['job_id']}").status_code == 404
    wait_job(api, job["job_id"])
    # Still intact for its owner.
    got = api.get(path, params={"user_id": user})
    assert got.status_code == 200 and got.json() == memory


def test_malformed_memory_id_is_404(api: httpx.Client, user: str) -> None:
    assert api.get("/v1/memories/not-a-uuid", params={"user_id": user}).status_code == 404


def test_project_visibility(api: httpx.Client, user: str) -> None:
    assert save(api, user, "The user prefers dark mode in every editor").status_code == 201
    assert save(api, user, "Project Apollo deploys with Kubernetes on Fridays",
                scope="project", project="apollo").status_code == 201
    assert save(api, user, "Project Zeus deploys with Nomad on Mondays",
                scope="project", project="zeus").status_code == 201
    contents = {r["memory"]["content"] for r in search(api, user, "how do we deploy", top_k=10)}
    assert contents == {"The user prefers dark mode in every editor"}
    in_apollo = {r["memory"]["content"]
                 for r in search(api, user, "how do we deploy", top_k=10, project="apollo")}
    assert in_apollo == {"The user prefers dark mode in every editor",
                         "Project Apollo deploys with Kubernetes on Fridays"}
    only_project = search(api, user, "deploy", top_k=10, project="zeus", scope="project")
    assert [r["memory"]["project"] for r in only_project] == ["zeus"]
