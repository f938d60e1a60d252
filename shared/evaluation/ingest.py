"""Ingest through the real write path over HTTP: `POST /v1/interactions` (extract raw), each
job waited for, then the stored memories listed back and checked against what was sent."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from memoryd.evaluation import EvalError
from memoryd.evaluation import datasets as ds

API_KEY = "eval-key"
JOB_TIMEOUT_S = 300.0
POLL_S = 0.02


def api_client(base_url: str) -> httpx.Client:
    return httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60.0
    )


def check(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.status_code >= 300:
        raise EvalError(f"{what}: HTTP {response.status_code}: {response.text[:500]}")
    body: dict[str, Any] = response.json()
    return body


def stored_memories(client: httpx.Client, user_id: str,
                    **filters: Any) -> Iterator[dict[str, Any]]:
    """Every stored memory of the user that `filters` (list query parameters) select, as
    `GET /v1/memories` lists them, following `next_cursor` page by page."""
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"user_id": user_id, "limit": 200, **filters}
        if cursor:
            params["cursor"] = cursor
        page = check(client.get("/v1/memories", params=params), f"list {user_id}")
        yield from page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return


def wait_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        job = check(client.get(f"/v1/jobs/{job_id}"), f"job {job_id}")
        if job["status"] == "failed":
            raise EvalError(f"job {job_id} failed: {job.get('error')}")
        if job["status"] == "succeeded":
            return dict(job.get("result") or {})
        time.sleep(POLL_S)
    raise EvalError(f"job {job_id} did not finish within {JOB_TIMEOUT_S:.0f} s")


def ingest_user(
    base_url: str, user_id: str, interactions: Sequence[ds.Interaction], key_field: str,
    stop: threading.Event, store_roles: Sequence[str] = ("user",),
) -> tuple[dict[str, str], set[str]]:
    """One interaction at a time, in order, so a repeated content keeps its first key.
    Returns each key's memory (the last written) and every memory the jobs wrote: a key
    has several when a haystack repeats a session whose turns are not all merged again
    (LongMemEval's dev half holds one session twice, on two dates)."""
    memory_of: dict[str, str] = {}
    written_ids: set[str] = set()
    with api_client(base_url) as client:
        for interaction in interactions:
            if stop.is_set():
                break
            body = {
                "user_id": user_id, "extract": "raw",
                "idempotency_key": interaction.idempotency_key,
                **({"store_roles": list(store_roles)} if store_roles != ("user",) else {}),
                **({"thread_id": interaction.thread_id} if interaction.thread_id else {}),
                "messages": [
                    {"role": it.role, "content": it.content,
                     "created_at": it.created_at.isoformat(), "metadata": {key_field: it.key}}
                    for it in interaction.items
                ],
            }
            accepted = check(client.post("/v1/interactions", json=body), "ingest")
            written = wait_job(client, accepted["job_id"]).get("memories", [])
            if len(written) != len(interaction.items):
                raise EvalError(f"{interaction.idempotency_key}: {len(interaction.items)} "
                                f"messages, {len(written)} memories in the job result")
            for it, memory in zip(interaction.items, written, strict=True):
                memory_of[it.key] = str(memory["id"])
                written_ids.add(str(memory["id"]))
    return memory_of, written_ids


def stored_keys(client: httpx.Client, user_id: str, key_field: str) -> dict[str, str]:
    """Every stored memory of the user → the key in its metadata, page by page."""
    return {str(item["id"]): str(item["metadata"].get(key_field))
            for item in stored_memories(client, user_id)}


@dataclass
class IngestOutcome:
    items: int
    memories: int
    jobs: int
    seconds: float
    merged: dict[str, set[str]]  # user → keys whose content an earlier item already stored


def ingest(base_url: str, corpus: ds.Corpus, concurrency: int) -> IngestOutcome:
    started = time.perf_counter()
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {
            user: pool.submit(ingest_user, base_url, user, inters, corpus.key_field, stop,
                              corpus.store_roles)
            for user, inters in corpus.users.items()
        }
        try:
            results = {user: f.result() for user, f in futures.items()}
        finally:
            stop.set()
    seconds = time.perf_counter() - started
    merged: dict[str, set[str]] = {}
    stored = 0
    with api_client(base_url) as client:
        for user, (mapping, written_ids) in results.items():
            keys = stored_keys(client, user, corpus.key_field)
            if set(keys) != written_ids:
                raise EvalError(f"{user}: {len(keys)} memories stored, the jobs wrote "
                                f"{len(written_ids)}")
            stored += len(keys)
            merged[user] = {k for k, mid in mapping.items() if keys[mid] != k}
    items = sum(len(i.items) for inters in corpus.users.values() for i in inters)
    jobs = sum(len(inters) for inters in corpus.users.values())
    return IngestOutcome(items, stored, jobs, seconds, merged)
