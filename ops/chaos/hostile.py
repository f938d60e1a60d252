"""The "hostile tenant" scenario: one tenant sends the hostile corpus
(ops/bench/hostile_corpus.py) at full size through the API while a second tenant writes and
searches.

Both tenants are API keys of one embedded stack (`memoryd up`: gateway and worker threads
in one process, so the hostile work competes with the second tenant's searches for the
same cores and the same interpreter). Checked: every job of both tenants succeeds at its
first attempt, and each hostile job is done, counted from when it was enqueued, within the
task soft time limit (`MEMORYD_TASK_SOFT_TIME_LIMIT_S`); none of the second tenant's
memories is lost or doubled; the second tenant's search p99 under the hostile load is at
most twice its p99 on the idle stack.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from memoryd.platform.settings import Settings
from ops.bench.hostile_corpus import hostile_corpus
from ops.chaos.common import Row, list_contents, tally, wait_jobs
from ops.chaos.embedded import repeated_facts, running
from ops.chaos.procs import UpStack
from ops.stack import ScenarioFailed, wait_until

TENANT_A = "hostile"
TENANT_B = "neighbour"
P99_FACTOR = 2.0
QUERIES = [
    "where does the user live", "what is the user allergic to", "用户喜欢吃什么",
    "the user's job", "favourite colour", "用户的宠物", "travel plans", "用户打算学什么",
    "what car does the user drive", "pets and their names",
]


def _p99(samples_s: list[float]) -> float:
    return float(np.percentile(np.asarray(samples_s) * 1000.0, 99))


def _seconds(start: str | None, end: str | None) -> float:
    if not start or not end:
        return float("inf")
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def hostile_bodies(user: str, messages: int, shapes: int | None) -> list[dict[str, Any]]:
    """One interaction a shape: `messages` user messages of the shape at the maximum size, or
    as many as fit the body limit (JSON escapes a newline in two bytes)."""
    settings = Settings()
    corpus = list(hostile_corpus(settings.max_message_bytes).values())[:shapes]
    bodies = []
    for text in corpus:
        n = min(messages, settings.max_messages)
        while True:
            body = {"user_id": user, "extract": "rules",
                    "messages": [{"role": "user", "content": text}] * n}
            if n == 1 or len(_encoded(body)) <= settings.max_body_bytes:
                break
            n -= 1
        bodies.append(body)
    return bodies


def _post(api: httpx.Client, body: dict[str, Any] | bytes) -> str:
    content = body if isinstance(body, bytes) else _encoded(body)
    answer = api.post("/v1/interactions", content=content,
                      headers={"Content-Type": "application/json"})
    if answer.status_code != 202:
        raise ScenarioFailed(f"enqueue answered {answer.status_code}: {answer.text[:300]}")
    return str(answer.json()["job_id"])


def _search(api: httpx.Client, user: str, query: str) -> float:
    started = time.perf_counter()
    answer = api.post("/v1/search", json={"user_id": user, "query": query, "top_k": 5})
    elapsed = time.perf_counter() - started
    if answer.status_code != 200:
        raise ScenarioFailed(f"search answered {answer.status_code}: {answer.text[:300]}")
    return elapsed


class _HostileSender(threading.Thread):
    """Posts tenant A's interactions, cycling through `bodies`, keeping `in_flight` of them
    queued or running (the worker threads stay busy with hostile text and the backlog stays
    short, so a job's time from enqueue is its own work), until stopped and at least
    `at_least` were sent."""

    def __init__(self, api: httpx.Client, bodies: list[bytes], first: int,
                 at_least: int, in_flight: int) -> None:
        super().__init__(name="hostile-sender", daemon=True)
        self.api, self.bodies, self.next, self.at_least = api, bodies, first, at_least
        self.in_flight = in_flight
        self.jobs: list[str] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def pending(self, jobs: list[str]) -> list[str]:
        return [j for j in jobs if self.api.get(f"/v1/jobs/{j}").json().get("status")
                not in ("succeeded", "failed")]

    def started(self) -> bool:
        return bool(self.jobs) or self.error is not None

    def drained(self) -> bool:
        return not self.pending(self.jobs)

    def run(self) -> None:
        try:
            waiting: list[str] = []
            while not self.stop.is_set() or len(self.jobs) < self.at_least:
                waiting = self.pending(waiting)
                if len(waiting) >= self.in_flight:
                    time.sleep(0.2)
                    continue
                job = _post(self.api, self.bodies[self.next % len(self.bodies)])
                self.next += 1
                self.jobs.append(job)
                waiting.append(job)
        except BaseException as exc:  # reported by the scenario's thread
            self.error = exc


def hostile_tenant(work: Path, messages: int = 64, shapes: int | None = None,
                   searches: int = 400, writes: int = 20, rounds: int = 4,
                   p99_factor: float | None = P99_FACTOR, **settings: object) -> Row:
    """Tenant A sends interactions of `messages` maximum-size messages, one hostile shape
    each (all shapes unless `shapes`), each at least once; tenant B enqueues `writes`
    interactions and searches. In each of `rounds` rounds B first runs searches on the idle
    stack, then as many while A's jobs keep the workers busy: idle and loaded samples
    alternate in time, so other load on the host weighs on both alike. `p99_factor` None:
    the p99s are reported, not checked (tests/faults/ runs it so: no timing bound in CI)."""
    defaults = Settings()
    limit_s = float(defaults.job_soft_time_limit_s)
    key_a, key_b = "mk_" + secrets.token_urlsafe(24), "mk_" + secrets.token_urlsafe(24)
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    # The stack's own key file names tenant A's key; MEMORYD_API_KEYS holds both tenants.
    (data / "api-key").write_text(key_a + "\n")
    stack = UpStack("hostile", data, work, api_keys=f"{key_a}={TENANT_A},{key_b}={TENANT_B}",
                    **settings)
    user_a, user_b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    hostile = hostile_bodies(user_a, messages, shapes)
    # Encoded once: the sender shares this process's interpreter lock with B's timed
    # searches, and re-encoding 1 MB a post would show up in B's latency, not the stack's.
    hostile_raw = [_encoded(body) for body in hostile]
    first, expected = repeated_facts(user_b, writes)
    more, _ = repeated_facts(user_b, writes)  # the same facts again: each stays one memory
    per_round = max(1, searches // rounds)
    notes: list[str] = []
    with running(stack), stack.client(timeout_s=120) as api_a, httpx.Client(
        base_url=stack.base_url, headers={"Authorization": f"Bearer {key_b}"}, timeout=120,
        trust_env=False,
    ) as api_b:
        # B's memories exist before the first search, so every search sees the same store.
        b_jobs = [_post(api_b, body) for body in first]
        wait_jobs(api_b, b_jobs, 300)
        for query in QUERIES:  # warm: the first searches load what later ones reuse
            _search(api_b, user_b, query)
        idle: list[float] = []
        loaded: list[float] = []
        a_jobs: list[str] = []
        sent = 0
        started = time.monotonic()
        for r in range(rounds):
            idle += [_search(api_b, user_b, QUERIES[i % len(QUERIES)])
                     for i in range(per_round)]
            share = -(-len(hostile) * (r + 1) // rounds) - sent  # every shape at least once
            sender = _HostileSender(api_a, hostile_raw, sent, share, defaults.worker_concurrency)
            sender.start()
            wait_until(sender.started, 60, "tenant A's first job of the round")
            for i in range(per_round):
                loaded.append(_search(api_b, user_b, QUERIES[i % len(QUERIES)]))
                if more and i % 5 == 0:
                    b_jobs.append(_post(api_b, more.pop()))
            sender.stop.set()
            sender.join(10 * limit_s)
            if sender.error is not None:
                raise ScenarioFailed(f"sending the hostile corpus failed: {sender.error}")
            sent = sender.next
            a_jobs += sender.jobs
            wait_until(sender.drained, 10 * limit_s, "tenant A's jobs of the round")
        a_elapsed = time.monotonic() - started
        b_jobs += [_post(api_b, body) for body in more]
        wait_jobs(api_b, b_jobs, 300)

        slowest, problems = 0.0, []
        for tenant, client, jobs in (("A", api_a, a_jobs), ("B", api_b, b_jobs)):
            for job_id in jobs:
                view = client.get(f"/v1/jobs/{job_id}").json()
                took = _seconds(view.get("created_at"), view.get("updated_at"))
                if tenant == "A":
                    slowest = max(slowest, took)
                if view.get("status") != "succeeded" or view.get("attempts") != 1:
                    problems.append(f"{tenant} {job_id}: {view.get('status')} after "
                                    f"{view.get('attempts')} attempts: {view.get('error')}")
                elif took > limit_s:
                    problems.append(f"{tenant} {job_id}: {took:.1f}s, over the {limit_s:g}s limit")
        contents = list_contents(api_b, user_b)
        stray = list_contents(api_b, user_a)  # A's user, seen with B's key: must be empty

    idle_p99, loaded_p99 = _p99(idle), _p99(loaded)
    idle_p50, loaded_p50 = (float(np.median(x)) * 1000 for x in (idle, loaded))
    ratio = loaded_p99 / idle_p99
    notes += [
        f"{len(a_jobs)} hostile interactions ({len(hostile)} shapes) of "
        f"{len(hostile[0]['messages'])} messages of {defaults.max_message_bytes} bytes in "
        f"{a_elapsed:.0f}s; slowest job {slowest:.1f}s from enqueue (limit {limit_s:g}s)",
        f"B search p99 {idle_p99:.1f} ms idle, {loaded_p99:.1f} ms under load "
        f"({ratio:.2f}×, bound {p99_factor or '–'}×; p50 {idle_p50:.1f} / {loaded_p50:.1f} ms; "
        f"{len(idle)} + {len(loaded)} searches)",
    ]
    if stray:
        problems.append(f"tenant B sees {len(stray)} memories of tenant A's user")
    if p99_factor is not None and ratio > p99_factor:
        problems.append(f"B's search p99 went {ratio:.2f}× its idle value")
    row = tally("hostile tenant beside a writing, searching one", len(a_jobs) + 2 * writes,
                expected, contents, None, notes)
    if problems:
        counts = (f"B: {row.expected} memories expected, {row.found} found, "
                  f"{row.duplicates} duplicates, {row.lost} lost; {row.sent} interactions sent")
        raise ScenarioFailed("; ".join(problems[:5]) + " | " + counts + "; " + "; ".join(notes))
    return row
